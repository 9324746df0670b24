package plugin

// The ServingGroup hook's request (ABI v3, abi/README.md section 15.3): the facts of each Pod
// of the group, read from the request by DecodeRequest and written back by Request.Encode.

import "strconv"

// maxInt32 bounds a number of Pods (expectedPods), so it fits an int everywhere.
const maxInt32 = 1<<31 - 1

// GroupPod is one existing Pod of a ServingGroup as OnServingGroupChange sees it (the request's
// "pods"). The strings are "" until the fact is known: Node until the Pod is scheduled, HostIP
// and PodIP until the kubelet reports them, Phase until it reports one.
type GroupPod struct {
	Name     string
	RoleName string // the Pod's role, e.g. "prefill"
	RoleID   string // its role replica, e.g. "prefill-0"
	IsEntry  bool   // whether it is the entry Pod of its role replica
	Node     string // spec.nodeName
	HostIP   string // status.hostIP
	PodIP    string // status.podIP
	Phase    string // status.phase: "Pending", "Running", ...
	Ready    bool   // Running, and its Ready condition is True
	// Annotations are the Pod's annotations (string values), in the request's order; empty
	// when it has none.
	Annotations Map
}

// groupPodFields are the keys of a Pod of the request, in the order the host writes them.
var groupPodFields = [...]string{
	"name", "roleName", "roleId", "isEntry", "node", "hostIP", "podIP", "phase", "ready",
	"annotations",
}

// decodeGroupPods reads the request's pods (an array), every key of each required and checked:
// "request: 'pods[1].podIP' must be a str, got int". Unknown keys are ignored.
func decodeGroupPods(b []byte, pods Raw) ([]GroupPod, error) {
	out := make([]GroupPod, 0, pods.Len())
	for it := pods.Items(); it.Next(); {
		where := "pods[" + strconv.Itoa(len(out)) + "]"
		entry := it.Value()
		if entry.Kind() != KindMap {
			return nil, wrong(where, "map", entry, true)
		}
		var fields [len(groupPodFields)]Raw
		var found [len(groupPodFields)]bool
		for e := entry.Entries(); e.Next(); {
			key, _ := e.Key().StrBytes() // a key that is not a string matches nothing
			for i, name := range groupPodFields {
				if !found[i] && string(key) == name {
					fields[i], found[i] = e.Value(), true
					break
				}
			}
		}
		var strs [len(groupPodFields)]string
		var bools [len(groupPodFields)]bool
		for i, name := range groupPodFields {
			v, ok := fields[i], found[i]
			key := where + "." + name
			switch name {
			case "isEntry", "ready":
				x, isBool := v.Bool()
				if !ok || !isBool {
					return nil, wrong(key, "bool", v, ok)
				}
				bools[i] = x
			case "annotations":
				if !ok || v.Kind() != KindMap {
					return nil, wrong(key, "map", v, ok)
				}
			default:
				s, err := requestStr(b, key, v, ok)
				if err != nil {
					return nil, err
				}
				strs[i] = s
			}
		}
		annotations, err := stringMap(b, where+".annotations", fields[9])
		if err != nil {
			return nil, err
		}
		out = append(out, GroupPod{
			Name: strs[0], RoleName: strs[1], RoleID: strs[2], IsEntry: bools[3], Node: strs[4],
			HostIP: strs[5], PodIP: strs[6], Phase: strs[7], Ready: bools[8], Annotations: annotations,
		})
	}
	return out, nil
}

// requestStr is a string of the request, checked: present, a string, valid UTF-8.
func requestStr(b []byte, key string, v Raw, present bool) (string, error) {
	if !present || v.Kind() != KindStr {
		return "", wrong(key, "str", v, present)
	}
	s, ok := v.Str()
	if !ok {
		return "", requestError((&DecodeError{offsetIn(b, v), "string is not valid UTF-8"}).Error())
	}
	return s, nil
}

// stringMap reads a map of strings to strings (a Pod's annotations), in wire order.
func stringMap(b []byte, where string, m Raw) (Map, error) {
	out := make(Map, 0, m.Len())
	for e := m.Entries(); e.Next(); {
		key, err := requestStr(b, where+" key", e.Key(), true)
		if err != nil {
			return nil, err
		}
		value, err := requestStr(b, where+"."+key, e.Value(), true)
		if err != nil {
			return nil, err
		}
		out = append(out, Entry{key, value})
	}
	return out, nil
}

// appendTo appends the Pod's entry of a request, keys in the order the host writes them.
func (p *GroupPod) appendTo(out []byte) []byte {
	out = AppendMapHeader(out, len(groupPodFields))
	for _, kv := range [...][2]string{{"name", p.Name}, {"roleName", p.RoleName}, {"roleId", p.RoleID}} {
		out = AppendString(out, kv[0])
		out = AppendString(out, kv[1])
	}
	out = AppendString(out, "isEntry")
	out = AppendBool(out, p.IsEntry)
	for _, kv := range [...][2]string{{"node", p.Node}, {"hostIP", p.HostIP}, {"podIP", p.PodIP}, {"phase", p.Phase}} {
		out = AppendString(out, kv[0])
		out = AppendString(out, kv[1])
	}
	out = AppendString(out, "ready")
	out = AppendBool(out, p.Ready)
	out = AppendString(out, "annotations")
	return AppendValue(out, p.Annotations)
}

// Namespace is the ModelServing's metadata.namespace, "default" when it has none (as the host
// reads it): where its Pods run and where the host puts a ServingGroup hook's objects. "" for
// a ValidateConfig request, which carries no ModelServing.
func (r *Request) Namespace() string {
	if r.ModelServing.IsNil() {
		return ""
	}
	if ns, ok := r.ModelServing.Path("metadata", "namespace"); ok {
		if s, ok := ns.Str(); ok && s != "" {
			return s
		}
	}
	return "default"
}
