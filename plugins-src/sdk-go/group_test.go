package plugin

import (
	"encoding/hex"
	"strings"
	"testing"

	"modelserving.dev/plugin/internal/abiversion"
)

// speakV3 makes the package behave as in a module that imports modelserving.dev/plugin/abiv3,
// for one test.
func speakV3(t *testing.T) {
	t.Helper()
	SpeakABIv3(abiversion.Token{})
	t.Cleanup(func() { v3 = nil })
}

// hostGroupRequest is what the host's encoder (RequestEncoder.group_hook) gives for plugin
// "entry" {mountPath: /x}, ModelServing {kind, metadata {name: llama, namespace: serving}},
// ServingGroup llama-0, 3 expected Pods and two of them: the entry, scheduled, running and ready
// with annotations {x: y, é: ü}, and a worker with no facts yet.
const hostGroupRequest = "87aa61626956657273696f6e03a4686f6f6bb44f6e53657276696e6747726f75704368616e6765a6706c7567696e82a46e616d65a5656e747279a6636f6e66696781a96d6f756e7450617468a22f78ac6d6f64656c53657276696e6782a46b696e64ac4d6f64656c53657276696e67a86d6574616461746182a46e616d65a56c6c616d61a96e616d657370616365a773657276696e67ac73657276696e6747726f7570a76c6c616d612d30ac6578706563746564506f647303a4706f6473928aa46e616d65ad6c6c616d612d302d612d302d30a8726f6c654e616d65a161a6726f6c654964a3612d30a76973456e747279c3a46e6f6465a66e6f64652d31a6686f73744950a831302e302e302e31a5706f644950a831302e312e302e31a57068617365a752756e6e696e67a57265616479c3ab616e6e6f746174696f6e7382a178a179a2c3a9a2c3bc8aa46e616d65ad6c6c616d612d302d612d302d31a8726f6c654e616d65a161a6726f6c654964a3612d30a76973456e747279c2a46e6f6465a0a6686f73744950a0a5706f644950a0a57068617365a0a57265616479c2ab616e6e6f746174696f6e7380"

func groupPods() []GroupPod {
	return []GroupPod{
		{Name: "llama-0-a-0-0", RoleName: "a", RoleID: "a-0", IsEntry: true, Node: "node-1", HostIP: "10.0.0.1",
			PodIP: "10.1.0.1", Phase: "Running", Ready: true, Annotations: Map{{"x", "y"}, {"é", "ü"}}},
		{Name: "llama-0-a-0-1", RoleName: "a", RoleID: "a-0", Annotations: Map{}},
	}
}

func groupRequest() Map {
	pods := []Value{}
	for _, p := range groupPods() {
		pods = append(pods, Map{
			{"name", p.Name}, {"roleName", p.RoleName}, {"roleId", p.RoleID}, {"isEntry", p.IsEntry},
			{"node", p.Node}, {"hostIP", p.HostIP}, {"podIP", p.PodIP}, {"phase", p.Phase}, {"ready", p.Ready},
			{"annotations", p.Annotations},
		})
	}
	return Map{
		{"abiVersion", 3},
		{"hook", "OnServingGroupChange"},
		{"plugin", Map{{"name", "entry"}, {"config", Map{{"mountPath", "/x"}}}}},
		{"modelServing", Map{{"kind", "ModelServing"}, {"metadata", Map{{"name", "llama"}, {"namespace", "serving"}}}}},
		{"servingGroup", "llama-0"},
		{"expectedPods", 3},
		{"pods", pods},
	}
}

func TestDecodesTheHostsServingGroupRequest(t *testing.T) {
	speakV3(t)
	b := unhex(t, hostGroupRequest)
	if string(Encode(groupRequest())) != string(b) {
		t.Fatal("the test's request is not the host's")
	}
	r, err := DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if r.ABIVersion != 3 || r.Hook != OnServingGroupChange || r.PluginName != "entry" || !Equal(r.Config, Map{{"mountPath", "/x"}}) ||
		r.ServingGroup != "llama-0" || r.ExpectedPods != 3 || r.Namespace() != "serving" ||
		r.RoleName != "" || r.RoleID != "" || r.IsEntry || !r.Pod.IsNil() {
		t.Errorf("%+v", r)
	}
	want := groupPods()
	if len(r.Pods) != len(want) {
		t.Fatal(r.Pods)
	}
	for i := range want {
		got, w := r.Pods[i], want[i]
		if !Equal(got.Annotations, w.Annotations) {
			t.Error(i, got.Annotations)
		}
		type facts struct {
			name, roleName, roleID, node, hostIP, podIP, phase string
			isEntry, ready                                     bool
		}
		of := func(p GroupPod) facts {
			return facts{p.Name, p.RoleName, p.RoleID, p.Node, p.HostIP, p.PodIP, p.Phase, p.IsEntry, p.Ready}
		}
		if of(got) != of(w) {
			t.Errorf("pods[%d]: %+v, want %+v", i, got, w)
		}
	}
	if string(r.Encode()) != string(b) {
		t.Error("Encode does not give the request back")
	}
	// Built by hand, with ABIVersion 0: a group request says 3.
	r.ABIVersion = 0
	if string(r.Encode()) != string(b) {
		t.Error("ABIVersion 0")
	}
}

func TestAGroupRequestMayHaveNoPods(t *testing.T) {
	speakV3(t)
	m := groupRequest()
	m.Set("pods", []Value{})
	m.Set("expectedPods", 0)
	r, err := DecodeRequest(Encode(m))
	if err != nil || r.Pods == nil || len(r.Pods) != 0 || r.ExpectedPods != 0 {
		t.Error(err, r)
	}
}

func TestNamespaceIsTheModelServingsOrDefault(t *testing.T) {
	speakV3(t)
	for _, c := range []struct {
		meta Value
		want string
	}{
		{Map{{"name", "llama"}, {"namespace", "serving"}}, "serving"},
		{Map{{"name", "llama"}}, "default"},
		{Map{{"namespace", ""}}, "default"},
		{nil, "default"},
	} {
		m := groupRequest()
		m.Set("modelServing", Map{{"kind", "ModelServing"}, {"metadata", c.meta}})
		r, err := DecodeRequest(Encode(m))
		if err != nil || r.Namespace() != c.want {
			t.Error(err, c.meta, r.Namespace())
		}
	}
	r, _ := DecodeRequest(Encode(Map{{"abiVersion", 1}, {"hook", "ValidateConfig"}, {"plugin", Map{{"name", "p"}}}}))
	if r.Namespace() != "" {
		t.Error(r.Namespace())
	}
	// The Pod hooks have it too.
	r, _ = DecodeRequest(Encode(podRequest()))
	if r.Namespace() != "default" {
		t.Error(r.Namespace())
	}
}

func TestGroupRequestErrorsSayWhatIsWrong(t *testing.T) {
	speakV3(t)
	with := func(key string, value Value) Map {
		m := groupRequest()
		for i := range m {
			if m[i].Key == key {
				if value == "<absent>" {
					return append(m[:i:i], m[i+1:]...)
				}
				m[i].Value = value
			}
		}
		return m
	}
	pod := func(key string, value Value) Map {
		p := Map{
			{"name", "p"}, {"roleName", "a"}, {"roleId", "a-0"}, {"isEntry", true}, {"node", ""}, {"hostIP", ""},
			{"podIP", ""}, {"phase", ""}, {"ready", false}, {"annotations", Map{}},
		}
		for i := range p {
			if p[i].Key == key {
				if value == "<absent>" {
					p = append(p[:i:i], p[i+1:]...)
					break
				}
				p[i].Value = value
			}
		}
		return with("pods", []Value{Map{{"name", "ok"}, {"roleName", "a"}, {"roleId", "a-0"}, {"isEntry", true},
			{"node", ""}, {"hostIP", ""}, {"podIP", ""}, {"phase", ""}, {"ready", false}, {"annotations", Map{}}}, p})
	}
	cases := []struct {
		request Value
		want    string
	}{
		{with("abiVersion", 2), "request: hook OnServingGroupChange needs abiVersion 3, got 2"},
		{with("abiVersion", 1), "request: hook OnServingGroupChange needs abiVersion 3, got 1"},
		{with("modelServing", "<absent>"), "request: 'modelServing' is missing"},
		{with("servingGroup", "<absent>"), "request: 'servingGroup' is missing"},
		{with("servingGroup", 1), "request: 'servingGroup' must be a str, got int"},
		{with("expectedPods", "<absent>"), "request: 'expectedPods' is missing"},
		{with("expectedPods", "3"), "request: 'expectedPods' must be a int, got str"},
		{with("expectedPods", 3.0), "request: 'expectedPods' must be a int, got float"},
		{with("expectedPods", uint64(1<<63)), "request: 'expectedPods' must be a int, got int"},
		{with("expectedPods", -1), "request: 'expectedPods' -1 is not a number of Pods"},
		{with("expectedPods", 1<<31), "request: 'expectedPods' 2147483648 is not a number of Pods"},
		{with("pods", "<absent>"), "request: 'pods' is missing"},
		{with("pods", Map{}), "request: 'pods' must be a array, got map"},
		{with("pods", []Value{nil}), "request: 'pods[0]' must be a map, got nil"},
		{pod("name", "<absent>"), "request: 'pods[1].name' is missing"},
		{pod("roleId", 0), "request: 'pods[1].roleId' must be a str, got int"},
		{pod("isEntry", "true"), "request: 'pods[1].isEntry' must be a bool, got str"},
		{pod("ready", nil), "request: 'pods[1].ready' must be a bool, got nil"},
		{pod("podIP", []Value{}), "request: 'pods[1].podIP' must be a str, got array"},
		{pod("phase", "<absent>"), "request: 'pods[1].phase' is missing"},
		{pod("annotations", nil), "request: 'pods[1].annotations' must be a map, got nil"},
		{pod("annotations", Map{{"a", 1}}), "request: 'pods[1].annotations.a' must be a str, got int"},
	}
	for _, c := range cases {
		_, err := DecodeRequest(Encode(c.request))
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	// Strings that are not UTF-8, where the plugin reads them.
	for _, s := range []string{"\xa6node-1", "\xa1x"} { // a fact, an annotation key
		b := unhex(t, hostGroupRequest)
		i := strings.Index(string(b), s)
		b[i+1] = 0xff
		if _, err := DecodeRequest(b); err == nil || !strings.Contains(err.Error(), "string is not valid UTF-8") {
			t.Error(s, err)
		}
	}
	// Unknown keys are ignored, in the request and in a Pod.
	m := groupRequest()
	pods, _ := m.Get("pods")
	first := append(pods.([]Value)[0].(Map), Entry{"future", 1})
	m.Set("pods", []Value{first})
	m = append(m, Entry{"future", Map{}})
	if r, err := DecodeRequest(Encode(m)); err != nil || len(r.Pods) != 1 || r.Pods[0].PodIP != "10.1.0.1" {
		t.Error(err)
	}
}

func TestWithoutTheV3MarkerAModuleSpeaksV2(t *testing.T) {
	v3 = nil
	_, err := DecodeRequest(Encode(groupRequest()))
	if err == nil || err.Error() != "request: abiVersion 3 is not supported (this plugin speaks 1 to 2)" {
		t.Error(err)
	}
	// Pod hooks say abiVersion 3 to a v3 module, which answers them as v2.
	speakV3(t)
	m := podRequest()
	m.Set("abiVersion", 3)
	if r, err := DecodeRequest(Encode(m)); err != nil || r.ABIVersion != 3 || r.Pods != nil || r.ExpectedPods != 0 {
		t.Error(err, r)
	}
	m.Set("abiVersion", 4)
	if _, err := DecodeRequest(Encode(m)); err == nil || err.Error() != "request: abiVersion 4 is not supported (this plugin speaks 1 to 3)" {
		t.Error(err)
	}
}

func TestPodHooksIgnoreTheGroupKeys(t *testing.T) {
	// expectedPods and pods are read for OnServingGroupChange only: a Pod hook's request with
	// them, even malformed, decodes as before ABI v3.
	m := append(podRequest(), Entry{"expectedPods", "many"}, Entry{"pods", 1})
	if r, err := DecodeRequest(Encode(m)); err != nil || r.Pods != nil || r.ExpectedPods != 0 {
		t.Error(err, r)
	}
}

// FuzzGroupRequest: whatever the bytes, DecodeRequest does not panic, and a group request it
// accepts encodes to a request that decodes to the same facts. `go test` runs the seeds.
func FuzzGroupRequest(f *testing.F) {
	host, _ := hex.DecodeString(hostGroupRequest)
	f.Add(host)
	f.Add(Encode(podRequest()))
	f.Fuzz(func(t *testing.T, b []byte) {
		SpeakABIv3(abiversion.Token{})
		defer func() { v3 = nil }()
		r, err := DecodeRequest(b)
		if err != nil || !r.Hook.HasGroup() {
			return
		}
		again, err := DecodeRequest(r.Encode())
		if err != nil || again.ServingGroup != r.ServingGroup || again.ExpectedPods != r.ExpectedPods || len(again.Pods) != len(r.Pods) {
			t.Fatal(err)
		}
		for i := range r.Pods {
			if string(again.Pods[i].appendTo(nil)) != string(r.Pods[i].appendTo(nil)) {
				t.Fatal(i)
			}
		}
	})
}
