package plugin

import (
	"errors"
	"strings"
	"testing"
)

func request(hook string, config Value) []byte {
	m := Map{{"abiVersion", 1}, {"hook", hook}, {"plugin", Map{{"name", "t"}, {"config", config}}}}
	if hook != "ValidateConfig" {
		m = append(m, Map{
			{"modelServing", Map{{"kind", "ModelServing"}}}, {"servingGroup", "g"}, {"roleName", "r"},
			{"roleId", "r-0"}, {"isEntry", false}, {"pod", Map{{"spec", Map{{"containers", []Value{}}}}}},
		}...)
	}
	return Encode(m)
}

func TestCallRunsWhatTheExportRuns(t *testing.T) {
	p := Plugin{
		OnPodCreate: func(req *Request) ([]Op, error) {
			Info("labelling " + req.RoleID)
			if req.Config != nil {
				return nil, errors.New("no config, please")
			}
			return NewPodPatch(req.Pod).MergeLabels(Map{{"team", "ml"}}).Result()
		},
		ValidateConfig: func(req *Request) error { return nil },
	}
	TakeLogs()
	out, ok := p.Call(OnPodCreate, request("OnPodCreate", nil))
	r, err := DecodeResponse(out)
	if !ok || err != nil || len(r.Patch) != 1 {
		t.Fatal(ok, err, r)
	}
	if logs := TakeLogs(); len(logs) != 1 || logs[0] != (LogLine{LevelInfo, "labelling r-0"}) {
		t.Error(logs)
	}
	out, _ = p.Call(OnPodCreate, request("OnPodCreate", 1))
	if r, _ := DecodeResponse(out); r.Error != "no config, please" {
		t.Error(r)
	}
	if out, ok := p.Call(ValidateConfig, request("ValidateConfig", 1)); !ok || len(out) != 0 {
		t.Error("ValidateConfig")
	}
	out, _ = p.Call(OnPodCreate, request("ValidateConfig", nil))
	if r, _ := DecodeResponse(out); !strings.Contains(r.Error, "request for hook ValidateConfig sent to ms_on_pod_create") {
		t.Error(r)
	}
	out, _ = p.Call(OnPodCreate, []byte{0xc1})
	if r, _ := DecodeResponse(out); !strings.HasPrefix(r.Error, "request: invalid msgpack") {
		t.Error(r)
	}
	if _, ok := p.Call(OnPodReady, request("OnPodReady", nil)); ok || p.Implements(OnPodReady) {
		t.Error("OnPodReady is not implemented")
	}
	if _, err := p.Run(OnPodReady, nil); err == nil || err.Error() != "the plugin does not implement OnPodReady" {
		t.Error(err)
	}
	if out, err := p.Run(OnPodCreate, request("OnPodCreate", 1)); out != nil || err == nil || err.Error() != "no config, please" {
		t.Error(out, err)
	}
	ready := Plugin{OnPodReady: func(req *Request) error { return errors.New("") }}
	out, _ = ready.Call(OnPodReady, request("OnPodReady", nil))
	if r, _ := DecodeResponse(out); r.Error != EmptyError {
		t.Error(r)
	}
}
