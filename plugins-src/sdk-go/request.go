package plugin

import "strconv"

// ABIVersion is the newest ABI version this SDK speaks. A plugin exports the markers of versions
// 1 and 2 and answers requests of either (abiVersion): a v2 host sends 2 and takes observations
// in the response, a host that knows only v1 sends 1 and gets them as observe log lines.
const ABIVersion = 2

// ABIVersionMin is the oldest ABI version this SDK answers.
const ABIVersionMin = 1

// Hook is a hook point.
type Hook uint8

const (
	// OnPodCreate: a Pod is about to be created; the plugin may return a patch.
	OnPodCreate Hook = iota
	// OnPodReady: a Pod became Running and Ready; the plugin observes (an error is only
	// reported).
	OnPodReady
	// ValidateConfig: the host asks whether the plugin's config is valid, once, when the
	// chain is built.
	ValidateConfig
)

var hookNames = [...]string{"OnPodCreate", "OnPodReady", "ValidateConfig"}
var hookExports = [...]string{"ms_on_pod_create", "ms_on_pod_ready", "ms_validate_config"}

// String is the hook's name on the wire: "OnPodCreate", "OnPodReady" or "ValidateConfig".
func (h Hook) String() string {
	if int(h) < len(hookNames) {
		return hookNames[h]
	}
	return "Hook(" + strconv.Itoa(int(h)) + ")"
}

// ExportName is the name of the module export the host calls for this hook.
func (h Hook) ExportName() string {
	if int(h) < len(hookExports) {
		return hookExports[h]
	}
	return ""
}

// HasPod reports whether the hook's request carries a Pod (OnPodCreate, OnPodReady).
func (h Hook) HasPod() bool { return h != ValidateConfig }

// HookNamed is the hook with this wire name.
func HookNamed(name string) (Hook, bool) {
	for i, n := range hookNames {
		if n == name {
			return Hook(i), true
		}
	}
	return 0, false
}

// Request is one hook call's context, read from the request bytes.
//
// [DecodeRequest] makes one pass over the request that checks its framing (see [Raw]) and
// notes where each top-level field is; the small fields are read from there, Config is
// decoded into a [Value], and ModelServing and Pod stay undecoded [Raw] views: navigate them
// with Get, Path, Items and Entries, or decode them with Value when the whole object is needed.
//
// For OnPodCreate and OnPodReady every field is set; for ValidateConfig only ABIVersion, Hook,
// PluginName and Config are, the strings are empty, IsEntry is false and Pod and ModelServing are nil.
// Request keys this SDK does not know are ignored.
type Request struct {
	// ABIVersion is the request's abiVersion: 1 or 2 (in a Request built to be encoded, 0
	// stands for [ABIVersion]).
	ABIVersion int
	Hook       Hook
	// PluginName is the plugin's name in the ModelServing's plugin list.
	PluginName string
	// Config is the plugin's config exactly as written in the ModelServing (nil when absent),
	// decoded with every check of [Decode].
	Config       Value
	ModelServing Raw // the ModelServing (a map), for the Pod hooks
	ServingGroup string
	RoleName     string
	RoleID       string
	IsEntry      bool // whether the Pod is its role's entry Pod
	// Pod is the Pod (a map; with status for OnPodReady), for the Pod hooks. A plugin never
	// changes it: it returns a patch.
	Pod Raw
}

// requestFields are the request keys this SDK reads, in the order the host writes them.
var requestFields = [...]string{
	"abiVersion", "hook", "plugin", "modelServing", "servingGroup", "roleName", "roleId",
	"isEntry", "pod",
}

// DecodeRequest checks and reads a request; the error says what is wrong, e.g.
// "request: 'roleName' must be a str, got int".
func DecodeRequest(b []byte) (*Request, error) {
	root, err := NewRaw(b)
	if err != nil {
		return nil, requestError(err.Error())
	}
	if root.Kind() != KindMap {
		return nil, requestError("must be a map, got " + root.TypeName())
	}
	var fields [len(requestFields)]Raw
	var found [len(requestFields)]bool
	for it := root.Entries(); it.Next(); {
		key, ok := it.Key().StrBytes()
		if !ok {
			return nil, requestError((&DecodeError{offsetIn(b, it.Key()), "map key is a " + it.Key().TypeName() + ", not a string"}).Error())
		}
		for i, name := range requestFields {
			if !found[i] && string(key) == name { // never repeated; if one were, the first counts
				fields[i], found[i] = it.Value(), true
				break
			}
		}
	}
	field := func(i int) (Raw, bool) { return fields[i], found[i] }
	text := func(v Raw) (string, error) {
		s, ok := v.Str()
		if !ok {
			return "", requestError((&DecodeError{offsetIn(b, v), "string is not valid UTF-8"}).Error())
		}
		return s, nil
	}

	r := &Request{Pod: RawNil, ModelServing: RawNil}
	abi, ok := field(0)
	if !ok || abi.Kind() != KindInt {
		return nil, wrong("abiVersion", "int", abi, ok)
	}
	v, isInt := abi.Int()
	if !isInt || v < ABIVersionMin || v > ABIVersion {
		var text string
		if isInt {
			text = strconv.FormatInt(v, 10)
		} else {
			u, _ := abi.Uint()
			text = strconv.FormatUint(u, 10)
		}
		return nil, requestError("abiVersion " + text + " is not supported (this plugin speaks " + strconv.Itoa(ABIVersionMin) + " to " + strconv.Itoa(ABIVersion) + ")")
	}
	r.ABIVersion = int(v)
	hook, ok := field(1)
	if !ok || hook.Kind() != KindStr {
		return nil, wrong("hook", "str", hook, ok)
	}
	name, err := text(hook)
	if err != nil {
		return nil, err
	}
	if r.Hook, ok = HookNamed(name); !ok {
		return nil, requestError("unknown hook '" + name + "'")
	}
	plugin, ok := field(2)
	if !ok || plugin.Kind() != KindMap {
		return nil, wrong("plugin", "map", plugin, ok)
	}
	pluginName, ok := plugin.Get("name")
	if !ok || pluginName.Kind() != KindStr {
		return nil, wrong("plugin.name", "str", pluginName, ok)
	}
	if r.PluginName, err = text(pluginName); err != nil {
		return nil, err
	}
	if config, ok := plugin.Get("config"); ok {
		// Nested in the request and the plugin map: the nesting limit counts from the request.
		if r.Config, err = decodeNested(config.Bytes(), 2); err != nil {
			if de, ok := err.(*DecodeError); ok {
				de.Offset += offsetIn(b, config)
			}
			return nil, requestError(err.Error())
		}
	}

	required := r.Hook.HasPod()
	str := func(i int) (string, error) {
		v, ok := field(i)
		if !ok && !required {
			return "", nil
		}
		if !ok || v.Kind() != KindStr {
			return "", wrong(requestFields[i], "str", v, ok)
		}
		return text(v)
	}
	mapField := func(i int) (Raw, error) {
		v, ok := field(i)
		if !ok && !required {
			return RawNil, nil
		}
		if !ok || v.Kind() != KindMap {
			return RawNil, wrong(requestFields[i], "map", v, ok)
		}
		return v, nil
	}
	if r.ModelServing, err = mapField(3); err != nil {
		return nil, err
	}
	if r.ServingGroup, err = str(4); err != nil {
		return nil, err
	}
	if r.RoleName, err = str(5); err != nil {
		return nil, err
	}
	if r.RoleID, err = str(6); err != nil {
		return nil, err
	}
	if isEntry, ok := field(7); ok || required {
		b, isBool := isEntry.Bool()
		if !ok || !isBool {
			return nil, wrong("isEntry", "bool", isEntry, ok)
		}
		r.IsEntry = b
	}
	if r.Pod, err = mapField(8); err != nil {
		return nil, err
	}
	return r, nil
}

// PodName is pod.metadata.name, or "" when unset (a Pod may get its name from generateName).
func (r *Request) PodName() string {
	if name, ok := r.Pod.Path("metadata", "name"); ok {
		if s, ok := name.Str(); ok {
			return s
		}
	}
	return ""
}

// Encode gives back the request bytes the host would send (to build test requests): abiVersion
// is r.ABIVersion, [ABIVersion] when that is 0. Key order: abiVersion, hook, plugin {name, config}, then for the Pod hooks modelServing,
// servingGroup, roleName, roleId, isEntry, pod. Pod and ModelServing are copied as they are.
func (r *Request) Encode() []byte {
	podHook := r.Hook.HasPod()
	out := make([]byte, 0, 128+len(r.Pod.Bytes())+len(r.ModelServing.Bytes()))
	if podHook {
		out = AppendMapHeader(out, 9)
	} else {
		out = AppendMapHeader(out, 3)
	}
	out = AppendString(out, "abiVersion")
	version := r.ABIVersion
	if version == 0 {
		version = ABIVersion
	}
	out = AppendInt(out, int64(version))
	out = AppendString(out, "hook")
	out = AppendString(out, r.Hook.String())
	out = AppendString(out, "plugin")
	out = AppendMapHeader(out, 2)
	out = AppendString(out, "name")
	out = AppendString(out, r.PluginName)
	out = AppendString(out, "config")
	out = AppendValue(out, r.Config)
	if podHook {
		out = AppendString(out, "modelServing")
		out = append(out, r.ModelServing.Bytes()...)
		for _, kv := range [...][2]string{{"servingGroup", r.ServingGroup}, {"roleName", r.RoleName}, {"roleId", r.RoleID}} {
			out = AppendString(out, kv[0])
			out = AppendString(out, kv[1])
		}
		out = AppendString(out, "isEntry")
		out = AppendBool(out, r.IsEntry)
		out = AppendString(out, "pod")
		out = append(out, r.Pod.Bytes()...)
	}
	return out
}

// offsetIn is where v starts in b (v is a view of b's bytes).
func offsetIn(b []byte, v Raw) int {
	return len(b) - len(v.b)
}

type requestErr struct{ message string }

func (e *requestErr) Error() string { return e.message }

func requestError(message string) error { return &requestErr{"request: " + message} }

func wrong(key, want string, got Raw, present bool) error {
	if !present {
		return requestError("'" + key + "' is missing")
	}
	return requestError("'" + key + "' must be a " + want + ", got " + got.TypeName())
}
