package plugin

// Hook responses: {"patch": [...]}, {"observations": [...]} (ABI v2, see observation.go),
// {"objects": [...]} (ABI v3, see object.go), {"error": "..."} or nothing at all.

import "strconv"

// EmptyError is the message used when a plugin fails with an empty one (an empty error would
// mean success).
const EmptyError = "plugin failed without a message"

// PatchResponse is the response to a successful OnPodCreate: empty (no change) when ops is
// empty, otherwise {"patch": [ops...]}.
func PatchResponse(ops []Op) []byte {
	if len(ops) == 0 {
		return nil
	}
	out := make([]byte, 0, 64*len(ops))
	out = AppendMapHeader(out, 1)
	out = AppendString(out, "patch")
	out = AppendArrayHeader(out, len(ops))
	for i := range ops {
		out = ops[i].AppendTo(out)
	}
	return out
}

// ErrorResponse is the response of a failed hook or an invalid config: {"error": message}.
func ErrorResponse(message string) []byte {
	if message == "" {
		message = EmptyError
	}
	out := make([]byte, 0, 8+len(message))
	out = AppendMapHeader(out, 1)
	out = AppendString(out, "error")
	return AppendString(out, message)
}

// Response is a decoded response, for tests of plugins (the host has its own, stricter
// decoder).
type Response struct {
	Patch        []Value       // the operations as maps (empty when none)
	Error        string        // "" when none
	Observations []Observation // ABI v2 (empty when none)
	Objects      []Object      // ABI v3 (empty when none)
}

// DecodeResponse decodes response bytes; empty bytes are the empty response.
func DecodeResponse(b []byte) (Response, error) {
	var r Response
	if len(b) == 0 {
		return r, nil
	}
	v, err := Decode(b)
	if err != nil {
		return r, &requestErr{"response: " + err.Error()}
	}
	m, ok := v.(Map)
	if !ok {
		return r, &requestErr{"response: must be a map, got " + TypeName(v)}
	}
	for _, e := range m {
		switch x := e.Value.(type) {
		case []Value:
			if e.Key == "patch" {
				r.Patch = x
				continue
			}
			if e.Key == "observations" {
				var err error
				if r.Observations, err = decodeObservations(x); err != nil {
					return r, err
				}
				continue
			}
			if e.Key == "objects" {
				var err error
				if r.Objects, err = decodeObjects(x); err != nil {
					return r, err
				}
				continue
			}
		case string:
			if e.Key == "error" {
				r.Error = x
				continue
			}
		}
		return r, &requestErr{"response: unexpected '" + e.Key + "' (" + TypeName(e.Value) + ")"}
	}
	return r, nil
}

// decodeObservations reads the items of a response's observations.
func decodeObservations(items []Value) ([]Observation, error) {
	out := make([]Observation, 0, len(items))
	for i, item := range items {
		o, ok := decodeObservation(item)
		if !ok {
			return nil, &requestErr{"response: observations[" + strconv.Itoa(i) + "]: {name, seconds} expected, got " + TypeName(item)}
		}
		out = append(out, o)
	}
	return out, nil
}

// decodeObservation reads a map of exactly a string name and a number of seconds.
func decodeObservation(item Value) (Observation, bool) {
	m, ok := item.(Map)
	if !ok || len(m) != 2 { // a decoded map has no repeated keys
		return Observation{}, false
	}
	name, _ := m.Get("name")
	seconds, _ := m.Get("seconds")
	o := Observation{}
	if o.Name, ok = name.(string); !ok {
		return o, false
	}
	switch x := seconds.(type) {
	case float64:
		o.Seconds = x
	case int64:
		o.Seconds = float64(x)
	case uint64:
		o.Seconds = float64(x)
	default:
		return o, false
	}
	return o, true
}
