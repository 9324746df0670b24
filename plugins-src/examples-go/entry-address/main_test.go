package main

// The plugin natively: EntryAddress.Call runs what the module's exports run
// (tests/wasm/test_go_entry_address.py runs the module itself through the host and compares it
// with the native built-in on generated inputs). testdata/native.json holds the native
// built-in's answers to a set of requests, written by that Python test module; TestNativeAnswers
// replays them here, byte for byte.

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"modelserving.dev/plugin"
)

type golden struct {
	Name     string  `json:"name"`
	Hook     string  `json:"hook"`
	Request  string  `json:"request"`
	Response *string `json:"response"` // nil: the native built-in refuses the config
}

func TestNativeAnswers(t *testing.T) {
	text, err := os.ReadFile("testdata/native.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []golden
	if err := json.Unmarshal(text, &cases); err != nil {
		t.Fatal(err)
	}
	hooks := map[string]bool{}
	for _, c := range cases {
		hook, ok := plugin.HookNamed(c.Hook)
		request, err := base64.StdEncoding.DecodeString(c.Request)
		if !ok || err != nil {
			t.Fatal(c.Name, c.Hook, err)
		}
		hooks[c.Hook] = true
		out, _ := EntryAddress.Call(hook, request)
		if c.Response == nil {
			if r, err := plugin.DecodeResponse(out); err != nil || r.Error == "" {
				t.Errorf("%s: the config should be refused: %v %+v", c.Name, err, r)
			}
			continue
		}
		if want, _ := base64.StdEncoding.DecodeString(*c.Response); string(out) != string(want) {
			got, _ := plugin.Decode(out)
			expected, _ := plugin.Decode(want)
			t.Errorf("%s:\n got  %s\n want %s", c.Name, plugin.Format(got), plugin.Format(expected))
		}
	}
	if len(cases) < 10 || len(hooks) != 3 {
		t.Errorf("%d cases of %d hooks", len(cases), len(hooks))
	}
}

func groupRequest(config plugin.Value, namespace string, pods ...plugin.GroupPod) []byte {
	meta := plugin.Map{{"name", "llama"}}
	if namespace != "" {
		meta = append(meta, plugin.Entry{"namespace", namespace})
	}
	r := plugin.Request{
		Hook: plugin.OnServingGroupChange, PluginName: Name, Config: config,
		ModelServing: raw(plugin.Map{{"kind", "ModelServing"}, {"metadata", meta}}),
		ServingGroup: "llama-0", ExpectedPods: len(pods), Pods: pods,
	}
	return r.Encode()
}

func raw(v plugin.Value) plugin.Raw {
	r, err := plugin.NewRaw(plugin.Encode(v))
	if err != nil {
		panic(err)
	}
	return r
}

func entry(roleID, ip string) plugin.GroupPod {
	return plugin.GroupPod{Name: "llama-0-" + roleID + "-0", RoleName: "r", RoleID: roleID, IsEntry: true, PodIP: ip}
}

func worker(roleID, ip string) plugin.GroupPod {
	return plugin.GroupPod{Name: "llama-0-" + roleID + "-1", RoleName: "r", RoleID: roleID, PodIP: ip}
}

func objects(t *testing.T, request []byte) []plugin.Object {
	t.Helper()
	out, ok := EntryAddress.Call(plugin.OnServingGroupChange, request)
	r, err := plugin.DecodeResponse(out)
	if !ok || err != nil || r.Error != "" {
		t.Fatal(ok, err, r.Error)
	}
	return r.Objects
}

func TestTheGroupHookWritesEachReplicasAddress(t *testing.T) {
	got := objects(t, groupRequest(nil, "serving",
		entry("prefill-0", "10.1.0.7"), worker("prefill-0", "10.1.0.8"), // the worker's IP is not the address
		worker("decode-1", "10.1.0.9"), // a replica whose entry is not in scope: its DNS name
		entry("decode-0", "not-an-ip"),
	))
	want := plugin.ConfigMap("llama-0-entry-address", plugin.Map{
		{"prefill-0", "10.1.0.7"},
		{"prefill-0.json", `{"dns":"llama-0-prefill-0-0.serving","ip":"10.1.0.7"}`},
		{"decode-1", "llama-0-decode-1-0.serving"},
		{"decode-1.json", `{"dns":"llama-0-decode-1-0.serving","ip":""}`},
		{"decode-0", "llama-0-decode-0-0.serving"},
		{"decode-0.json", `{"dns":"llama-0-decode-0-0.serving","ip":""}`},
	})
	if len(got) != 1 || got[0].String() != want.String() {
		t.Errorf("%v\nwant %v", got, want)
	}
}

func TestTheConfigMapFollowsTheConfigAndTheNamespace(t *testing.T) {
	got := objects(t, groupRequest(plugin.Map{{"configMapSuffix", "addr"}}, "", entry("a-0", "fd00::1")))
	want := plugin.ConfigMap("llama-0-addr", plugin.Map{
		{"a-0", "fd00::1"}, {"a-0.json", `{"dns":"llama-0-a-0-0.default","ip":"fd00::1"}`},
	})
	if len(got) != 1 || got[0].String() != want.String() {
		t.Error(got)
	}
	// No Pods: the ConfigMap without data (not no ConfigMap, which would delete it).
	got = objects(t, groupRequest(nil, "serving"))
	if len(got) != 1 || got[0].Data == nil || len(got[0].Data) != 0 {
		t.Error(got)
	}
	out, _ := EntryAddress.Call(plugin.OnServingGroupChange, groupRequest(plugin.Map{{"mountPath", "x"}}, ""))
	if r, _ := plugin.DecodeResponse(out); r.Error != "config.mountPath: 'x' is not an absolute path without ':'" {
		t.Error(r)
	}
}

func TestIPs(t *testing.T) {
	for _, ip := range []string{"10.1.0.7", "fd00::1", "::", "AB:cd", strings.Repeat("1", 45)} {
		if !IsIP(ip) {
			t.Error(ip)
		}
	}
	for _, ip := range []string{"", "1", "10.1.0.7 ", "x.y", "1-2", strings.Repeat("1", 46), "١٢"} {
		if IsIP(ip) {
			t.Error(ip)
		}
	}
}

func TestJSONStringIsPythons(t *testing.T) {
	// json.dumps(s) in Python (ensure_ascii).
	for s, want := range map[string]string{
		"":                   `""`,
		"llama-0-a-0-0.ns":   `"llama-0-a-0-0.ns"`,
		`"\`:                 `"\"\\"`,
		"\n\r\t\b\f\x01\x1f": `"\n\r\t\b\f\u0001\u001f"`,
		"~\x7f é":            `"~\u007f \u00e9"`,
		"😀":                  `"\ud83d\ude00"`,
		"\u2028\uffff":       `"\u2028\uffff"`,
	} {
		if got := JSONString(s); got != want {
			t.Errorf("%q: %s, want %s", s, got, want)
		}
	}
}

func podRequest(config plugin.Value, pod plugin.Value) []byte {
	r := plugin.Request{
		Hook: plugin.OnPodCreate, PluginName: Name, Config: config,
		ModelServing: raw(plugin.Map{{"kind", "ModelServing"}}), ServingGroup: "llama-0",
		RoleName: "prefill", RoleID: "prefill-0", IsEntry: false, Pod: raw(pod),
	}
	return r.Encode()
}

func patch(t *testing.T, config, pod plugin.Value) ([]plugin.Value, string) {
	t.Helper()
	out, _ := EntryAddress.Call(plugin.OnPodCreate, podRequest(config, pod))
	r, err := plugin.DecodeResponse(out)
	if err != nil {
		t.Fatal(err)
	}
	return r.Patch, r.Error
}

func TestEveryPodMountsItsReplicasKeys(t *testing.T) {
	pod := plugin.Map{{"spec", plugin.Map{{"containers", []plugin.Value{plugin.Map{{"name", "engine"}}}}}}}
	ops, _ := patch(t, nil, pod)
	volume := plugin.Map{{"name", "entry-address"}, {"configMap", plugin.Map{
		{"name", "llama-0-entry-address"}, {"optional", true}, {"items", []plugin.Value{
			plugin.Map{{"key", "prefill-0"}, {"path", "address"}},
			plugin.Map{{"key", "prefill-0.json"}, {"path", "address.json"}},
		}},
	}}}
	want := []plugin.Value{
		plugin.Add("/spec/volumes", []plugin.Value{volume}).ToValue(),
		plugin.Add("/spec/containers/0/volumeMounts", []plugin.Value{
			plugin.Map{{"name", "entry-address"}, {"mountPath", "/etc/modelserving/entry"}},
		}).ToValue(),
	}
	if !plugin.Equal(ops, want) {
		t.Errorf("%s", plugin.Format(ops))
	}
	// What the user wrote is kept: a volume of that name, a mount at that path.
	pod = plugin.Map{{"spec", plugin.Map{
		{"containers", []plugin.Value{
			plugin.Map{{"name", "engine"}},
			plugin.Map{{"name", "sidecar"}, {"volumeMounts", []plugin.Value{plugin.Map{{"name", "x"}, {"mountPath", "/run/entry"}}}}},
		}},
		{"volumes", []plugin.Value{plugin.Map{{"name", "cache"}}}},
	}}}
	ops, _ = patch(t, plugin.Map{{"mountPath", "/run/entry"}, {"container", "sidecar"}}, pod)
	if len(ops) != 1 || !plugin.Equal(ops[0].(plugin.Map)[1].Value, "/spec/volumes/-") {
		t.Errorf("%s", plugin.Format(ops))
	}
}

func TestPodShapesItCannotEditAreErrors(t *testing.T) {
	engine := plugin.Map{{"name", "engine"}}
	for _, c := range []struct {
		config plugin.Value
		spec   plugin.Value
		want   string
	}{
		{nil, plugin.Map{{"containers", []plugin.Value{}}}, "the Pod has no containers"},
		{nil, plugin.Map{}, "the Pod has no containers"},
		{plugin.Map{{"container", "gpu"}}, plugin.Map{{"containers", []plugin.Value{engine}}}, "the Pod has no container named 'gpu'"},
		{nil, plugin.Map{{"containers", []plugin.Value{engine}}, {"volumes", "x"}}, "pod spec.volumes is a str, not an array"},
		{nil, plugin.Map{{"containers", []plugin.Value{nil}}}, "pod spec.containers[0]: put cannot set a list item"},
		{nil, plugin.Map{{"containers", []plugin.Value{"engine"}}}, "pod spec.containers[0] is a str, not a map"},
		{nil, plugin.Map{{"containers", []plugin.Value{plugin.Map{{"volumeMounts", 1}}}}}, "pod spec.containers[0].volumeMounts is a int, not an array"},
		{plugin.Map{{"configMapSuffix", "A"}}, plugin.Map{}, "config.configMapSuffix: 'A' is not a name suffix (at most 40 lower-case letters, digits and '-')"},
	} {
		ops, err := patch(t, c.config, plugin.Map{{"spec", c.spec}})
		if err != c.want || len(ops) != 0 {
			t.Errorf("got %q %v, want %q", err, ops, c.want)
		}
	}
}

func TestConfig(t *testing.T) {
	validate := func(config plugin.Value) string {
		out, _ := EntryAddress.Call(plugin.ValidateConfig, (&plugin.Request{Hook: plugin.ValidateConfig, Config: config}).Encode())
		r, _ := plugin.DecodeResponse(out)
		return r.Error
	}
	for _, ok := range []plugin.Value{
		nil, plugin.Map{}, plugin.Map{{"mountPath", "/"}, {"configMapSuffix", strings.Repeat("a", 40)}, {"container", ""}},
		plugin.Map{{"mount_path", "/x"}, {"config_map_suffix", "a-0"}}, plugin.Map{{"mountPath", nil}},
	} {
		if err := validate(ok); err != "" {
			t.Error(plugin.Format(ok), err)
		}
	}
	for config, want := range map[string]plugin.Value{
		"config.mountPath: 'rel' is not an absolute path without ':'":     plugin.Map{{"mountPath", "rel"}},
		"config.mountPath: '/a:b' is not an absolute path without ':'":    plugin.Map{{"mountPath", "/a:b"}},
		"config.mountPath: '/a\x00' is not an absolute path without ':'":  plugin.Map{{"mountPath", "/a\x00"}},
		"config.mountPath: must be a str, got int":                        plugin.Map{{"mountPath", 1}},
		"config.configMapSuffix: '" + strings.Repeat("a", 41) + "' is no": plugin.Map{{"configMapSuffix", strings.Repeat("a", 41)}},
		"config.configMapSuffix: '' is not a name suffix":                 plugin.Map{{"configMapSuffix", ""}},
		"config.container: must be a str, got bool":                       plugin.Map{{"container", true}},
		"config.extra: unknown field":                                     plugin.Map{{"extra", 1}},
	} {
		if got := validate(want); !strings.HasPrefix(got, config) {
			t.Errorf("%s: %q", plugin.Format(want), got)
		}
	}
}
