package main

// The plugin natively: Timer.Call runs what the module's exports run
// (tests/wasm/test_go_plugins.py runs the module itself through the host).

import (
	"strings"
	"testing"

	"modelserving.dev/plugin"
)

func readyPod(created, ready string) plugin.Map {
	return plugin.Map{
		{"metadata", plugin.Map{{"name", "llama-0-server-0-0"}, {"creationTimestamp", created}}},
		{"status", plugin.Map{{"conditions", []plugin.Value{
			plugin.Map{{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", "2026-01-01T00:00:00Z"}},
			plugin.Map{{"type", "Ready"}, {"status", "True"}, {"lastTransitionTime", ready}},
		}}}},
	}
}

func request(version int, pod plugin.Value) []byte {
	return plugin.Encode(plugin.Map{
		{"abiVersion", version}, {"hook", "OnPodReady"}, {"plugin", plugin.Map{{"name", "timer"}, {"config", nil}}},
		{"modelServing", plugin.Map{{"kind", "ModelServing"}}}, {"servingGroup", "llama-0"}, {"roleName", "server"},
		{"roleId", "server-0"}, {"isEntry", true}, {"pod", pod},
	})
}

func TestReturnsHowLongThePodTookToBecomeReady(t *testing.T) {
	pod := readyPod("2026-01-01T00:00:00Z", "2026-01-01T00:01:01.25Z")
	out, _ := Timer.Call(plugin.OnPodReady, request(2, pod))
	r, err := plugin.DecodeResponse(out)
	if err != nil || len(r.Observations) != 1 || r.Observations[0] != (plugin.Observation{Name: Observation, Seconds: 61.25}) {
		t.Fatal(err, r)
	}
	plugin.TakeLogs()
	out, _ = Timer.Call(plugin.OnPodReady, request(1, pod))
	logs := plugin.TakeLogs()
	if len(out) != 0 || len(logs) != 1 || logs[0] != (plugin.LogLine{Level: plugin.LevelInfo, Message: "observe pod_ready_seconds 61.250"}) {
		t.Error(out, logs)
	}
}

func TestWhatCannotBeMeasuredIsAWarning(t *testing.T) {
	for _, c := range []struct {
		pod  plugin.Value
		want string
	}{
		{readyPod("2026-01-01T00:00:10+01:00", "2026-01-01T00:00:00+01:00"), ""}, // negative: 0
		{readyPod("yesterday", "2026-01-01T00:00:00Z"), "metadata.creationTimestamp 'yesterday' is not an RFC 3339 time"},
		{readyPod("2026-01-01T00:00:00Z", "2026-01-09T00:00:00Z"), "it took more than a week"},
		{plugin.Map{{"metadata", plugin.Map{{"creationTimestamp", "2026-01-01T00:00:00Z"}}}}, "the Pod has no Ready condition"},
		{plugin.Map{}, "metadata.creationTimestamp is missing"},
	} {
		plugin.TakeLogs()
		out, _ := Timer.Call(plugin.OnPodReady, request(2, c.pod))
		r, err := plugin.DecodeResponse(out)
		logs := plugin.TakeLogs()
		if c.want == "" {
			if err != nil || len(r.Observations) != 1 || r.Observations[0].Seconds != 0 || len(logs) != 0 {
				t.Error(err, r, logs)
			}
			continue
		}
		if err != nil || r.Error != "" || len(r.Observations) != 0 || len(logs) != 1 ||
			logs[0].Level != plugin.LevelWarn || !strings.HasSuffix(logs[0].Message, ": not measured: "+c.want) {
			t.Errorf("%q: %v %+v %v", c.want, err, r, logs)
		}
	}
}

func TestTakesNoConfig(t *testing.T) {
	validate := func(config plugin.Value) string {
		out, _ := Timer.Call(plugin.ValidateConfig, plugin.Encode(plugin.Map{
			{"abiVersion", 2}, {"hook", "ValidateConfig"}, {"plugin", plugin.Map{{"name", "timer"}, {"config", config}}},
		}))
		r, _ := plugin.DecodeResponse(out)
		return r.Error
	}
	if validate(nil) != "" || validate(plugin.Map{}) != "" || validate(plugin.Map{{"every", 5}}) == "" {
		t.Error("config")
	}
}
