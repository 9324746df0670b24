package plugin

// Strict config reading with the conventions of the host's config models
// (modelserving.api._base.ApiModel), so a WebAssembly plugin accepts and refuses the same
// configs as a native one:
//
//   - a config object is a map; the top-level config may also be nil (an empty config);
//   - an explicit nil for a field means the field is absent;
//   - types are strict: no coercion (a number where a string is expected is an error);
//   - unknown fields are refused (Finish);
//   - a field is read under its camelCase name, and also accepted under the snake_case name
//     the Python model field has (pydantic's populate_by_name); when both spellings are given
//     the camelCase one is used and the snake_case one is refused as unknown.
//
// Errors read "<location>: <problem>", e.g. "config.env.0.name: must be a str, got int".

import (
	"errors"
	"strconv"
)

// Fields are the fields of one config object being read.
//
//	f, err := plugin.ConfigFields(req.Config)       // nil config = empty config
//	team, err := f.Str("team")                      // "config.team: must be a str, got int"
//	err = f.Required("team", team != nil)           // "config.team: is required"
//	err = f.Finish()                                // "config.other: unknown field"
type Fields struct {
	loc     string
	entries []field // entries with a non-nil value
}

type field struct {
	key   string
	value Value
	read  bool
}

// ConfigFields reads the top-level plugin config (location "config"); nil counts as an empty
// map.
func ConfigFields(config Value) (*Fields, error) {
	if config == nil {
		return &Fields{loc: "config"}, nil
	}
	return NewFields(config, "config")
}

// NewFields reads a config object at loc (e.g. "config.env.0"), which must be a map.
func NewFields(v Value, loc string) (*Fields, error) {
	m, ok := v.(Map)
	if !ok {
		return nil, errors.New(loc + ": must be a map, got " + TypeName(v))
	}
	f := &Fields{loc: loc, entries: make([]field, 0, len(m))}
	for _, e := range m {
		if e.Value != nil {
			f.entries = append(f.entries, field{key: e.Key, value: e.Value})
		}
	}
	return f, nil
}

// Loc is where this object is, for messages.
func (f *Fields) Loc() string { return f.loc }

// LocOf is the location of field name (e.g. "config.runtimeClassName").
func (f *Fields) LocOf(name string) string { return f.loc + "." + name }

// LocOfItem is the location of item index of field name (e.g. "config.env.0").
func (f *Fields) LocOfItem(name string, index int) string {
	return f.LocOf(name) + "." + strconv.Itoa(index)
}

// Get is the (non-nil) value of field name (camelCase; the snake_case spelling is accepted
// too), marked as read.
func (f *Fields) Get(name string) (Value, bool) {
	at := -1
	for i := range f.entries {
		if f.entries[i].key == name {
			at = i
			break
		}
	}
	if at < 0 && hasUpper(name) {
		for i := range f.entries {
			if isSnakeCaseOf(f.entries[i].key, name) {
				at = i
				break
			}
		}
	}
	if at < 0 {
		return nil, false
	}
	f.entries[at].read = true
	return f.entries[at].value, true
}

func (f *Fields) mustBe(name, want string, got Value) error {
	return errors.New(f.LocOf(name) + ": must be " + want + ", got " + TypeName(got))
}

// Str is an optional string field (nil when absent).
func (f *Fields) Str(name string) (*string, error) {
	v, ok := f.Get(name)
	if !ok {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, f.mustBe(name, "a str", v)
	}
	return &s, nil
}

// Bool is an optional bool field (nil when absent).
func (f *Fields) Bool(name string) (*bool, error) {
	v, ok := f.Get(name)
	if !ok {
		return nil, nil
	}
	b, ok := v.(bool)
	if !ok {
		return nil, f.mustBe(name, "a bool", v)
	}
	return &b, nil
}

// Int is an optional integer field that fits an int64 (nil when absent).
func (f *Fields) Int(name string) (*int64, error) {
	v, ok := f.Get(name)
	if !ok {
		return nil, nil
	}
	i, ok := asInt64(v)
	if !ok {
		return nil, f.mustBe(name, "an int", v)
	}
	return &i, nil
}

// Number is an optional number field: an int or a float, as a float (nil when absent).
func (f *Fields) Number(name string) (*float64, error) {
	v, ok := f.Get(name)
	if !ok {
		return nil, nil
	}
	if x, ok := asFloat(v); ok {
		return &x, nil
	}
	if i, ok := asInt64(v); ok {
		x := float64(i)
		return &x, nil
	}
	if u, ok := v.(uint64); ok {
		x := float64(u)
		return &x, nil
	}
	return nil, f.mustBe(name, "a number", v)
}

// Array is an optional array field (nil when absent).
func (f *Fields) Array(name string) ([]Value, bool, error) {
	v, ok := f.Get(name)
	if !ok {
		return nil, false, nil
	}
	a, ok := v.([]Value)
	if !ok {
		return nil, false, f.mustBe(name, "an array", v)
	}
	return a, true, nil
}

// Map is an optional map field with any values.
func (f *Fields) Map(name string) (Map, bool, error) {
	v, ok := f.Get(name)
	if !ok {
		return nil, false, nil
	}
	m, ok := v.(Map)
	if !ok {
		return nil, false, f.mustBe(name, "a map", v)
	}
	return m, true, nil
}

// StringMap is an optional map of strings to strings (every value in the Map is a string; a
// nil value inside is an error, as in pydantic).
func (f *Fields) StringMap(name string) (Map, bool, error) {
	m, ok, err := f.Map(name)
	if !ok || err != nil {
		return nil, ok, err
	}
	for _, e := range m {
		if _, ok := e.Value.(string); !ok {
			return nil, true, errors.New(f.LocOf(name) + "." + e.Key + ": must be a str, got " + TypeName(e.Value))
		}
	}
	return m, true, nil
}

// Required is the error "<loc>: is required" when present is false.
func (f *Fields) Required(name string, present bool) error {
	if present {
		return nil
	}
	return errors.New(f.LocOf(name) + ": is required")
}

// Finish refuses the fields not read: "<loc>.<key>: unknown field" for the first one.
func (f *Fields) Finish() error {
	for _, e := range f.entries {
		if !e.read {
			return errors.New(f.loc + "." + e.key + ": unknown field")
		}
	}
	return nil
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// isSnakeCaseOf reports whether key == SnakeCase(camel), without building it.
func isSnakeCaseOf(key, camel string) bool {
	k := 0
	for i := 0; i < len(camel); i++ {
		c := camel[i]
		if 'A' <= c && c <= 'Z' {
			if k+1 >= len(key) || key[k] != '_' || key[k+1] != c+('a'-'A') {
				return false
			}
			k += 2
		} else {
			if k >= len(key) || key[k] != c {
				return false
			}
			k++
		}
	}
	return k == len(key)
}

// SnakeCase turns runtimeClassName into runtime_class_name (the inverse of pydantic's
// to_camel for plain field names).
func SnakeCase(camel string) string {
	out := make([]byte, 0, len(camel)+4)
	for i := 0; i < len(camel); i++ {
		c := camel[i]
		if 'A' <= c && c <= 'Z' {
			out = append(out, '_', c+('a'-'A'))
		} else {
			out = append(out, c)
		}
	}
	return string(out)
}
