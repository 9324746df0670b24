package main

// The plugin natively: TeamLabel.Call runs what the Extism exports run, minus the Extism input
// and output (tests/wasm/test_extism_example.py runs the module itself through the host).

import (
	"strings"
	"testing"

	"modelserving.dev/plugin"
)

func request(hook string, role string, config plugin.Value) []byte {
	r := &plugin.Request{PluginName: Name, Config: config, RoleName: role, RoleID: role + "-0",
		ServingGroup: "g-0", IsEntry: true}
	r.Hook, _ = plugin.HookNamed(hook)
	if r.Hook.HasPod() {
		pod := plugin.Encode(plugin.Map{{"metadata", plugin.Map{{"name", "p"}, {"labels", plugin.Map{{"a", "b"}}}}}})
		r.Pod, _ = plugin.NewRaw(pod)
		r.ModelServing, _ = plugin.NewRaw(plugin.Encode(plugin.Map{{"kind", "ModelServing"}}))
	}
	return r.Encode()
}

func TestItLabelsThePodsOfItsRoles(t *testing.T) {
	label := plugin.PatchResponse([]plugin.Op{plugin.Add("/metadata/labels/example.com~1team", "ml")})
	for _, c := range []struct {
		role   string
		config plugin.Value
		want   []byte
	}{
		{"prefill", plugin.Map{{"team", "ml"}}, label},
		{"prefill", plugin.Map{{"team", "ml"}, {"roles", []plugin.Value{}}}, label},
		{"decode", plugin.Map{{"team", "ml"}, {"roles", []plugin.Value{"decode"}}}, label},
		{"prefill", plugin.Map{{"team", "ml"}, {"roles", []plugin.Value{"decode"}}}, nil},
	} {
		got, ok := TeamLabel.Call(plugin.OnPodCreate, request("OnPodCreate", c.role, c.config))
		if !ok || string(got) != string(c.want) {
			t.Errorf("%s %s: got %x, want %x", c.role, plugin.Format(c.config), got, c.want)
		}
	}
}

func TestConfigs(t *testing.T) {
	for _, c := range []struct {
		config plugin.Value
		err    string
	}{
		{plugin.Map{{"team", "ml"}}, ""},
		{plugin.Map{{"team", "a.b_c-9"}, {"roles", []plugin.Value{"x"}}}, ""},
		{nil, "config.team: is required"},
		{plugin.Map{{"team", ""}}, "config.team: '' is not a valid label value"},
		{plugin.Map{{"team", "a/b"}}, "config.team: 'a/b' is not a valid label value"},
		{plugin.Map{{"team", strings.Repeat("x", 64)}}, "is not a valid label value"},
		{plugin.Map{{"team", "ml"}, {"roles", []plugin.Value{nil}}}, "config.roles.0: must be a str, got nil"},
		{plugin.Map{{"team", "ml"}, {"other", 1}}, "config.other: unknown field"},
	} {
		_, err := TeamLabel.Run(plugin.ValidateConfig, request("ValidateConfig", "", c.config))
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", plugin.Format(c.config), err, c.err)
		}
	}
	if !IsLabelValue("") || IsLabelValue("-a") {
		t.Error("IsLabelValue")
	}
}
