package plugin

// Owned objects: what an OnServingGroupChange hook returns (ABI v3, abi/README.md section 15.4),
// checked here by the shape rules of the host and sent as the response's "objects".

import (
	"strconv"
	"unicode/utf8"
)

// MaxObjects is the most objects one response may list, whatever the operator allows (the
// operator's objectPolicy.maxObjects, 8 by default, may be lower).
const MaxObjects = 16

// Object is one object an OnServingGroupChange hook wants for its ServingGroup: a ConfigMap
// (write one with [ConfigMap]). The host creates it, keeps it up to date and deletes it when a
// later call no longer lists it; it adds the ModelServing's namespace, its own labels and
// annotation and an owner reference.
//
// The host's object policy then decides (failure class ForbiddenObject): the kind must be
// allowed (ConfigMap, apiVersion v1), the namespace, when given, must be the ModelServing's
// ([Request.Namespace]), the name a DNS subdomain that starts with the ServingGroup's name and
// "-" and listed once, labels and annotations valid and not the controller's, and each object
// at most objectPolicy.maxObjectBytes (256 KiB by default) of JSON.
type Object struct {
	APIVersion string // "v1"
	Kind       string // "ConfigMap"
	Name       string // metadata.name: "<servingGroup>-..."
	// Namespace is metadata.namespace; "" leaves it out (the host uses the ModelServing's).
	Namespace string
	// Labels and Annotations are metadata.labels and metadata.annotations: string values;
	// nil leaves them out.
	Labels      Map
	Annotations Map
	// Data is the ConfigMap's data: string values; nil leaves it out (no data).
	Data Map
}

// ConfigMap is the ConfigMap name with data (string values).
func ConfigMap(name string, data Map) Object {
	return Object{APIVersion: "v1", Kind: "ConfigMap", Name: name, Data: data}
}

// ValidateObjects checks objects by the shape rules the host applies to a v3 response, in its
// order (abi/README.md section 15.4), and says which object breaks which rule, mostly in the
// host's words: "objects[0].data.hccl.json must be a string, not an integer". The host would
// refuse such a response (InvalidResponse); [Plugin.Call] answers with this error instead, so a
// plugin's own tests catch it. Beyond the host's rules it refuses strings that are not valid
// UTF-8 (the host cannot decode them) and a key listed twice in one map (the host would keep
// the last value; say what you mean once). The host's object policy (see [Object]) is checked
// by the host.
func ValidateObjects(objects []Object) error {
	for i := range objects { // first what is not JSON at all, as the host does
		if problem := objects[i].utf8Problem(); problem != "" {
			return objectError(i, problem)
		}
	}
	if n := len(objects); n > MaxObjects {
		return &objectErr{"the response has " + strconv.Itoa(n) + " objects; the limit is " + strconv.Itoa(MaxObjects)}
	}
	for i := range objects {
		o := &objects[i]
		for _, m := range [...]struct {
			where string
			m     Map
		}{{".metadata.labels", o.Labels}, {".metadata.annotations", o.Annotations}, {".data", o.Data}} {
			if problem := stringMapProblem(m.where, m.m); problem != "" {
				return objectError(i, problem)
			}
		}
	}
	return nil
}

// utf8Problem is the first string of o that is not valid UTF-8, as "<where> is not valid UTF-8".
func (o *Object) utf8Problem() string {
	for _, s := range [...]struct{ where, s string }{
		{".apiVersion", o.APIVersion}, {".kind", o.Kind}, {".metadata.name", o.Name}, {".metadata.namespace", o.Namespace},
	} {
		if !utf8.ValidString(s.s) {
			return s.where + " is not valid UTF-8"
		}
	}
	for _, m := range [...]struct {
		where string
		m     Map
	}{{".metadata.labels", o.Labels}, {".metadata.annotations", o.Annotations}, {".data", o.Data}} {
		for _, e := range m.m {
			if !utf8.ValidString(e.Key) {
				return m.where + " has a key that is not valid UTF-8"
			}
			if s, ok := e.Value.(string); ok && !utf8.ValidString(s) {
				return m.where + "." + e.Key + " is not valid UTF-8"
			}
		}
	}
	return ""
}

// stringMapProblem is why m is not a map of strings to strings ("" when it is).
func stringMapProblem(where string, m Map) string {
	for i, e := range m {
		if _, ok := e.Value.(string); !ok {
			return where + "." + e.Key + " must be a string, not " + pyKind(e.Value)
		}
		for _, before := range m[:i] {
			if before.Key == e.Key {
				return where + " has the key '" + e.Key + "' twice"
			}
		}
	}
	return ""
}

// pyKind names a value's type as the host's messages do ("an integer", "a map", "nil", ...).
func pyKind(v Value) string {
	switch TypeName(v) {
	case "nil":
		return "nil"
	case "bool":
		return "a bool"
	case "int":
		return "an integer"
	case "float":
		return "a float"
	case "str":
		return "a string"
	case "array":
		return "an array"
	case "map":
		return "a map"
	}
	return "a value of another Go type"
}

// ObjectsResponse is the ABI v3 response of a successful OnServingGroupChange: {"objects":
// [...]}, or empty when there are none (which, like an empty list, asks the host to delete
// every object the plugin owns in the ServingGroup). It does not check them:
// [ValidateObjects] does.
func ObjectsResponse(objects []Object) []byte {
	if len(objects) == 0 {
		return nil
	}
	out := make([]byte, 0, 64+128*len(objects))
	out = AppendMapHeader(out, 1)
	out = AppendString(out, "objects")
	out = AppendArrayHeader(out, len(objects))
	for i := range objects {
		out = objects[i].AppendTo(out)
	}
	return out
}

// AppendTo appends the object's msgpack encoding (the bytes of Encode(o.ToValue())): apiVersion,
// kind, metadata {name, namespace, labels, annotations}, data, each optional one only when set.
func (o Object) AppendTo(dst []byte) []byte {
	return AppendValue(dst, o.ToValue())
}

// ToValue is the object as a map, as it goes into the response.
func (o Object) ToValue() Map {
	meta := Map{{"name", o.Name}}
	if o.Namespace != "" {
		meta = append(meta, Entry{"namespace", o.Namespace})
	}
	if o.Labels != nil {
		meta = append(meta, Entry{"labels", o.Labels})
	}
	if o.Annotations != nil {
		meta = append(meta, Entry{"annotations", o.Annotations})
	}
	m := Map{{"apiVersion", o.APIVersion}, {"kind", o.Kind}, {"metadata", meta}}
	if o.Data != nil {
		m = append(m, Entry{"data", o.Data})
	}
	return m
}

// String renders the object for messages and test failures.
func (o Object) String() string { return Format(o.ToValue()) }

type objectErr struct{ message string }

func (e *objectErr) Error() string { return e.message }

func objectError(i int, rest string) error {
	return &objectErr{"objects[" + strconv.Itoa(i) + "]" + rest}
}

// decodeObjects reads the objects of a response (for [DecodeResponse]): each a map of the
// keys [Object.ToValue] writes, strings where it writes strings.
func decodeObjects(items []Value) ([]Object, error) {
	out := make([]Object, 0, len(items))
	for i, item := range items {
		o, ok := decodeObject(item)
		if !ok {
			return nil, &requestErr{"response: objects[" + strconv.Itoa(i) + "]: {apiVersion, kind, metadata {name, ...}, data} expected, got " + Format(item)}
		}
		out = append(out, o)
	}
	return out, nil
}

func decodeObject(item Value) (Object, bool) {
	var o Object
	m, ok := item.(Map)
	if !ok {
		return o, false
	}
	for _, e := range m {
		switch e.Key {
		case "apiVersion":
			o.APIVersion, ok = e.Value.(string)
		case "kind":
			o.Kind, ok = e.Value.(string)
		case "data":
			o.Data, ok = nilOrMap(e.Value)
		case "metadata":
			ok = o.decodeMetadata(e.Value)
		default:
			ok = false
		}
		if !ok {
			return o, false
		}
	}
	return o, true
}

func (o *Object) decodeMetadata(v Value) bool {
	meta, ok := v.(Map)
	if !ok {
		return false
	}
	named := false
	for _, e := range meta {
		switch e.Key {
		case "name":
			o.Name, ok = e.Value.(string)
			named = true
		case "namespace":
			o.Namespace, ok = e.Value.(string)
		case "labels":
			o.Labels, ok = nilOrMap(e.Value)
		case "annotations":
			o.Annotations, ok = nilOrMap(e.Value)
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	return named
}

func nilOrMap(v Value) (Map, bool) {
	if v == nil {
		return nil, true
	}
	m, ok := v.(Map)
	return m, ok
}
