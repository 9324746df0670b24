package plugin

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func sample() Map {
	var big []Value
	for i := 0; i < 20; i++ {
		big = append(big, 300)
	}
	var m Map
	for i := 0; i < 20; i++ {
		m = append(m, Entry{"k" + strconv.Itoa(i), i})
	}
	return Map{
		{"a", 1},
		{"b", []Value{strings.Repeat("x", 40), Map{{"c", 1.5}, {"d", nil}}, -5, uint64(math.MaxUint64), true}},
		{"é", "ü"},
		{"big", big},
		{"m", m},
	}
}

func mustRaw(t *testing.T, b []byte) Raw {
	t.Helper()
	r, err := NewRaw(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRawNavigatesWithoutDecoding(t *testing.T) {
	v := mustRaw(t, Encode(sample()))
	if v.Kind() != KindMap || v.Len() != 5 {
		t.Fatalf("%s %d", v.Kind(), v.Len())
	}
	if a, ok := v.Get("a"); !ok {
		t.Error("a")
	} else if i, ok := a.Int(); !ok || i != 1 {
		t.Error("a=1")
	}
	if s, ok := v.Get("é"); !ok {
		t.Error("é")
	} else if str, _ := s.Str(); str != "ü" {
		t.Errorf("é=%q", str)
	}
	if _, ok := v.Get("zz"); ok {
		t.Error("zz found")
	}
	b, _ := v.Get("b")
	var kinds []string
	for it := b.Items(); it.Next(); {
		kinds = append(kinds, it.Value().TypeName())
	}
	if strings.Join(kinds, ",") != "str,map,int,int,bool" {
		t.Errorf("kinds %v", kinds)
	}
	item := func(i int) Raw {
		r, ok := b.Item(i)
		if !ok {
			t.Fatalf("item %d", i)
		}
		return r
	}
	if item(0).Len() != 40 {
		t.Error("len 40")
	}
	if c, _ := item(1).Get("c"); true {
		if f, ok := c.Float(); !ok || f != 1.5 {
			t.Error("c=1.5")
		}
	}
	if d, ok := item(1).Get("d"); !ok || !d.IsNil() {
		t.Error("d nil")
	}
	if i, ok := item(2).Int(); !ok || i != -5 {
		t.Error("-5")
	}
	if u, ok := item(3).Uint(); !ok || u != math.MaxUint64 {
		t.Error("MaxUint64")
	}
	if _, ok := item(3).Int(); ok {
		t.Error("MaxUint64 as int64")
	}
	if x, ok := item(4).Bool(); !ok || !x {
		t.Error("true")
	}
	if _, ok := b.Item(5); ok {
		t.Error("item 5")
	}
	if k19, ok := v.Path("m", "k19"); !ok {
		t.Error("m.k19")
	} else if i, _ := k19.Int(); i != 19 {
		t.Error("k19=19")
	}
	var keys []string
	for it := v.Entries(); it.Next(); {
		k, _ := it.Key().Str()
		keys = append(keys, k)
	}
	if strings.Join(keys, ",") != "a,b,é,big,m" {
		t.Errorf("keys %v", keys)
	}
	whole, err := v.Value()
	if err != nil || !Equal(whole, sample()) {
		t.Errorf("Value: %v", err)
	}
	want, _ := sample().Get("b")
	if got, err := b.Value(); err != nil || !Equal(got, want) {
		t.Errorf("b.Value: %v", err)
	}
	// Navigation on a non-container is empty.
	a, _ := v.Get("a")
	items, entries := a.Items(), a.Entries()
	if _, ok := a.Get("x"); ok || items.Next() || entries.Next() || a.Len() != 0 {
		t.Error("navigation on an int")
	}
	var zero Raw
	if !zero.IsNil() || zero.Kind() != KindNil || !RawNil.IsNil() {
		t.Error("zero Raw is nil")
	}
}

func TestRawChecksFramingOnly(t *testing.T) {
	for _, h := range []string{"91c40100", "81a161d40000", "92c0", "daffff61", "c1", "c0c0", "", "dd7fffffff", "df7fffffff"} {
		if _, err := NewRaw(unhex(t, h)); err == nil {
			t.Errorf("%s accepted", h)
		}
	}
	// Not UTF-8, a non-string key, NaN: well framed, so accepted; refused only when read.
	for _, h := range []string{"a2c328", "810100", "cb7ff8000000000000"} {
		r, err := NewRaw(unhex(t, h))
		if err != nil {
			t.Errorf("%s: %v", h, err)
			continue
		}
		if _, err := r.Value(); err == nil {
			t.Errorf("%s decodes", h)
		}
	}
	r := mustRaw(t, unhex(t, "a2c328"))
	if _, ok := r.Str(); ok {
		t.Error("Str of invalid UTF-8")
	}
	if b, ok := r.StrBytes(); !ok || string(b) != "\xc3(" {
		t.Error("StrBytes")
	}
	deep := append([]byte(strings.Repeat("\x91", 300)), 0xc0)
	r = mustRaw(t, deep) // navigation needs no depth limit
	if _, err := r.Value(); err == nil {
		t.Error("300 levels decode")
	}
	if r.Bytes()[0] != 0x91 || len(r.Bytes()) != 301 {
		t.Error("Bytes")
	}
}

func TestRawScalarsAndTruthiness(t *testing.T) {
	cases := []struct {
		v      Value
		truthy bool
	}{
		{nil, false}, {false, false}, {true, true}, {0, false}, {-1, true}, {uint64(math.MaxUint64), true},
		{0.0, false}, {2.5, true}, {"", false}, {"x", true}, {[]Value{}, false}, {[]Value{nil}, true},
		{Map{}, false}, {Map{{"a", nil}}, true},
	}
	for _, c := range cases {
		r := mustRaw(t, Encode(c.v))
		if r.Truthy() != c.truthy || r.TypeName() != TypeName(c.v) {
			t.Errorf("%s: truthy %v type %s", Format(c.v), r.Truthy(), r.TypeName())
		}
	}
	if f, ok := mustRaw(t, unhex(t, "ca3fc00000")).Float(); !ok || f != 1.5 {
		t.Error("float32")
	}
	if i, ok := mustRaw(t, unhex(t, "d1ff7f")).Int(); !ok || i != -129 {
		t.Error("int16")
	}
	if _, ok := mustRaw(t, unhex(t, "ff")).Uint(); ok {
		t.Error("Uint of -1")
	}
}
