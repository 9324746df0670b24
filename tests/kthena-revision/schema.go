package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"modelserving.dev/tests/kthena-revision/v1alpha1"
)

// A typeInfo describes one Go type for the Python renderer: how spew names it (Spew), what
// kind of value it is, and what it contains. Types are keyed by an id that is unique across
// packages (package path + name for named types, built from the element ids for the others).
type typeInfo struct {
	Spew string `json:"spew"`
	// Kind: struct, ptr, slice, map, string, bool, int, uint, float, or a decoder for the types
	// whose UnmarshalJSON decides their fields: quantity (resource.Quantity), intorstring.
	Kind   string      `json:"kind"`
	Elem   string      `json:"elem,omitempty"`
	Key    string      `json:"key,omitempty"`
	Fields []fieldInfo `json:"fields,omitempty"`
}

// A fieldInfo is one struct field in declaration order. JSON is the key it is decoded from
// (empty when JSON never sets it: unexported, or tagged "-"); Inline marks an embedded struct
// whose fields are read from the enclosing JSON object.
type fieldInfo struct {
	Name   string `json:"name"`
	JSON   string `json:"json,omitempty"`
	Inline bool   `json:"inline,omitempty"`
	Type   string `json:"type"`
}

type schemaDoc struct {
	Comment string              `json:"comment"`
	Root    string              `json:"root"`
	Types   map[string]typeInfo `json:"types"`
}

var (
	unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	decoders        = map[reflect.Type]string{
		reflect.TypeOf(resource.Quantity{}):  "quantity",
		reflect.TypeOf(intstr.IntOrString{}): "intorstring",
		reflect.TypeOf(metav1.Time{}):        "time",
		reflect.TypeOf(metav1.FieldsV1{}):    "fieldsv1",
	}
)

// kthenaPkg is where Kthena declares the Role types; the ids name it, as the real package would.
const kthenaPkg = "github.com/volcano-sh/kthena/pkg/apis/workload/v1alpha1"

func typeID(t reflect.Type) string {
	switch {
	case t.Name() != "" && t.PkgPath() == "":
		return t.Name()
	case t.Name() != "" && t.PkgPath() == reflect.TypeOf(v1alpha1.Role{}).PkgPath():
		return kthenaPkg + "." + t.Name()
	case t.Name() != "":
		return t.PkgPath() + "." + t.Name()
	case t.Kind() == reflect.Ptr:
		return "*" + typeID(t.Elem())
	case t.Kind() == reflect.Slice:
		return "[]" + typeID(t.Elem())
	case t.Kind() == reflect.Map:
		return "map[" + typeID(t.Key()) + "]" + typeID(t.Elem())
	}
	panic(fmt.Sprintf("unnamed type %s of kind %s", t, t.Kind()))
}

type collector struct {
	types map[string]typeInfo
}

func (c *collector) add(t reflect.Type, viaDecoder bool) (string, error) {
	id := typeID(t)
	if _, seen := c.types[id]; seen {
		return id, nil
	}
	info := typeInfo{Spew: t.String()}
	c.types[id] = info // placeholder against recursion
	if dec, ok := decoders[t]; ok {
		info.Kind = dec
		viaDecoder = true
	} else if !viaDecoder && reflect.PointerTo(t).Implements(unmarshalerType) {
		return "", fmt.Errorf("%s decodes itself (UnmarshalJSON) and the renderer has no decoder for it", t)
	}
	switch t.Kind() {
	case reflect.Struct:
		if info.Kind == "" {
			info.Kind = "struct"
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			fid, err := c.add(f.Type, viaDecoder)
			if err != nil {
				return "", fmt.Errorf("%s.%s: %w", t, f.Name, err)
			}
			fi := fieldInfo{Name: f.Name, Type: fid}
			if !viaDecoder && f.IsExported() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				switch {
				case name == "-":
				case name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct:
					fi.Inline = true
				case name == "" && f.Anonymous:
					return "", fmt.Errorf("%s.%s: an embedded non-struct without a JSON name is not rendered", t, f.Name)
				case name == "":
					fi.JSON = f.Name
				default:
					fi.JSON = name
				}
			}
			info.Fields = append(info.Fields, fi)
		}
	case reflect.Ptr, reflect.Slice:
		if info.Kind == "" {
			info.Kind = map[reflect.Kind]string{reflect.Ptr: "ptr", reflect.Slice: "slice"}[t.Kind()]
		}
		eid, err := c.add(t.Elem(), viaDecoder)
		if err != nil {
			return "", err
		}
		info.Elem = eid
	case reflect.Map:
		info.Kind = "map"
		if t.Key().Kind() != reflect.String {
			return "", fmt.Errorf("%s: only string map keys are rendered", t)
		}
		kid, err := c.add(t.Key(), viaDecoder)
		if err != nil {
			return "", err
		}
		eid, err := c.add(t.Elem(), viaDecoder)
		if err != nil {
			return "", err
		}
		info.Key, info.Elem = kid, eid
	case reflect.String:
		info.Kind = "string"
	case reflect.Bool:
		info.Kind = "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		info.Kind = "int"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		info.Kind = "uint"
	case reflect.Float32, reflect.Float64:
		info.Kind = "float"
	default:
		return "", fmt.Errorf("%s: kind %s is not rendered", t, t.Kind())
	}
	if decoders[t] != "" {
		info.Kind = decoders[t]
	}
	c.types[id] = info
	return id, nil
}

func runSchema(w io.Writer) error {
	c := &collector{types: map[string]typeInfo{}}
	root, err := c.add(reflect.TypeOf(v1alpha1.Role{}), false)
	if err != nil {
		return err
	}
	doc := schemaDoc{
		Comment: "Generated by tests/kthena-revision (make kthena-types): the Go types of Kthena's " +
			"Role as go-spew renders them for Kthena's revision hashes. Do not edit.",
		Root:  root,
		Types: c.types,
	}
	out, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return err
	}
	// encoding/json sorts map keys, so the output is stable.
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}
