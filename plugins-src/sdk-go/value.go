package plugin

import "strconv"

// Value is JSON-shaped data as it travels over the ABI. [Decode] gives one of
//
//	nil, bool, int64, uint64 (only above math.MaxInt64), float64, string, []Value, Map
//
// The encoder ([Encode], [AppendValue]) takes these and also the other Go integer and float
// types, []string and []Map. Go maps are not accepted: their order is random, and the host
// keeps keys in order (Python dicts), so a [Map] keeps its entries in the order given.
type Value = any

// Entry is one key and value of a [Map]. It is an alias of an unnamed struct type so that the
// short literals plugin.Map{{"k", v}} and plugin.Entry{"k", v} pass go vet's composites check
// (which flags unkeyed literals of named struct types from other packages).
type Entry = struct {
	Key   string
	Value Value
}

// Map is a msgpack map with string keys, in order. Write one as a literal:
//
//	plugin.Map{{"name", "NCCL_DEBUG"}, {"value", "INFO"}}
type Map []Entry

// Get returns the value of the first entry named key (a decoded Map has no repeated keys).
func (m Map) Get(key string) (Value, bool) {
	for _, e := range m {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// Set is m[key] = value with Python dict semantics: the value of an existing key is replaced
// in place, a new key is appended.
func (m *Map) Set(key string, value Value) {
	for i := range *m {
		if (*m)[i].Key == key {
			(*m)[i].Value = value
			return
		}
	}
	*m = append(*m, Entry{key, value})
}

// TypeName is the name of v's type in messages: "nil", "bool", "int", "float", "str",
// "array" or "map" (what the Rust SDK and the host's messages call them).
func TypeName(v Value) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "bool"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "int"
	case float32, float64:
		return "float"
	case string:
		return "str"
	case []Value, []string, []Map:
		return "array"
	case Map:
		return "map"
	}
	return "unsupported"
}

// Truthy is Python's truthiness: nil, false, 0, 0.0, "", empty arrays and maps are false.
func Truthy(v Value) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case []Value:
		return len(x) != 0
	case []string:
		return len(x) != 0
	case []Map:
		return len(x) != 0
	case Map:
		return len(x) != 0
	case float32:
		return x != 0
	case float64:
		return x != 0
	}
	if i, ok := asInt64(v); ok {
		return i != 0
	}
	return true // a uint64 above MaxInt64
}

// asInt64 is v as an int64 when v is a Go integer that fits.
func asInt64(v Value) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint:
		return int64(x), uint64(x) <= maxInt64
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), x <= maxInt64
	}
	return 0, false
}

const maxInt64 = 1<<63 - 1

// Equal compares two values as the host would after decoding: integers by value whatever
// their Go type, floats by value, arrays and maps item by item (map order matters).
func Equal(a, b Value) bool {
	if x, ok := asInt64(a); ok {
		y, ok := asInt64(b)
		return ok && x == y
	}
	if x, ok := a.(uint64); ok { // above MaxInt64
		y, ok := b.(uint64)
		return ok && x == y
	}
	if x, ok := asFloat(a); ok {
		y, ok := asFloat(b)
		return ok && x == y
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case Map:
		y, ok := b.(Map)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Key != y[i].Key || !Equal(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	}
	xs, ok := asArray(a)
	if !ok {
		return false
	}
	ys, ok := asArray(b)
	if !ok || len(xs) != len(ys) {
		return false
	}
	for i := range xs {
		if !Equal(xs[i], ys[i]) {
			return false
		}
	}
	return true
}

func asFloat(v Value) (float64, bool) {
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// asArray is v as []Value when it is one of the array types the encoder takes.
func asArray(v Value) ([]Value, bool) {
	switch x := v.(type) {
	case []Value:
		return x, true
	case []string:
		out := make([]Value, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, true
	case []Map:
		out := make([]Value, len(x))
		for i, m := range x {
			out[i] = m
		}
		return out, true
	}
	return nil, false
}

// Format renders v compactly, JSON-like, for messages and test failures (not a JSON encoder:
// strings are quoted Go-style).
func Format(v Value) string {
	return string(appendFormat(nil, v))
}

func appendFormat(out []byte, v Value) []byte {
	if i, ok := asInt64(v); ok {
		return strconv.AppendInt(out, i, 10)
	}
	switch x := v.(type) {
	case nil:
		return append(out, "null"...)
	case bool:
		return strconv.AppendBool(out, x)
	case uint64:
		return strconv.AppendUint(out, x, 10)
	case float32:
		return strconv.AppendFloat(out, float64(x), 'g', -1, 64)
	case float64:
		return strconv.AppendFloat(out, x, 'g', -1, 64)
	case string:
		return strconv.AppendQuote(out, x)
	case Map:
		out = append(out, '{')
		for i, e := range x {
			if i > 0 {
				out = append(out, ", "...)
			}
			out = strconv.AppendQuote(out, e.Key)
			out = append(out, ": "...)
			out = appendFormat(out, e.Value)
		}
		return append(out, '}')
	}
	if items, ok := asArray(v); ok {
		out = append(out, '[')
		for i, item := range items {
			if i > 0 {
				out = append(out, ", "...)
			}
			out = appendFormat(out, item)
		}
		return append(out, ']')
	}
	return append(out, "<unsupported>"...)
}
