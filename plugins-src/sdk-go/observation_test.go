package plugin

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func obs(name string, seconds float64) Observation { return Observation{Name: name, Seconds: seconds} }

func many(n int) []Observation {
	out := make([]Observation, n)
	for i := range out {
		out[i] = obs("step_seconds", float64(i))
	}
	return out
}

func TestValidObservations(t *testing.T) {
	for _, o := range [][]Observation{
		nil,
		{},
		{obs("pod_ready_seconds", 61.25)},
		{obs("a_seconds", 0), obs("b_seconds", math.Copysign(0, -1)), obs("c_seconds", MaxObservationSeconds)},
		{obs("x"+strings.Repeat("_", 54)+"_seconds", 1)}, // 63 characters, the longest
		{obs("v2_seconds", 5e-324)},
		many(MaxObservations),
	} {
		if err := ValidateObservations(o); err != nil {
			t.Errorf("%v: %v", o, err)
		}
	}
}

// Each rule of abi/README.md 5.4 for observations, in the host's words and order.
func TestInvalidObservationsAreRefusedAsTheHostRefusesThem(t *testing.T) {
	ok := obs("ok_seconds", 1)
	nonUTF8 := string([]byte{'a', 0xff, '_', 's'})
	cases := []struct {
		observations []Observation
		want         string
	}{
		{many(MaxObservations + 1), "the response has 65 observations; the limit is 64"},
		{[]Observation{ok, obs("a_seconds", math.NaN())}, "the response holds nan at '/observations/1/seconds', which JSON cannot express"},
		{[]Observation{obs("a_seconds", math.Inf(1))}, "the response holds inf at '/observations/0/seconds', which JSON cannot express"},
		{[]Observation{obs("a_seconds", math.Inf(-1))}, "the response holds -inf at '/observations/0/seconds', which JSON cannot express"},
		{[]Observation{ok, obs(nonUTF8, 1)}, "observations[1].name is not valid UTF-8"},
		{[]Observation{obs("latency", 1)}, "observations[0].name: the name 'latency' does not end in _seconds"},
		{[]Observation{obs("seconds", 1)}, "observations[0].name: the name 'seconds' does not end in _seconds"},
		{[]Observation{obs("Pod_seconds", 1)}, "observations[0].name: the name 'Pod_seconds' does not match [a-z][a-z0-9_]{0,62}"},
		{[]Observation{obs("", 1)}, "observations[0].name: the name '' does not match [a-z][a-z0-9_]{0,62}"},
		{[]Observation{obs("1_seconds", 1)}, "observations[0].name: the name '1_seconds' does not match [a-z][a-z0-9_]{0,62}"},
		{[]Observation{obs("pod-ready_seconds", 1)}, "observations[0].name: the name 'pod-ready_seconds' does not match [a-z][a-z0-9_]{0,62}"},
		{[]Observation{obs("x"+strings.Repeat("_", 55)+"_seconds", 1)}, "observations[0].name: the name 'x" + strings.Repeat("_", 55) + "_seconds' does not match"},
		// A long name is quoted up to 70 characters (code points, not bytes).
		{[]Observation{obs(strings.Repeat("é", 80), 1)}, "observations[0].name: the name '" + strings.Repeat("é", 70) + "' does not match"},
		{[]Observation{ok, obs("a_seconds", -1)}, "observations[1].seconds must be between 0 and 604800 (7 days), not -1.0"},
		{[]Observation{obs("a_seconds", 604800.5)}, "observations[0].seconds must be between 0 and 604800 (7 days), not 604800.5"},
		{[]Observation{obs("a_seconds", 1e20)}, "observations[0].seconds must be between 0 and 604800 (7 days), not 1e+20"},
		{[]Observation{obs("a_seconds", -1e-5)}, "observations[0].seconds must be between 0 and 604800 (7 days), not -1e-05"},
		// The order: what is not JSON first, then the count, then entry by entry, name first.
		{append(many(MaxObservations+1), obs("a_seconds", math.NaN())), "the response holds nan at '/observations/65/seconds'"},
		{append(many(MaxObservations), obs("latency", -1)), "the response has 65 observations"},
		{[]Observation{obs("latency", -1)}, "observations[0].name: the name 'latency' does not end in _seconds"},
		{[]Observation{obs("a_seconds", -1), obs("latency", 1)}, "observations[0].seconds must be between"},
	}
	for _, c := range cases {
		err := ValidateObservations(c.observations)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

func TestPythonFloatRepr(t *testing.T) {
	for x, want := range map[float64]string{
		-1: "-1.0", 0: "0.0", 604800.5: "604800.5", 1e15: "1000000000000000.0", 1e16: "1e+16",
		0.0001: "0.0001", 1.5e-5: "1.5e-05", -2.5e300: "-2.5e+300", math.Copysign(0, -1): "-0.0",
	} {
		if got := pyFloat(x); got != want {
			t.Errorf("%v: %q, want %q", x, got, want)
		}
	}
}

func TestObservationsResponseIsTheV2Map(t *testing.T) {
	o := []Observation{obs("pod_ready_seconds", 61.25), obs("a_seconds", 2)}
	want := Encode(Map{{"observations", []Value{
		Map{{"name", "pod_ready_seconds"}, {"seconds", 61.25}},
		Map{{"name", "a_seconds"}, {"seconds", 2.0}},
	}}})
	got := ObservationsResponse(o)
	if string(got) != string(want) {
		t.Errorf("%x, want %x", got, want)
	}
	r, err := DecodeResponse(got)
	if err != nil || len(r.Observations) != 2 || r.Observations[0] != o[0] || r.Observations[1] != o[1] {
		t.Error(err, r)
	}
	if ObservationsResponse(nil) != nil || ObservationsResponse([]Observation{}) != nil {
		t.Error("no observations: the empty response")
	}
}

// The host reads "observe <name> <value>" with <value> matching [0-9]+(\.[0-9]+)?, at most 20
// characters (abi/README.md 7.1).
func TestObserveLineIsTheV1Form(t *testing.T) {
	for _, c := range []struct {
		seconds float64
		want    string
	}{
		{61.25, "61.250"}, {2, "2.000"}, {0, "0.000"}, {math.Copysign(0, -1), "0.000"},
		{0.0004, "0.000"}, {1.0005, "1.000"}, {1.9996, "2.000"}, {MaxObservationSeconds, "604800.000"},
	} {
		line := ObserveLine(obs("pod_ready_seconds", c.seconds))
		if line != "observe pod_ready_seconds "+c.want {
			t.Errorf("%v: %q", c.seconds, line)
		}
		value := strings.TrimPrefix(line, "observe pod_ready_seconds ")
		if len(value) > 20 || strings.Trim(value, "0123456789.") != "" || strings.Count(value, ".") != 1 ||
			value[0] == '.' || value[len(value)-1] == '.' {
			t.Errorf("%q is not a value the host reads", value)
		}
	}
}

func TestDecodeResponseReadsObservations(t *testing.T) {
	r, err := DecodeResponse(Encode(Map{{"observations", []Value{Map{{"seconds", 3}, {"name", "a_seconds"}}}}}))
	if err != nil || len(r.Observations) != 1 || r.Observations[0] != obs("a_seconds", 3) {
		t.Error(err, r)
	}
	for _, bad := range []Value{
		[]Value{1},
		[]Value{Map{{"name", "a_seconds"}}},
		[]Value{Map{{"name", "a_seconds"}, {"seconds", "1"}}},
		[]Value{Map{{"name", 1}, {"seconds", 1}}},
		[]Value{Map{{"name", "a_seconds"}, {"seconds", 1}, {"unit", "s"}}},
	} {
		if _, err := DecodeResponse(Encode(Map{{"observations", bad}})); err == nil || !strings.Contains(err.Error(), "observations[0]") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

func readyRequest(version int) []byte {
	m := Map{{"abiVersion", version}}
	r, _ := Decode(request("OnPodReady", nil))
	for _, e := range r.(Map)[1:] {
		m = append(m, e)
	}
	return Encode(m)
}

func observer(o []Observation, err error) Plugin {
	return Plugin{OnPodReadyObserve: func(req *Request) ([]Observation, error) { return o, err }}
}

func TestOnPodReadyObservationsGoInTheResponseForAV2Request(t *testing.T) {
	o := []Observation{obs("pod_ready_seconds", 61.25), obs("weights_seconds", 12)}
	p := observer(o, nil)
	TakeLogs()
	out, ok := p.Call(OnPodReady, readyRequest(2))
	if !ok || string(out) != string(ObservationsResponse(o)) {
		t.Fatalf("%v %x", ok, out)
	}
	if logs := TakeLogs(); len(logs) != 0 {
		t.Error("no observe lines for v2:", logs)
	}
	if run, err := p.Run(OnPodReady, readyRequest(2)); err != nil || string(run) != string(out) {
		t.Error(err, run)
	}
}

func TestOnPodReadyObservationsAreObserveLinesForAV1Request(t *testing.T) {
	o := []Observation{obs("pod_ready_seconds", 61.25), obs("weights_seconds", 12)}
	p := observer(o, nil)
	TakeLogs()
	out, ok := p.Call(OnPodReady, readyRequest(1))
	if !ok || len(out) != 0 {
		t.Fatalf("a v1 response has no observations: %x", out)
	}
	want := []LogLine{
		{LevelInfo, "observe pod_ready_seconds 61.250"},
		{LevelInfo, "observe weights_seconds 12.000"},
	}
	if logs := TakeLogs(); len(logs) != 2 || logs[0] != want[0] || logs[1] != want[1] {
		t.Error(logs)
	}
	// Run writes no log lines (an Extism module may not): under v1 the observations are dropped.
	if run, err := p.Run(OnPodReady, readyRequest(1)); err != nil || len(run) != 0 || len(TakeLogs()) != 0 {
		t.Error(err, run)
	}
}

func TestAnInvalidObservationFailsTheCallInBothVersions(t *testing.T) {
	p := observer([]Observation{obs("pod_ready_seconds", 1), obs("latency", 1)}, nil)
	for _, version := range []int{1, 2} {
		TakeLogs()
		out, _ := p.Call(OnPodReady, readyRequest(version))
		r, err := DecodeResponse(out)
		if err != nil || r.Error != "observations[1].name: the name 'latency' does not end in _seconds" || len(r.Observations) != 0 {
			t.Errorf("v%d: %v %+v", version, err, r)
		}
		if logs := TakeLogs(); len(logs) != 0 {
			t.Errorf("v%d: nothing observed: %v", version, logs)
		}
	}
}

func TestAFailedOnPodReadyObservesNothing(t *testing.T) {
	p := observer([]Observation{obs("pod_ready_seconds", 1)}, errors.New("not today"))
	for _, version := range []int{1, 2} {
		TakeLogs()
		out, _ := p.Call(OnPodReady, readyRequest(version))
		if r, _ := DecodeResponse(out); r.Error != "not today" || len(r.Observations) != 0 || len(TakeLogs()) != 0 {
			t.Errorf("v%d: %+v", version, r)
		}
	}
}

func TestOnPodReadyWithoutObservations(t *testing.T) {
	for _, p := range []Plugin{
		observer(nil, nil),
		{OnPodReady: func(req *Request) error { return nil }}, // a v1 plugin, unchanged
	} {
		if !p.Implements(OnPodReady) || p.Implements(OnPodCreate) {
			t.Error("Implements")
		}
		for _, version := range []int{1, 2} {
			TakeLogs()
			if out, ok := p.Call(OnPodReady, readyRequest(version)); !ok || len(out) != 0 || len(TakeLogs()) != 0 {
				t.Errorf("v%d: %x", version, out)
			}
		}
	}
}

func TestOnPodReadyAndOnPodReadyObserveAreExclusive(t *testing.T) {
	p := observer(nil, nil)
	p.OnPodReady = func(req *Request) error { return nil }
	out, _ := p.Call(OnPodReady, readyRequest(2))
	if r, _ := DecodeResponse(out); r.Error != "the plugin sets both OnPodReady and OnPodReadyObserve; set one" {
		t.Error(r)
	}
}

func TestTheHandlerSeesTheRequestsVersion(t *testing.T) {
	var seen []int
	p := Plugin{OnPodReadyObserve: func(req *Request) ([]Observation, error) {
		seen = append(seen, req.ABIVersion)
		return nil, nil
	}}
	p.Call(OnPodReady, readyRequest(1))
	p.Call(OnPodReady, readyRequest(2))
	if len(seen) != 2 || seen[0] != 1 || seen[1] != 2 {
		t.Error(seen)
	}
}
