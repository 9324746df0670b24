package plugin

import "strconv"

// ABIVersion is the newest ABI version this SDK speaks. Every plugin exports the markers of
// versions 1 and 2 and answers requests of either (abiVersion): a v2 host sends 2 and takes
// observations in the response, a host that knows only v1 sends 1 and gets them as observe log
// lines. A plugin that imports modelserving.dev/plugin/abiv3 also exports the v3 marker and
// answers requests of version 3, the only ones with the hook OnServingGroupChange
// ([ModuleABIVersion]).
const ABIVersion = 3

// ABIVersionMin is the oldest ABI version this SDK answers.
const ABIVersionMin = 1

// ModuleABIVersion is the newest ABI version this module speaks: 3 when it imports
// modelserving.dev/plugin/abiv3 (which exports the marker modelserving_abi_v3), 2 otherwise.
// [DecodeRequest] refuses requests of a newer version, and a [Request] built to be encoded says
// this version when its ABIVersion is 0.
func ModuleABIVersion() int {
	if v3 != nil {
		return 3
	}
	return 2
}

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
	// OnServingGroupChange (ABI v3): a ServingGroup's Pods changed; the plugin may return the
	// objects (ConfigMaps) it wants for the group.
	OnServingGroupChange
)

var hookNames = [...]string{"OnPodCreate", "OnPodReady", "ValidateConfig", "OnServingGroupChange"}
var hookExports = [...]string{"ms_on_pod_create", "ms_on_pod_ready", "ms_validate_config", "ms_on_serving_group_change"}

// String is the hook's name on the wire: "OnPodCreate", "OnPodReady", "ValidateConfig" or
// "OnServingGroupChange".
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
func (h Hook) HasPod() bool { return h == OnPodCreate || h == OnPodReady }

// HasGroup reports whether the hook's request carries a ServingGroup's Pods
// (OnServingGroupChange, ABI v3).
func (h Hook) HasGroup() bool { return h == OnServingGroupChange }

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
// For OnPodCreate and OnPodReady every field but ExpectedPods and Pods is set; for
// OnServingGroupChange (ABI v3) ABIVersion, Hook, PluginName, Config, ModelServing,
// ServingGroup, ExpectedPods and Pods are; for ValidateConfig only ABIVersion, Hook, PluginName
// and Config are. The others are empty: "", false, 0, nil Pods, and Pod and ModelServing nil.
// Request keys this SDK does not know are ignored.
type Request struct {
	// ABIVersion is the request's abiVersion: 1, 2 or, for a module that imports
	// modelserving.dev/plugin/abiv3, 3 (in a Request built to be encoded, 0 stands for
	// [ModuleABIVersion], and for 3 in an OnServingGroupChange request).
	ABIVersion int
	Hook       Hook
	// PluginName is the plugin's name in the ModelServing's plugin list.
	PluginName string
	// Config is the plugin's config exactly as written in the ModelServing (nil when absent),
	// decoded with every check of [Decode].
	Config       Value
	ModelServing Raw // the ModelServing (a map), for the Pod and ServingGroup hooks
	ServingGroup string
	RoleName     string
	RoleID       string
	IsEntry      bool // whether the Pod is its role's entry Pod
	// Pod is the Pod (a map; with status for OnPodReady), for the Pod hooks. A plugin never
	// changes it: it returns a patch.
	Pod Raw
	// ExpectedPods is, for OnServingGroupChange, how many Pods in the plugin's scope the
	// ServingGroup has when complete (from the ModelServing's spec).
	ExpectedPods int
	// Pods are, for OnServingGroupChange, the ServingGroup's existing Pods in the plugin's
	// scope, in the host's order: by role (in spec order), role replica, the entry first, then
	// the workers.
	Pods []GroupPod
}

// requestFields are the request keys this SDK reads, in the order the host writes them (the
// ServingGroup hook's expectedPods and pods follow servingGroup on the wire).
var requestFields = [...]string{
	"abiVersion", "hook", "plugin", "modelServing", "servingGroup", "roleName", "roleId",
	"isEntry", "pod", "expectedPods", "pods",
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
	newest := ModuleABIVersion()
	if !isInt || v < ABIVersionMin || v > int64(newest) {
		var text string
		if isInt {
			text = strconv.FormatInt(v, 10)
		} else {
			u, _ := abi.Uint()
			text = strconv.FormatUint(u, 10)
		}
		return nil, requestError("abiVersion " + text + " is not supported (this plugin speaks " + strconv.Itoa(ABIVersionMin) + " to " + strconv.Itoa(newest) + ")")
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
	if r.Hook.HasGroup() && r.ABIVersion < 3 {
		return nil, requestError("hook " + name + " needs abiVersion 3, got " + strconv.Itoa(r.ABIVersion))
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

	// The Pod hooks need every key; the ServingGroup hook modelServing and servingGroup (and
	// its own keys, read below). A key no hook needs is still checked when present.
	needed := func(i int) bool {
		return r.Hook.HasPod() || r.Hook.HasGroup() && (i == 3 || i == 4)
	}
	str := func(i int) (string, error) {
		v, ok := field(i)
		if !ok && !needed(i) {
			return "", nil
		}
		if !ok || v.Kind() != KindStr {
			return "", wrong(requestFields[i], "str", v, ok)
		}
		return text(v)
	}
	mapField := func(i int) (Raw, error) {
		v, ok := field(i)
		if !ok && !needed(i) {
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
	if isEntry, ok := field(7); ok || needed(7) {
		b, isBool := isEntry.Bool()
		if !ok || !isBool {
			return nil, wrong("isEntry", "bool", isEntry, ok)
		}
		r.IsEntry = b
	}
	if r.Pod, err = mapField(8); err != nil {
		return nil, err
	}
	if r.Hook.HasGroup() { // abiVersion 3, accepted only when v3 is linked in
		if err := v3.readGroup(r, b, fields[9], found[9], fields[10], found[10]); err != nil {
			return nil, err
		}
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
// is r.ABIVersion, [ModuleABIVersion] when that is 0 (3 for OnServingGroupChange). Key order:
// abiVersion, hook, plugin {name, config}, then for the Pod hooks modelServing, servingGroup,
// roleName, roleId, isEntry, pod, and for OnServingGroupChange modelServing, servingGroup,
// expectedPods, pods (each Pod's keys in the order of [GroupPod]'s fields). Pod and
// ModelServing are copied as they are.
func (r *Request) Encode() []byte {
	podHook, groupHook := r.Hook.HasPod(), r.Hook.HasGroup()
	out := make([]byte, 0, 128+len(r.Pod.Bytes())+len(r.ModelServing.Bytes())+128*len(r.Pods))
	switch {
	case podHook:
		out = AppendMapHeader(out, 9)
	case groupHook:
		out = AppendMapHeader(out, 7)
	default:
		out = AppendMapHeader(out, 3)
	}
	out = AppendString(out, "abiVersion")
	version := r.ABIVersion
	if version == 0 {
		version = ModuleABIVersion()
		if groupHook {
			version = 3
		}
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
	if groupHook {
		out = AppendString(out, "modelServing")
		out = append(out, r.ModelServing.Bytes()...)
		out = AppendString(out, "servingGroup")
		out = AppendString(out, r.ServingGroup)
		out = AppendString(out, "expectedPods")
		out = AppendInt(out, int64(r.ExpectedPods))
		out = AppendString(out, "pods")
		out = AppendArrayHeader(out, len(r.Pods))
		for i := range r.Pods {
			out = r.Pods[i].appendTo(out)
		}
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
