package plugin

import "errors"

// Plugin is a plugin's hooks: set the ones it implements (at least OnPodCreate, OnPodReady or
// OnServingGroupChange), and export each of them from the main package (see the package
// documentation).
//
// Errors become responses: a non-nil error is {"error": err.Error()} (class PluginError on the
// host; for ValidateConfig, a refused config). OnPodCreate's operations become
// {"patch": [...]}, or the empty response (no change) when there are none; a nil error from
// OnPodReady or ValidateConfig is the empty response (for ValidateConfig: the config is valid).
// OnPodReadyObserve's observations, checked by [ValidateObservations] (a broken one is answered
// as an error), go in the response ({"observations": [...]}) when the request says abiVersion
// 2, and become "observe <name> <seconds>" info lines ([ObserveLine]) when it says 1 (a host
// that knows only ABI v1). OnServingGroupChange's objects, checked by [ValidateObjects] (a
// broken one is answered as an error), are {"objects": [...]}, or the empty response when there
// are none.
type Plugin struct {
	// OnPodCreate returns the operations for the Pod about to be created; usually
	// `return patch.Result()` of a [PodPatch].
	OnPodCreate func(req *Request) ([]Op, error)
	// OnPodReady observes a Pod that became Running and Ready; an error is only reported.
	OnPodReady func(req *Request) error
	// OnPodReadyObserve is OnPodReady for a plugin that measures something: it also returns
	// observations (nil for none). Set OnPodReady or OnPodReadyObserve, not both.
	OnPodReadyObserve func(req *Request) ([]Observation, error)
	// ValidateConfig checks req.Config, once, when the chain is built. OnPodCreate gets the
	// config again with every call (instances are not kept between calls): parse it there too.
	ValidateConfig func(req *Request) error
	// OnServingGroupChange (ABI v3) sees a whole ServingGroup (req.ServingGroup,
	// req.ExpectedPods, req.Pods) and returns every object it wants for the group now: objects
	// it returned before and leaves out are deleted, and none (nil) deletes them all. The host
	// calls it when the group's Pods or their facts change. A plugin that sets it imports
	// modelserving.dev/plugin/abiv3, whose marker makes the host send ABI v3 requests, and
	// exports it as ms_on_serving_group_change.
	OnServingGroupChange func(req *Request) ([]Object, error)
}

// Implements reports whether the plugin has a function for hook.
func (p *Plugin) Implements(hook Hook) bool {
	switch hook {
	case OnPodCreate:
		return p.OnPodCreate != nil
	case OnPodReady:
		return p.OnPodReady != nil || p.OnPodReadyObserve != nil
	case ValidateConfig:
		return p.ValidateConfig != nil
	case OnServingGroupChange:
		return p.OnServingGroupChange != nil
	}
	return false
}

// Call runs hook on request bytes exactly as the hook's export does (decode the request, check
// it is for this hook, call the function, encode the response, log the observe lines of a v1
// request) and returns the response bytes; false when the plugin does not implement hook. Use
// it to test a plugin natively ([TakeLogs] gives the lines). A request that cannot be decoded,
// or that names another hook, is answered with an error response.
func (p *Plugin) Call(hook Hook, request []byte) ([]byte, bool) {
	if !p.Implements(hook) {
		return nil, false
	}
	out, lines, err := p.run(hook, request)
	if err != nil {
		return ErrorResponse(err.Error()), true
	}
	for _, o := range lines {
		Info(ObserveLine(o))
	}
	return out, true
}

// Run is Call with the failure kept apart: the response of a successful call (a patch,
// observations, or empty), or the error Call would answer with {"error": err.Error()}. It is
// for glue that reports errors its own way, such as an Extism plugin's pdk.SetError. Run writes
// no log lines (an Extism module may not), so the observations of a v1 request, which only log
// lines could carry, are dropped; under v2 they are in the response.
func (p *Plugin) Run(hook Hook, request []byte) ([]byte, error) {
	out, _, err := p.run(hook, request)
	return out, err
}

// run is Run, and also the observations a v1 request leaves to be written as log lines.
func (p *Plugin) run(hook Hook, request []byte) ([]byte, []Observation, error) {
	if !p.Implements(hook) {
		return nil, nil, errors.New("the plugin does not implement " + hook.String())
	}
	if hook.HasGroup() && v3 == nil {
		return nil, nil, errors.New("the plugin implements " + hook.String() + ", which needs ABI v3: import _ \"modelserving.dev/plugin/abiv3\" in its main package (it exports the marker modelserving_abi_v3)")
	}
	req, err := DecodeRequest(request)
	if err != nil {
		return nil, nil, err
	}
	if req.Hook != hook {
		return nil, nil, errors.New("request for hook " + req.Hook.String() + " sent to " + hook.ExportName())
	}
	switch hook {
	case OnPodCreate:
		ops, err := p.OnPodCreate(req)
		if err != nil {
			return nil, nil, err
		}
		return PatchResponse(ops), nil, nil
	case OnPodReady:
		return p.onPodReady(req)
	case OnServingGroupChange:
		out, err := v3.onServingGroupChange(p, req)
		return out, nil, err
	}
	return nil, nil, p.ValidateConfig(req)
}

// onPodReady runs the plugin's OnPodReady or OnPodReadyObserve and places its observations:
// in the response for a v2 request, left for log lines for a v1 one.
func (p *Plugin) onPodReady(req *Request) ([]byte, []Observation, error) {
	if p.OnPodReadyObserve == nil {
		return nil, nil, p.OnPodReady(req)
	}
	if p.OnPodReady != nil {
		return nil, nil, errors.New("the plugin sets both OnPodReady and OnPodReadyObserve; set one")
	}
	observations, err := p.OnPodReadyObserve(req)
	if err != nil {
		return nil, nil, err
	}
	if err := ValidateObservations(observations); err != nil {
		return nil, nil, err
	}
	if req.ABIVersion < 2 {
		return nil, observations, nil
	}
	return ObservationsResponse(observations), nil, nil
}
