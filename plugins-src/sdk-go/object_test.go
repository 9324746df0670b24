package plugin

import (
	"errors"
	"strings"
	"testing"
)

// hostObjectsResponse is msgpack.packb({"objects": [{"apiVersion": "v1", "kind": "ConfigMap",
// "metadata": {"name": "llama-0-x"}, "data": {"a-0": "10.1.0.1", "a-0.json": <the JSON>}}]},
// use_bin_type=True), as the host's Python gives it.
const hostObjectsResponse = "81a76f626a656374739184aa61706956657273696f6ea27631a46b696e64a9436f6e6669674d6170a86d6574616461746181a46e616d65a96c6c616d612d302d78a46461746182a3612d30a831302e312e302e31a8612d302e6a736f6ed92f7b22646e73223a226c6c616d612d302d612d302d302e73657276696e67222c226970223a2231302e312e302e31227d"

func addressMap() Object {
	return ConfigMap("llama-0-x", Map{{"a-0", "10.1.0.1"}, {"a-0.json", `{"dns":"llama-0-a-0-0.serving","ip":"10.1.0.1"}`}})
}

func TestObjectsResponseIsTheHostsBytes(t *testing.T) {
	objects := []Object{addressMap()}
	if err := ValidateObjects(objects); err != nil {
		t.Fatal(err)
	}
	out := ObjectsResponse(objects)
	if string(out) != string(unhex(t, hostObjectsResponse)) {
		t.Fatalf("%x", out)
	}
	r, err := DecodeResponse(out)
	if err != nil || len(r.Objects) != 1 || r.Objects[0].String() != objects[0].String() {
		t.Error(err, r)
	}
	if ObjectsResponse(nil) != nil || ObjectsResponse([]Object{}) != nil {
		t.Error("no objects is the empty response")
	}
}

func TestOptionalObjectFieldsAreWrittenOnlyWhenSet(t *testing.T) {
	o := Object{APIVersion: "v1", Kind: "ConfigMap", Name: "g-0-a"}
	if got := o.String(); got != `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "g-0-a"}}` {
		t.Error(got)
	}
	o.Namespace, o.Labels, o.Annotations, o.Data = "ns", Map{}, Map{{"a", "b"}}, Map{}
	want := `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "g-0-a", "namespace": "ns", "labels": {}, "annotations": {"a": "b"}}, "data": {}}`
	if got := o.String(); got != want {
		t.Error(got)
	}
	r, err := DecodeResponse(ObjectsResponse([]Object{o}))
	if err != nil || len(r.Objects) != 1 || r.Objects[0].String() != want {
		t.Error(err, r)
	}
}

func TestValidObjects(t *testing.T) {
	full := addressMap()
	full.Namespace, full.Labels, full.Annotations = "serving", Map{{"a", "b"}}, Map{{"c", ""}}
	for _, objects := range [][]Object{
		nil,
		{},
		{addressMap()},
		{full, ConfigMap("llama-0-y", nil)},
		make([]Object, MaxObjects), // the shape only: empty names are the policy's business
	} {
		if err := ValidateObjects(objects); err != nil {
			t.Errorf("%v: %v", objects, err)
		}
	}
}

// The shape rules of abi/README.md 15.4 a Go Object can break, in the host's words and order.
func TestInvalidObjectsAreRefusedAsTheHostRefusesThem(t *testing.T) {
	with := func(f func(o *Object)) Object {
		o := addressMap()
		f(&o)
		return o
	}
	ok := addressMap()
	cases := []struct {
		objects []Object
		want    string
	}{
		{make([]Object, MaxObjects+1), "the response has 17 objects; the limit is 16"},
		{[]Object{ok, with(func(o *Object) { o.Data = Map{{"hccl.json", 1}} })}, "objects[1].data.hccl.json must be a string, not an integer"},
		{[]Object{with(func(o *Object) { o.Data = Map{{"k", nil}} })}, "objects[0].data.k must be a string, not nil"},
		{[]Object{with(func(o *Object) { o.Data = Map{{"k", 1.5}} })}, "objects[0].data.k must be a string, not a float"},
		{[]Object{with(func(o *Object) { o.Data = Map{{"k", true}} })}, "objects[0].data.k must be a string, not a bool"},
		{[]Object{with(func(o *Object) { o.Data = Map{{"k", []string{}}} })}, "objects[0].data.k must be a string, not an array"},
		{[]Object{with(func(o *Object) { o.Data = Map{{"k", Map{}}} })}, "objects[0].data.k must be a string, not a map"},
		{[]Object{with(func(o *Object) { o.Data = Map{{"k", map[string]string{}}} })}, "objects[0].data.k must be a string, not a value of another Go type"},
		{[]Object{with(func(o *Object) { o.Labels = Map{{"app", 2}} })}, "objects[0].metadata.labels.app must be a string, not an integer"},
		{[]Object{with(func(o *Object) { o.Annotations = Map{{"note", uint64(1 << 63)}} })}, "objects[0].metadata.annotations.note must be a string, not an integer"},
		// Beyond the host's rules: a key twice, and strings the host could not decode.
		{[]Object{with(func(o *Object) { o.Data = Map{{"k", "a"}, {"j", "b"}, {"k", "c"}} })}, "objects[0].data has the key 'k' twice"},
		{[]Object{with(func(o *Object) { o.Name = "llama-0-\xff" })}, "objects[0].metadata.name is not valid UTF-8"},
		{[]Object{with(func(o *Object) { o.Kind = "\xc3" })}, "objects[0].kind is not valid UTF-8"},
		{[]Object{with(func(o *Object) { o.Data = Map{{"k\xff", "v"}} })}, "objects[0].data has a key that is not valid UTF-8"},
		{[]Object{with(func(o *Object) { o.Labels = Map{{"k", "v\xff"}} })}, "objects[0].metadata.labels.k is not valid UTF-8"},
		// The order: what is not JSON first, then the count, then object by object, labels,
		// annotations, data.
		{append(make([]Object, MaxObjects+1), with(func(o *Object) { o.Namespace = "\xff" })), "objects[17].metadata.namespace is not valid UTF-8"},
		{append(make([]Object, MaxObjects), with(func(o *Object) { o.Data = Map{{"k", 1}} })), "the response has 17 objects"},
		{[]Object{with(func(o *Object) { o.Data, o.Annotations = Map{{"k", 1}}, Map{{"a", 1}} })}, "objects[0].metadata.annotations.a must be"},
		{[]Object{with(func(o *Object) { o.Data = Map{{"k", 1}} }), with(func(o *Object) { o.Labels = Map{{"l", 1}} })}, "objects[0].data.k must be"},
	}
	for _, c := range cases {
		err := ValidateObjects(c.objects)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

func TestDecodeResponseReadsObjects(t *testing.T) {
	for _, c := range []struct {
		response Value
		want     string
	}{
		{Map{{"objects", []Value{1}}}, "response: objects[0]: {apiVersion, kind, metadata {name, ...}, data} expected, got 1"},
		{Map{{"objects", []Value{Map{{"kind", "ConfigMap"}, {"metadata", Map{}}}}}}, "response: objects[0]"},
		{Map{{"objects", []Value{Map{{"metadata", Map{{"name", "n"}, {"uid", "u"}}}}}}}, "response: objects[0]"},
		{Map{{"objects", []Value{Map{{"metadata", Map{{"name", "n"}}}, {"status", nil}}}}}, "response: objects[0]"},
		{Map{{"objects", []Value{Map{{"metadata", Map{{"name", "n"}}}, {"data", 1}}}}}, "response: objects[0]"},
		{Map{{"objects", Map{}}}, "response: unexpected 'objects' (map)"},
	} {
		if _, err := DecodeResponse(Encode(c.response)); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	r, err := DecodeResponse(Encode(Map{{"objects", []Value{Map{{"metadata", Map{{"name", "n"}, {"labels", nil}}}, {"data", nil}}}}}))
	if err != nil || len(r.Objects) != 1 || r.Objects[0].Name != "n" || r.Objects[0].Data != nil || r.Objects[0].Labels != nil {
		t.Error(err, r)
	}
}

func groupPlugin(objects []Object, err error) Plugin {
	return Plugin{OnServingGroupChange: func(req *Request) ([]Object, error) {
		Info("group " + req.ServingGroup + " has " + req.Pods[0].PodIP)
		return objects, err
	}}
}

func TestCallRunsTheServingGroupHook(t *testing.T) {
	speakV3(t)
	request := unhex(t, hostGroupRequest)
	p := groupPlugin([]Object{addressMap()}, nil)
	if !p.Implements(OnServingGroupChange) || p.Implements(OnPodCreate) {
		t.Error("Implements")
	}
	TakeLogs()
	out, ok := p.Call(OnServingGroupChange, request)
	if !ok || string(out) != string(unhex(t, hostObjectsResponse)) {
		t.Fatalf("%v %x", ok, out)
	}
	if logs := TakeLogs(); len(logs) != 1 || logs[0] != (LogLine{LevelInfo, "group llama-0 has 10.1.0.1"}) {
		t.Error(logs)
	}
	for _, c := range []struct {
		p    Plugin
		want string
	}{
		{groupPlugin(nil, errors.New("no rank table yet")), "no rank table yet"},
		{groupPlugin(nil, errors.New("")), EmptyError},
		{groupPlugin([]Object{ConfigMap("llama-0-x", Map{{"k", 1}})}, nil), "objects[0].data.k must be a string, not an integer"},
	} {
		out, _ := c.p.Call(OnServingGroupChange, request)
		if r, err := DecodeResponse(out); err != nil || r.Error != c.want {
			t.Error(err, r, c.want)
		}
	}
	// No objects: the empty response (the host deletes the plugin's objects of the group).
	empty := groupPlugin(nil, nil)
	if out, ok := empty.Call(OnServingGroupChange, request); !ok || len(out) != 0 {
		t.Error(out)
	}
	// The request must be for the hook.
	out, _ = p.Call(OnServingGroupChange, Encode(podRequest()))
	if r, _ := DecodeResponse(out); r.Error != "request for hook OnPodCreate sent to ms_on_serving_group_change" {
		t.Error(r)
	}
	if _, err := p.Run(OnServingGroupChange, request); err != nil {
		t.Error(err)
	}
}

func TestTheServingGroupHookNeedsTheV3Marker(t *testing.T) {
	v3 = nil
	p := groupPlugin([]Object{addressMap()}, nil)
	out, ok := p.Call(OnServingGroupChange, unhex(t, hostGroupRequest))
	r, _ := DecodeResponse(out)
	want := `the plugin implements OnServingGroupChange, which needs ABI v3: import _ "modelserving.dev/plugin/abiv3" in its main package (it exports the marker modelserving_abi_v3)`
	if !ok || r.Error != want {
		t.Error(ok, r)
	}
}
