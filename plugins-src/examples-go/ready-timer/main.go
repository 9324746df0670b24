// ready-timer: an OnPodReady plugin in Go that measures, and the example of returning
// observations with the Go SDK (abi/README.md section 7.1).
//
// For every Pod that becomes Ready it returns the observation pod_ready_seconds: the Ready
// condition's lastTransitionTime minus metadata.creationTimestamp (RFC 3339 times; a negative
// difference counts as 0). The SDK exports both ABI markers, so a v2 host takes the observation
// from the response and a host that knows only v1 from the line "observe pod_ready_seconds
// <s.mmm>". When the time cannot be measured (a missing or malformed time, or more than a week,
// the most an observation may be), a warn line says why and nothing is observed; the hook never
// fails on a Pod. It takes no config.
package main

import (
	"time"

	"modelserving.dev/plugin"
)

// Observation is the name of the observation the plugin returns.
const Observation = "pod_ready_seconds"

// Timer is the plugin: its exports are below, its tests call Timer.Call.
var Timer = plugin.Plugin{OnPodReadyObserve: onPodReady, ValidateConfig: validateConfig}

//go:wasmexport ms_on_pod_ready
func msOnPodReady(ptr, size uint32) uint64 { return Timer.Export(plugin.OnPodReady, ptr, size) }

//go:wasmexport ms_validate_config
func msValidateConfig(ptr, size uint32) uint64 {
	return Timer.Export(plugin.ValidateConfig, ptr, size)
}

// main is never called: a plugin is a WASI reactor (-buildmode=c-shared).
func main() {}

func onPodReady(req *plugin.Request) ([]plugin.Observation, error) {
	seconds, why := ReadySeconds(req.Pod)
	if why != "" {
		plugin.Warn("Pod " + req.PodName() + ": not measured: " + why)
		return nil, nil
	}
	return []plugin.Observation{{Name: Observation, Seconds: seconds}}, nil
}

// ReadySeconds is how long the Pod took to become Ready, or why that cannot be told.
func ReadySeconds(pod plugin.Raw) (float64, string) {
	created, why := timeAt(pod, "metadata.creationTimestamp", "metadata", "creationTimestamp")
	if why != "" {
		return 0, why
	}
	ready, why := readySince(pod)
	if why != "" {
		return 0, why
	}
	seconds := ready.Sub(created).Seconds()
	if seconds < 0 {
		seconds = 0
	}
	if seconds > plugin.MaxObservationSeconds {
		return 0, "it took more than a week"
	}
	return seconds, ""
}

// readySince is the lastTransitionTime of the Pod's Ready condition.
func readySince(pod plugin.Raw) (time.Time, string) {
	conditions, _ := pod.Path("status", "conditions")
	for it := conditions.Items(); it.Next(); {
		kind, _ := it.Value().Get("type")
		if name, _ := kind.Str(); name == "Ready" {
			return timeAt(it.Value(), "the Ready condition's lastTransitionTime", "lastTransitionTime")
		}
	}
	return time.Time{}, "the Pod has no Ready condition"
}

func timeAt(v plugin.Raw, what string, path ...string) (time.Time, string) {
	raw, ok := v.Path(path...)
	text, isStr := raw.Str()
	if !ok || !isStr {
		return time.Time{}, what + " is missing"
	}
	t, err := time.Parse(time.RFC3339, text)
	if err != nil {
		return time.Time{}, what + " '" + text + "' is not an RFC 3339 time"
	}
	return t, ""
}

// validateConfig accepts no config: nil or an empty map.
func validateConfig(req *plugin.Request) error {
	f, err := plugin.ConfigFields(req.Config)
	if err != nil {
		return err
	}
	return f.Finish()
}
