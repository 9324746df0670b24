package plugin

import (
	"encoding/hex"
	"strings"
	"testing"
)

func env(name, value string) Map { return Map{{"name", name}, {"value", value}} }

func pod(spec Value) Map { return Map{{"metadata", Map{{"name", "p"}}}, {"spec", spec}} }

func paths(ops []Op) string {
	var out []string
	for _, o := range ops {
		out = append(out, o.Kind.String()+" "+o.Path)
	}
	return strings.Join(out, ", ")
}

func sameOps(t *testing.T, got []Op, want ...Op) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d ops (%s), want %d (%s)", len(got), paths(got), len(want), paths(want))
	}
	for i := range got {
		if string(got[i].AppendTo(nil)) != string(want[i].AppendTo(nil)) {
			t.Errorf("op %d: got %s, want %s", i, got[i], want[i])
		}
	}
}

func TestEscapeFollowsRFC6901(t *testing.T) {
	for in, want := range map[string]string{"a/b~c": "a~1b~0c", "~1": "~01", "": "", "/~/": "~1~0~1", "é/x": "é~1x", "plain": "plain"} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMergeCreatesTheMapOnceThenAddsKeys(t *testing.T) {
	p := PodPatchFromValue(pod(Map{{"containers", []Value{Map{{"name", "c"}}}}}))
	p.MergeAnnotations(Map{{"a/b", "1"}}).MergeAnnotations(Map{{"c", "2"}})
	p.MergeAnnotations(nil)
	sameOps(t, p.Ops(), Add("/metadata/annotations", Map{{"a/b", "1"}}), Add("/metadata/annotations/c", "2"))
}

func TestMergeIntoAnExistingMapAddsEscapedKeys(t *testing.T) {
	p := PodPatchFromValue(Map{{"metadata", Map{{"labels", Map{{"x", "y"}}}, {"annotations", nil}}}})
	p.MergeLabels(Map{{"k/e~y", "v"}, {"z", "1"}, {"k/e~y", "w"}})
	p.MergeAnnotations(Map{{"a", "b"}})
	ops, err := p.Result()
	if err != nil {
		t.Fatal(err)
	}
	sameOps(t, ops, Add("/metadata/labels/k~1e~0y", "w"), Add("/metadata/labels/z", "1"), Add("/metadata/annotations", Map{{"a", "b"}}))
}

func TestUpsertEnvAddsTheWholeListWhenAbsent(t *testing.T) {
	p := PodPatchFromValue(pod(Map{
		{"containers", []Value{Map{{"name", "a"}}}},
		{"initContainers", []Value{Map{{"name", "i"}, {"env", []Value{}}}}},
	}))
	a1, b, a2 := env("A", "1"), env("B", "2"), env("A", "3")
	p.UpsertEnv([]Value{a1, b, a2})
	sameOps(t, p.Ops(),
		Add("/spec/containers/0/env", []Value{a2, b}),
		Add("/spec/initContainers/0/env/-", a1),
		Add("/spec/initContainers/0/env/-", b),
		Replace("/spec/initContainers/0/env/0", a2),
	)
	// A second call builds on the first.
	p.UpsertEnv([]Value{b, env("C", "4")})
	want := "replace /spec/containers/0/env/1, add /spec/containers/0/env/-, replace /spec/initContainers/0/env/1, add /spec/initContainers/0/env/-"
	if got := paths(p.Ops()[4:]); got != want {
		t.Errorf("got %s", got)
	}
}

func TestUpsertEnvReplacesTheFirstAndRemovesLaterDuplicates(t *testing.T) {
	existing := []Value{env("A", "0"), env("X", "0"), env("A", "1"), Map{{"value", "no name"}}, env("A", "2")}
	p := PodPatchFromValue(pod(Map{{"containers", []Value{Map{{"name", "c"}, {"env", existing}}}}}))
	a := env("A", "new")
	p.UpsertEnv([]Value{a, a})
	want := "replace /spec/containers/0/env/0, remove /spec/containers/0/env/4, remove /spec/containers/0/env/2, replace /spec/containers/0/env/0"
	if got := paths(p.Ops()); got != want {
		t.Errorf("got %s", got)
	}
	if p.Ops()[1].HasValue() {
		t.Error("remove has a value")
	}
}

func TestImpossiblePodShapesAreErrors(t *testing.T) {
	a := env("A", "1")
	for _, p := range []Map{
		pod("spec"),
		pod(Map{{"containers", "abc"}}),
		pod(Map{{"containers", []Value{nil}}}),
		pod(Map{{"containers", []Value{Map{{"env", []Value{1}}}}}}),
		pod(Map{{"containers", []Value{Map{{"env", 1}}}}}),
		pod(Map{{"containers", []Value{Map{{"name", "c"}}}}}), // the var below has no name
	} {
		patch := PodPatchFromValue(p)
		if strings.Contains(Format(p), `"name": "c"`) {
			patch.UpsertEnv([]Value{Map{{"value", "x"}}})
		} else {
			patch.UpsertEnv([]Value{a})
		}
		if _, err := patch.Result(); err == nil {
			t.Errorf("%s: no error", Format(p))
		}
	}
	p := PodPatchFromValue(Map{{"metadata", nil}})
	p.MergeLabels(Map{{"a", "b"}}).SetRuntimeClassName("x")
	if len(p.Ops()) != 0 {
		t.Error("ops after an error")
	}
	if _, err := p.Result(); err == nil || !strings.Contains(err.Error(), "metadata is a nil") {
		t.Error(err)
	}
	if p := PodPatchFromValue(pod("x")).UpsertEnv([]Value{"not a map"}); p.Err() == nil || p.Err().Error() != "an env var is a str, not a map" {
		t.Error(p.Err())
	}
	// Falsy shapes count as empty, as in Python.
	for _, p := range []Map{
		pod(Map{{"containers", nil}, {"initContainers", ""}}),
		pod(Map{{"containers", []Value{Map{{"env", false}}}}}),
		{{"kind", "Pod"}},
	} {
		if _, err := PodPatchFromValue(p).UpsertEnv([]Value{a}).Result(); err != nil {
			t.Errorf("%s: %v", Format(p), err)
		}
	}
}

func TestReadsThePodFromUndecodedBytes(t *testing.T) {
	var args []Value
	for i := 0; i < 40; i++ {
		args = append(args, strings.Repeat("x", 300))
	}
	p := pod(Map{
		{"initContainers", []Value{Map{{"name", "i"}}}},
		{"containers", []Value{
			Map{{"args", args}, {"env", []Value{env("B", "0"), Map{{"value", "no name"}}}}, {"resources", Map{{"limits", Map{{"gpu", 8}}}}}},
			Map{{"name", "d"}, {"env", nil}},
		}},
		{"nodeSelector", Map{{"k", "v"}}},
	})
	p = append(p, Entry{"status", Map{{"phase", "Running"}}})
	b := Encode(p)
	// A string that is not UTF-8 in a part nobody reads: ["\xc3("] as the last value.
	b[0]++
	b = append(b, 0xa1, 'z', 0x91, 0xa2, 0xc3, 0x28)
	raw := mustRaw(t, b)
	ops, err := NewPodPatch(raw).MergeAnnotations(Map{{"x", "1"}}).MergeLabels(Map{{"y", "2"}}).
		UpsertEnv([]Value{env("A", "1"), env("B", "2")}).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := "add /metadata/annotations, add /metadata/labels, add /spec/containers/0/env/-, replace /spec/containers/0/env/0, add /spec/containers/1/env, add /spec/initContainers/0/env"
	if got := paths(ops); got != want {
		t.Errorf("got %s", got)
	}
	// Not a map at all: an empty Pod, as in Python.
	ops, err = NewPodPatch(RawNil).UpsertEnv([]Value{env("A", "1")}).MergeLabels(Map{{"y", "2"}}).Result()
	if err != nil || paths(ops) != "add /metadata/labels" {
		t.Errorf("%s %v", paths(ops), err)
	}
}

func TestEnvNamesAreComparedAsBytes(t *testing.T) {
	// [{"name": "A\xc3("}, {"name": 5}, {"name": "A"}]: names stay bytes (UTF-8 unchecked); a
	// name that is not a string equals no name.
	list := unhex(t, "9381a46e616d65a341c32881a46e616d650581a46e616d65a141")
	names, what := envNamesOf(mustRaw(t, list))
	if what != "" || len(names) != 3 || names[0].name != "A\xc3(" || names[1].ok || names[2].name != "A" {
		t.Errorf("%+v %q", names, what)
	}
	c := pod(Map{{"containers", []Value{Map{{"env", []Value{}}}}}})
	b := Encode(c)
	i := strings.Index(string(b), "\xa3env\x90")
	b = append(append(append([]byte{}, b[:i+4]...), list...), b[i+5:]...)
	ops, err := NewPodPatch(mustRaw(t, b)).UpsertEnv([]Value{env("A", "x")}).Result()
	if err != nil || paths(ops) != "replace /spec/containers/0/env/2" {
		t.Errorf("%s %v", paths(ops), err)
	}
}

func TestOpEncodingMatchesItsValue(t *testing.T) {
	for _, op := range []Op{Add("/a", []Value{1, 2}), Remove("/b"), Test("/c", nil), Replace("/d", Map{{"x", 1.5}})} {
		if string(op.AppendTo(nil)) != string(Encode(op.ToValue())) {
			t.Errorf("%s", op)
		}
	}
	// msgpack.packb({"patch": [{"op": "remove", "path": "/a"}]}, use_bin_type=True).hex()
	want := "81a5706174636891" + "82a26f70a672656d6f7665a470617468a22f61"
	if got := hex.EncodeToString(PatchResponse([]Op{Remove("/a")})); got != want {
		t.Errorf("got %s", got)
	}
	if PatchResponse(nil) != nil {
		t.Error("an empty patch is the empty response")
	}
	r, err := DecodeResponse(ErrorResponse(""))
	if err != nil || r.Error != EmptyError {
		t.Error(r, err)
	}
	r, err = DecodeResponse(PatchResponse([]Op{Add("/x", 1)}))
	if err != nil || len(r.Patch) != 1 || !Equal(r.Patch[0], Add("/x", 1).ToValue()) {
		t.Error(r, err)
	}
	if _, err := DecodeResponse(Encode(Map{{"other", 1}})); err == nil {
		t.Error("other key")
	}
}
