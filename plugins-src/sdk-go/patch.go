package plugin

// JSON Patch (RFC 6902) operations, and PodPatch, which turns intentions ("set the runtime
// class", "upsert this env") into operations.
//
// PodPatch has exactly the semantics of the host's Python PodPatch
// (host/modelserving/plugins/patch.py) and of the Rust SDK's (plugins-src/sdk-rust/src/patch.rs):
// the same calls on the same Pod give the same operations, byte for byte once encoded.

import (
	"errors"
	"strconv"
	"strings"
)

// OpKind is the operation of an [Op].
type OpKind uint8

const (
	OpAdd OpKind = iota
	OpRemove
	OpReplace
	OpTest
)

var opNames = [...]string{"add", "remove", "replace", "test"}

// String is "add", "remove", "replace" or "test".
func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return "unknown"
}

// Op is one RFC 6902 operation. Value is the operation's value for add, replace and test (nil
// is a value: JSON null); remove has none. It is encoded as a map with the keys op, path and,
// except for remove, value, in this order.
type Op struct {
	Kind  OpKind
	Path  string // a JSON Pointer (RFC 6901); build tokens with Escape
	Value Value
}

// Add is an add operation: it creates the member or replaces it.
func Add(path string, value Value) Op { return Op{OpAdd, path, value} }

// Replace is a replace operation: it replaces an existing member.
func Replace(path string, value Value) Op { return Op{OpReplace, path, value} }

// Remove is a remove operation: it removes an existing member.
func Remove(path string) Op { return Op{OpRemove, path, nil} }

// Test is a test operation: the whole patch fails unless the member equals value.
func Test(path string, value Value) Op { return Op{OpTest, path, value} }

// HasValue reports whether the operation carries a value (every operation but remove).
func (o Op) HasValue() bool { return o.Kind != OpRemove }

// ToValue is the operation as a map {"op", "path", "value"?}.
func (o Op) ToValue() Map {
	m := Map{{"op", o.Kind.String()}, {"path", o.Path}}
	if o.HasValue() {
		m = append(m, Entry{"value", o.Value})
	}
	return m
}

// AppendTo appends the operation's msgpack encoding (the bytes of Encode(o.ToValue())).
func (o Op) AppendTo(dst []byte) []byte {
	if o.HasValue() {
		dst = AppendMapHeader(dst, 3)
	} else {
		dst = AppendMapHeader(dst, 2)
	}
	dst = AppendString(dst, "op")
	dst = AppendString(dst, o.Kind.String())
	dst = AppendString(dst, "path")
	dst = AppendString(dst, o.Path)
	if o.HasValue() {
		dst = AppendString(dst, "value")
		dst = AppendValue(dst, o.Value)
	}
	return dst
}

// String renders the operation for messages and test failures.
func (o Op) String() string { return Format(o.ToValue()) }

// Escape is one JSON Pointer reference token (RFC 6901): "~" becomes "~0", "/" becomes "~1".
func Escape(token string) string {
	if !strings.ContainsAny(token, "~/") {
		return token
	}
	var b strings.Builder
	b.Grow(len(token) + 4)
	writeEscaped(&b, token)
	return b.String()
}

func writeEscaped(b *strings.Builder, token string) {
	for i := 0; i < len(token); i++ {
		switch c := token[i]; c {
		case '~':
			b.WriteString("~0")
		case '/':
			b.WriteString("~1")
		default:
			b.WriteByte(c)
		}
	}
}

// PodPatch builds a patch against one Pod, reading it but never changing it.
//
//	patch := plugin.NewPodPatch(req.Pod)
//	patch.SetRuntimeClassName("gvisor")
//	patch.MergeLabels(plugin.Map{{"example.com/team", "ml"}})
//	ops, err := patch.Result()
//
// NewPodPatch reads the little of the Pod the operations depend on, once: whether
// metadata.annotations and metadata.labels are set, and the env var names of every container
// and initContainer (with the shape problems met on the way). Nothing else is decoded.
//
// The Python original raises when the Pod has an impossible shape (say spec.containers is a
// string); here the first such problem is recorded, later calls do nothing, and Result (what
// [Plugin] uses for OnPodCreate) returns it as the hook's error.
//
// Operations hold the values given to them, not copies: do not change a Map after handing it
// to a PodPatch.
type PodPatch struct {
	shape       podShape
	ops         []Op
	mapsCreated [2]bool // annotations, labels (metaFields order)
	// Env var names of each env list as this builder's operations leave it, by JSON pointer,
	// so that a second UpsertEnv builds on the first instead of clobbering or duplicating.
	envLists []envList
	err      string
}

type envList struct {
	base  string
	names []envName
}

// envName is the name of one entry of an env list: only compared with the names of new vars,
// so kept as the request has it (UTF-8 unchecked); ok is false for an entry without a string
// name (it equals no name).
type envName struct {
	name string
	ok   bool
}

var metaFields = [2]string{"annotations", "labels"}
var containerKinds = [2]string{"containers", "initContainers"}

// podShape is what the operations need to know of a Pod; problems are kept as the messages the
// Python original's exceptions correspond to, and reported only when an operation needs that
// part.
type podShape struct {
	metadataErr string
	metaSet     [2]bool // metadata.annotations, metadata.labels set (present and not nil)
	specErr     string
	lists       [2]containerList // spec.containers, spec.initContainers
}

// containerList is a container list; err when it is truthy but not an array (a falsy one
// counts as empty).
type containerList struct {
	err        string
	containers []containerShape
}

type containerShape struct {
	err string // the container is not a map
	env envShape
}

type envState uint8

const (
	envUnset envState = iota // absent or nil: an upsert adds the whole list
	envNames                 // the names (none for a falsy value)
	envBad                   // not something Python could read names from
)

type envShape struct {
	state envState
	names []envName
	bad   string
}

// NewPodPatch is a patch for pod (usually [Request.Pod]). A Pod that is not a map counts as an
// empty one, as in Python.
func NewPodPatch(pod Raw) *PodPatch {
	return &PodPatch{shape: readPod(pod)}
}

// PodPatchFromValue is a patch for a Pod held as a [Value] (tests, or a Pod a plugin built).
func PodPatchFromValue(pod Value) *PodPatch {
	raw, err := NewRaw(Encode(pod))
	if err != nil {
		p := NewPodPatch(RawNil)
		p.err = "pod: " + err.Error()
		return p
	}
	return NewPodPatch(raw)
}

// Ops is the operations so far.
func (p *PodPatch) Ops() []Op { return p.ops }

// Err is the problem with the Pod's shape met so far, if any.
func (p *PodPatch) Err() error {
	if p.err == "" {
		return nil
	}
	return errors.New(p.err)
}

// Result is the operations, or the error when the Pod's shape made a call impossible.
func (p *PodPatch) Result() ([]Op, error) {
	if p.err != "" {
		return nil, errors.New(p.err)
	}
	return p.ops, nil
}

func (p *PodPatch) fail(message string) *PodPatch {
	if p.err == "" {
		p.err = message
	}
	return p
}

// Push appends any operation.
func (p *PodPatch) Push(op Op) *PodPatch {
	if p.err == "" {
		p.ops = append(p.ops, op)
	}
	return p
}

// Add appends an add operation: it creates the member or replaces it (RFC 6902).
func (p *PodPatch) Add(path string, value Value) *PodPatch {
	return p.Push(Add(path, value))
}

// SetRuntimeClassName sets spec.runtimeClassName.
func (p *PodPatch) SetRuntimeClassName(name string) *PodPatch {
	return p.Add("/spec/runtimeClassName", name)
}

// MergeAnnotations adds or overwrites annotations (same keys get the new value).
func (p *PodPatch) MergeAnnotations(values Map) *PodPatch { return p.mergeMap(0, values) }

// MergeLabels adds or overwrites labels (same keys get the new value).
func (p *PodPatch) MergeLabels(values Map) *PodPatch { return p.mergeMap(1, values) }

func (p *PodPatch) mergeMap(field int, values Map) *PodPatch {
	// A Python mapping: a repeated key keeps its first position and takes the last value.
	var merged Map
	for _, e := range values {
		merged.Set(e.Key, e.Value)
	}
	if len(merged) == 0 || p.err != "" {
		return p
	}
	if p.shape.metadataErr != "" {
		return p.fail(p.shape.metadataErr)
	}
	name := metaFields[field]
	if !p.shape.metaSet[field] && !p.mapsCreated[field] {
		p.mapsCreated[field] = true
		return p.Add("/metadata/"+name, merged)
	}
	for _, e := range merged {
		var path strings.Builder
		path.Grow(11 + len(name) + len(e.Key))
		path.WriteString("/metadata/")
		path.WriteString(name)
		path.WriteByte('/')
		writeEscaped(&path, e.Key)
		p.Add(path.String(), e.Value)
	}
	return p
}

// UpsertEnv sets env vars in every container and initContainer, replacing same-named entries.
//
// Each item of env is a core/v1 EnvVar [Map] with a string name. The first entry of a name is
// replaced in place, any later entries of that name are removed (the kubelet would let the
// last one win), and a new name is appended (.../env/-); later items of env win over earlier
// ones. A container without env gets the whole list in one add.
func (p *PodPatch) UpsertEnv(env []Value) *PodPatch {
	// (name, var); a missing or non-string name is only an error once a container needs it,
	// as in Python.
	wanted := make([]wantedVar, 0, len(env))
	for _, v := range env {
		m, ok := v.(Map)
		if !ok {
			return p.fail("an env var is a " + TypeName(v) + ", not a map")
		}
		w := wantedVar{value: m}
		if n, ok := m.Get("name"); ok {
			w.name, w.ok = n.(string)
		}
		wanted = append(wanted, w)
	}
	if len(wanted) == 0 || p.err != "" {
		return p
	}
	if msg := p.upsertEnv(wanted); msg != "" {
		p.fail(msg)
	}
	return p
}

type wantedVar struct {
	name  string
	ok    bool // the var has a string name
	value Map
}

// upsertEnv adds the operations; the error message, if any.
func (p *PodPatch) upsertEnv(wanted []wantedVar) string {
	if p.shape.specErr != "" {
		return p.shape.specErr
	}
	for k, kind := range containerKinds {
		list := &p.shape.lists[k]
		if list.err != "" {
			return list.err
		}
		for i := range list.containers {
			container := &list.containers[i]
			if container.err != "" {
				return container.err
			}
			for _, w := range wanted {
				if !w.ok {
					return "an env var has no string 'name'"
				}
			}
			base := "/spec/" + kind + "/" + strconv.Itoa(i) + "/env"
			slot := -1
			for j := range p.envLists {
				if p.envLists[j].base == base {
					slot = j
					break
				}
			}
			if container.env.state == envUnset && slot < 0 {
				var merged []wantedVar
			next:
				for _, w := range wanted {
					for j := range merged {
						if merged[j].name == w.name {
							merged[j] = w
							continue next
						}
					}
					merged = append(merged, w)
				}
				list := make([]Value, len(merged))
				names := make([]envName, len(merged))
				for j, w := range merged {
					list[j] = w.value
					names[j] = envName{w.name, true}
				}
				p.Add(base, list)
				p.envLists = append(p.envLists, envList{base, names})
				continue
			}
			if slot < 0 {
				switch container.env.state {
				case envBad:
					return container.env.bad
				case envNames:
					p.envLists = append(p.envLists, envList{base, container.env.names})
					container.env.names = nil // only needed once: envLists has them now
				default: // never: handled above
					p.envLists = append(p.envLists, envList{base: base})
				}
				slot = len(p.envLists) - 1
			}
			for _, w := range wanted {
				p.upsertOne(slot, w)
			}
		}
	}
	return ""
}

// upsertOne upserts one env var into the list p.envLists[slot].
func (p *PodPatch) upsertOne(slot int, w wantedVar) {
	list := &p.envLists[slot]
	first := -1
	for j, n := range list.names {
		if n.ok && n.name == w.name {
			first = j
			break
		}
	}
	if first < 0 {
		list.names = append(list.names, envName{w.name, true})
		p.ops = append(p.ops, Add(list.base+"/-", w.value))
		return
	}
	p.ops = append(p.ops, Replace(list.base+"/"+strconv.Itoa(first), w.value))
	for j := len(list.names) - 1; j > first; j-- {
		if n := list.names[j]; n.ok && n.name == w.name {
			p.ops = append(p.ops, Remove(list.base+"/"+strconv.Itoa(j)))
			list.names = append(list.names[:j:j], list.names[j+1:]...)
		}
	}
}

// readPod makes one pass over the Pod: what is not needed is stepped over, never decoded.
func readPod(pod Raw) podShape {
	var shape podShape
	var seenMeta, seenSpec bool
	for it := pod.Entries(); it.Next(); {
		key, _ := it.Key().StrBytes()
		switch {
		case string(key) == "metadata" && !seenMeta:
			seenMeta = true
			shape.metadataErr, shape.metaSet = readMetadata(it.Value())
		case string(key) == "spec" && !seenSpec:
			seenSpec = true
			shape.specErr, shape.lists = readSpec(it.Value())
		}
	}
	return shape
}

func readMetadata(metadata Raw) (string, [2]bool) {
	var set, seen [2]bool
	if metadata.Kind() != KindMap {
		return "pod metadata is a " + metadata.TypeName() + ", not a map", set
	}
	for it := metadata.Entries(); it.Next(); {
		key, _ := it.Key().StrBytes()
		for i, f := range metaFields {
			if !seen[i] && string(key) == f {
				seen[i], set[i] = true, !it.Value().IsNil()
			}
		}
	}
	return "", set
}

func readSpec(spec Raw) (string, [2]containerList) {
	var lists [2]containerList
	if spec.Kind() != KindMap {
		return "pod spec is a " + spec.TypeName() + ", not a map", lists
	}
	var seen [2]bool
	for it := spec.Entries(); it.Next(); {
		key, _ := it.Key().StrBytes()
		for i, kind := range containerKinds {
			if !seen[i] && string(key) == kind {
				seen[i] = true
				lists[i] = readContainers(kind, it.Value())
			}
		}
	}
	return "", lists
}

// readContainers reads a container list as UpsertEnv sees it.
func readContainers(kind string, list Raw) containerList {
	if list.Kind() != KindArray {
		if list.Truthy() {
			return containerList{err: "pod spec." + kind + " is a " + list.TypeName() + ", not an array"}
		}
		return containerList{}
	}
	out := containerList{containers: make([]containerShape, 0, list.Len())}
	i := 0
	for it := list.Items(); it.Next(); i++ {
		c := it.Value()
		if c.Kind() != KindMap {
			where := "pod spec." + kind + "[" + strconv.Itoa(i) + "]"
			out.containers = append(out.containers, containerShape{err: where + " is a " + c.TypeName() + ", not a map"})
			continue
		}
		shape := containerShape{}
		for e := c.Entries(); e.Next(); {
			if key, _ := e.Key().StrBytes(); string(key) != "env" {
				continue
			}
			env := e.Value()
			names, what := envNamesOf(env)
			switch {
			case env.IsNil():
				shape.env = envShape{state: envUnset}
			case what == "":
				shape.env = envShape{state: envNames, names: names}
			default:
				where := "pod spec." + kind + "[" + strconv.Itoa(i) + "].env "
				shape.env = envShape{state: envBad, bad: where + what}
			}
			break // the first env key counts
		}
		out.containers = append(out.containers, shape)
	}
	return out
}

// envNamesOf is the names of an existing env list, as Python's
// [e.get("name") for e in current or []] sees them: a falsy value counts as empty, anything
// else must be a list of maps. The second result describes what is wrong, if anything.
func envNamesOf(env Raw) ([]envName, string) {
	if env.Kind() != KindArray {
		if env.Truthy() {
			return nil, "is a " + env.TypeName() + ", not an array"
		}
		return nil, ""
	}
	names := make([]envName, 0, env.Len())
	j := 0
	for it := env.Items(); it.Next(); j++ {
		e := it.Value()
		if e.Kind() != KindMap {
			return nil, "[" + strconv.Itoa(j) + "] is a " + e.TypeName() + ", not a map"
		}
		var n envName
		if name, ok := e.Get("name"); ok {
			b, isStr := name.StrBytes()
			n = envName{string(b), isStr}
		}
		names = append(names, n)
	}
	return names, ""
}
