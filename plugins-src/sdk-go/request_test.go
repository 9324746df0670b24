package plugin

import (
	"strings"
	"testing"
)

func podRequest() Map {
	return Map{
		{"abiVersion", 1},
		{"hook", "OnPodCreate"},
		{"plugin", Map{{"name", "p"}, {"config", Map{{"a", 1}}}}},
		{"modelServing", Map{{"kind", "ModelServing"}}},
		{"servingGroup", "g-0"},
		{"roleName", "prefill"},
		{"roleId", "prefill-0"},
		{"isEntry", true},
		{"pod", Map{{"metadata", Map{{"name", "pod-a"}}}}},
	}
}

func TestDecodesAPodHookRequest(t *testing.T) {
	b := Encode(podRequest())
	r, err := DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Hook != OnPodCreate || r.PluginName != "p" || r.ServingGroup != "g-0" || r.RoleName != "prefill" ||
		r.RoleID != "prefill-0" || !r.IsEntry || r.PodName() != "pod-a" || !Equal(r.Config, Map{{"a", 1}}) {
		t.Errorf("%+v", r)
	}
	if string(r.Encode()) != string(b) {
		t.Error("Encode does not give the request back")
	}
	if kind, ok := r.ModelServing.Get("kind"); !ok {
		t.Error("kind")
	} else if s, _ := kind.Str(); s != "ModelServing" {
		t.Error(s)
	}
	pod, err := r.Pod.Value()
	want, _ := podRequest().Get("pod")
	if err != nil || !Equal(pod, want) {
		t.Errorf("pod %v", err)
	}
}

func TestRequestsOfBothABIVersionsAreAnswered(t *testing.T) {
	for _, version := range []int{1, 2} {
		m := podRequest()
		m.Set("abiVersion", version)
		b := Encode(m)
		r, err := DecodeRequest(b)
		if err != nil || r.ABIVersion != version {
			t.Fatalf("abiVersion %d: %v %+v", version, err, r)
		}
		if string(r.Encode()) != string(b) {
			t.Errorf("abiVersion %d: Encode does not give the request back", version)
		}
	}
	// A Request built by hand says the newest version the module speaks: 2 without the v3
	// marker (abiv3), though the SDK speaks 3.
	r := &Request{Hook: ValidateConfig, PluginName: "p"}
	back, err := DecodeRequest(r.Encode())
	if err != nil || back.ABIVersion != 2 || ModuleABIVersion() != 2 || ABIVersion != 3 || ABIVersionMin != 1 {
		t.Error(err, back)
	}
}

func TestValidateConfigNeedsNoPod(t *testing.T) {
	b := Encode(Map{{"abiVersion", 1}, {"hook", "ValidateConfig"}, {"plugin", Map{{"name", "p"}}}})
	r, err := DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Hook != ValidateConfig || r.Config != nil || !r.Pod.IsNil() || !r.ModelServing.IsNil() || r.PodName() != "" {
		t.Errorf("%+v", r)
	}
	r.Config = nil
	if len(r.Encode()) == 0 {
		t.Error("Encode")
	}
}

func TestUnknownKeysAreIgnoredAndRepeatedKeysTakeTheFirstValue(t *testing.T) {
	m := append(podRequest(), Entry{"roleName", 5}, Entry{"future", Map{{"x", []Value{1, 2}}}})
	r, err := DecodeRequest(Encode(m))
	if err != nil || r.RoleName != "prefill" {
		t.Errorf("%v %+v", err, r)
	}
}

func TestRequestErrorsSayWhatIsWrong(t *testing.T) {
	with := func(key string, value Value) Map {
		m := podRequest()
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
	cases := []struct {
		request Value
		want    string
	}{
		{with("abiVersion", 3), "request: abiVersion 3 is not supported (this plugin speaks 1 to 2)"},
		{with("abiVersion", 0), "request: abiVersion 0 is not supported (this plugin speaks 1 to 2)"},
		{with("abiVersion", -1), "request: abiVersion -1 is not supported (this plugin speaks 1 to 2)"},
		{with("abiVersion", uint64(1<<63)), "request: abiVersion 9223372036854775808 is not supported (this plugin speaks 1 to 2)"},
		{with("abiVersion", 2.0), "request: 'abiVersion' must be a int, got float"},
		{with("abiVersion", "1"), "request: 'abiVersion' must be a int, got str"},
		{with("abiVersion", "<absent>"), "request: 'abiVersion' is missing"},
		{with("hook", "OnPodDelete"), "request: unknown hook 'OnPodDelete'"},
		{with("plugin", nil), "request: 'plugin' must be a map, got nil"},
		{with("plugin", Map{{"config", nil}}), "request: 'plugin.name' is missing"},
		{with("roleName", 5), "request: 'roleName' must be a str, got int"},
		{with("isEntry", "yes"), "request: 'isEntry' must be a bool, got str"},
		{with("pod", "<absent>"), "request: 'pod' is missing"},
		{with("modelServing", []Value{}), "request: 'modelServing' must be a map, got array"},
		{[]Value{}, "request: must be a map, got array"},
	}
	for _, c := range cases {
		_, err := DecodeRequest(Encode(c.request))
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	for _, c := range []struct{ hex, want string }{
		{"c400", "bin"},
		{"81a161c4", "request: invalid msgpack"},
		{"810100", "map key is a int, not a string"},
	} {
		_, err := DecodeRequest(unhex(t, c.hex))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.hex, err, c.want)
		}
	}
	// The config is decoded whole: every rule, its depth counted from the request.
	deep := func(n int) Value {
		var v Value = []Value{}
		for i := 1; i < n; i++ {
			v = []Value{v}
		}
		return v
	}
	if _, err := DecodeRequest(Encode(with("plugin", Map{{"name", "p"}, {"config", deep(MaxDepth - 2)}}))); err != nil {
		t.Error(err)
	}
	_, err := DecodeRequest(Encode(with("plugin", Map{{"name", "p"}, {"config", deep(MaxDepth - 1)}})))
	if err == nil || !strings.Contains(err.Error(), "nested more than 128") {
		t.Error(err)
	}
	// A string that is not UTF-8 where the plugin reads it.
	b := Encode(with("roleName", "ab"))
	i := strings.Index(string(b), "\xa2ab")
	b[i+1] = 0xc3
	if _, err := DecodeRequest(b); err == nil || !strings.Contains(err.Error(), "string is not valid UTF-8") {
		t.Error(err)
	}
}

func TestHookNames(t *testing.T) {
	for _, h := range []Hook{OnPodCreate, OnPodReady, ValidateConfig, OnServingGroupChange} {
		if got, ok := HookNamed(h.String()); !ok || got != h {
			t.Error(h)
		}
	}
	if OnPodReady.ExportName() != "ms_on_pod_ready" || ValidateConfig.HasPod() || !OnPodCreate.HasPod() {
		t.Error("names")
	}
	if OnServingGroupChange.String() != "OnServingGroupChange" || OnServingGroupChange.ExportName() != "ms_on_serving_group_change" ||
		OnServingGroupChange.HasPod() || !OnServingGroupChange.HasGroup() || OnPodCreate.HasGroup() || ValidateConfig.HasGroup() {
		t.Error("the group hook")
	}
	if Hook(9).String() != "Hook(9)" || Hook(9).ExportName() != "" {
		t.Error("unknown hook")
	}
	if _, ok := HookNamed("onPodCreate"); ok {
		t.Error("case")
	}
}
