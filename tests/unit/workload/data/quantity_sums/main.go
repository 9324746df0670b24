// Prints, for each case on stdin (a JSON list of [quantity, multiplier] pairs), the JSON that
// Kthena's aggregateResources would emit for one resource: copy, Mul, Add in order.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/api/resource"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := []any{}
	for in.Scan() {
		var terms [][2]any
		if err := json.Unmarshal(in.Bytes(), &terms); err != nil {
			panic(err)
		}
		var total *resource.Quantity
		bad := ""
		for _, t := range terms {
			q, err := resource.ParseQuantity(t[0].(string))
			if err != nil {
				bad = err.Error()
				break
			}
			c := q.DeepCopy()
			c.Mul(int64(t[1].(float64)))
			if total == nil {
				total = &c
			} else {
				total.Add(c)
			}
		}
		if bad != "" {
			out = append(out, map[string]any{"terms": terms, "error": bad})
			continue
		}
		b, _ := json.Marshal(total)
		var s string
		_ = json.Unmarshal(b, &s)
		out = append(out, map[string]any{"terms": terms, "sum": s})
	}
	b, _ := json.MarshalIndent(out, "", " ")
	fmt.Println(string(b))
}
