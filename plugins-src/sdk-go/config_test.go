package plugin

import "testing"

func TestNilConfigIsEmptyAndNilFieldsAreAbsent(t *testing.T) {
	f, err := ConfigFields(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := f.Str("a"); s != nil || err != nil || f.Finish() != nil {
		t.Error("nil config")
	}
	f, _ = ConfigFields(Map{{"a", nil}})
	if s, err := f.Str("a"); s != nil || err != nil || f.Finish() != nil {
		t.Error("nil field")
	}
	if _, err := NewFields(nil, "config.env.0"); err == nil || err.Error() != "config.env.0: must be a map, got nil" {
		t.Error(err)
	}
	if _, err := ConfigFields([]Value{1}); err == nil || err.Error() != "config: must be a map, got array" {
		t.Error(err)
	}
}

func TestStrictTypesAndUnknownFields(t *testing.T) {
	f, _ := ConfigFields(Map{{"name", 1}, {"other", true}})
	if _, err := f.Str("name"); err == nil || err.Error() != "config.name: must be a str, got int" {
		t.Error(err)
	}
	if err := f.Finish(); err == nil || err.Error() != "config.other: unknown field" {
		t.Error(err)
	}
	f, _ = ConfigFields(Map{{"m", Map{{"a", "b"}, {"c", nil}}}})
	if _, _, err := f.StringMap("m"); err == nil || err.Error() != "config.m.c: must be a str, got nil" {
		t.Error(err)
	}
	f, _ = ConfigFields(Map{{"b", true}, {"i", 3}, {"n", 2}, {"x", 2.5}, {"a", []Value{}}, {"m", Map{}}})
	b, _ := f.Bool("b")
	i, _ := f.Int("i")
	n, _ := f.Number("n")
	x, _ := f.Number("x")
	a, hasA, _ := f.Array("a")
	m, hasM, _ := f.Map("m")
	if !*b || *i != 3 || *n != 2 || *x != 2.5 || a == nil || !hasA || m == nil || !hasM || f.Finish() != nil {
		t.Error("typed getters")
	}
	f, _ = ConfigFields(Map{{"b", 1}})
	if _, err := f.Bool("b"); err == nil || err.Error() != "config.b: must be a bool, got int" {
		t.Error(err)
	}
	if err := f.Required("team", false); err == nil || err.Error() != "config.team: is required" {
		t.Error(err)
	}
}

func TestTheSnakeCaseSpellingIsAcceptedOnce(t *testing.T) {
	f, _ := ConfigFields(Map{{"value_from", Map{{"a", 1}}}})
	if _, ok, _ := f.Map("valueFrom"); !ok || f.Finish() != nil {
		t.Error("snake_case")
	}
	for _, m := range []Map{{{"value_from", "x"}, {"valueFrom", "y"}}, {{"valueFrom", "y"}, {"value_from", "x"}}} {
		f, _ := ConfigFields(m)
		if s, _ := f.Str("valueFrom"); s == nil || *s != "y" {
			t.Error("camelCase wins")
		}
		if err := f.Finish(); err == nil || err.Error() != "config.value_from: unknown field" {
			t.Error(err)
		}
	}
	// A nil camelCase value leaves the snake_case one in charge.
	f, _ = ConfigFields(Map{{"valueFrom", nil}, {"value_from", "x"}})
	if s, _ := f.Str("valueFrom"); s == nil || *s != "x" || f.Finish() != nil {
		t.Error("nil camelCase")
	}
	for _, c := range []struct {
		key, camel string
		same       bool
	}{
		{"runtime_class_name", "runtimeClassName", true},
		{"runtime_class_nam", "runtimeClassName", false},
		{"runtime_class_namex", "runtimeClassName", false},
		{"runtimeClassName", "runtimeClassName", false},
		{"runtime_Class_name", "runtimeClassName", false},
		{"env", "env", true},
		{"", "", true},
	} {
		if isSnakeCaseOf(c.key, c.camel) != c.same || (SnakeCase(c.camel) == c.key) != c.same {
			t.Errorf("%s %s", c.key, c.camel)
		}
	}
	f, _ = NewFields(Map{{"a", 1}}, "config.x")
	if f.LocOfItem("env", 1207) != "config.x.env.1207" || f.Loc() != "config.x" {
		t.Error("locations")
	}
}
