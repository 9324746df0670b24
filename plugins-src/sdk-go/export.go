package plugin

import "errors"

// Plugin is a plugin's hooks: set the ones it implements (at least OnPodCreate or OnPodReady),
// and export each of them from the main package (see the package documentation).
//
// Errors become responses: a non-nil error is {"error": err.Error()} (class PluginError on the
// host; for ValidateConfig, a refused config). OnPodCreate's operations become
// {"patch": [...]}, or the empty response (no change) when there are none; a nil error from
// OnPodReady or ValidateConfig is the empty response (for ValidateConfig: the config is valid).
type Plugin struct {
	// OnPodCreate returns the operations for the Pod about to be created; usually
	// `return patch.Result()` of a [PodPatch].
	OnPodCreate func(req *Request) ([]Op, error)
	// OnPodReady observes a Pod that became Running and Ready; an error is only reported.
	OnPodReady func(req *Request) error
	// ValidateConfig checks req.Config, once, when the chain is built. OnPodCreate gets the
	// config again with every call (instances are not kept between calls): parse it there too.
	ValidateConfig func(req *Request) error
}

// Implements reports whether the plugin has a function for hook.
func (p *Plugin) Implements(hook Hook) bool {
	switch hook {
	case OnPodCreate:
		return p.OnPodCreate != nil
	case OnPodReady:
		return p.OnPodReady != nil
	case ValidateConfig:
		return p.ValidateConfig != nil
	}
	return false
}

// Call runs hook on request bytes exactly as the hook's export does (decode the request, check
// it is for this hook, call the function, encode the response) and returns the response bytes;
// false when the plugin does not implement hook. Use it to test a plugin natively. A request
// that cannot be decoded, or that names another hook, is answered with an error response.
func (p *Plugin) Call(hook Hook, request []byte) ([]byte, bool) {
	if !p.Implements(hook) {
		return nil, false
	}
	out, err := p.Run(hook, request)
	if err != nil {
		return ErrorResponse(err.Error()), true
	}
	return out, true
}

// Run is Call with the failure kept apart: the response of a successful call (a patch, or
// empty), or the error Call would answer with {"error": err.Error()}. It is for glue that
// reports errors its own way, such as an Extism plugin's pdk.SetError.
func (p *Plugin) Run(hook Hook, request []byte) ([]byte, error) {
	if !p.Implements(hook) {
		return nil, errors.New("the plugin does not implement " + hook.String())
	}
	req, err := DecodeRequest(request)
	if err != nil {
		return nil, err
	}
	if req.Hook != hook {
		return nil, errors.New("request for hook " + req.Hook.String() + " sent to " + hook.ExportName())
	}
	switch hook {
	case OnPodCreate:
		ops, err := p.OnPodCreate(req)
		if err != nil {
			return nil, err
		}
		return PatchResponse(ops), nil
	case OnPodReady:
		return nil, p.OnPodReady(req)
	}
	return nil, p.ValidateConfig(req)
}
