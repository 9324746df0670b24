package main

// The part of the host's PodEdit (host/modelserving/plugins/podedit.py) this plugin needs,
// read from the request's Pod without decoding it: the container by name, and add_volume,
// with the same operations and error texts.

import (
	"errors"
	"strconv"

	"modelserving.dev/plugin"
)

// PodEdit records the operations of edits of one Pod. It reads the request's Pod as it is:
// AddVolume's two appends touch spec.volumes and a container's volumeMounts, so neither sees
// the other's change.
type PodEdit struct {
	Pod plugin.Raw
	Ops []plugin.Op
}

// A path is a list of map keys (string) and list indexes (int).
type path []any

// get is the value at p, false when it or anything on the way is missing, nil or of another
// type than the next step needs.
func (e *PodEdit) get(p path) (plugin.Raw, bool) {
	node := e.Pod
	for _, key := range p {
		var ok bool
		if i, isIndex := key.(int); isIndex {
			node, ok = node.Item(i)
		} else {
			node, ok = node.Get(key.(string))
		}
		if !ok || node.IsNil() {
			return plugin.RawNil, false
		}
	}
	return node, true
}

// Container is the index in spec.containers of the container named name, or 0 for nil.
func (e *PodEdit) Container(name *string) (int, error) {
	containers, ok := e.get(path{"spec", "containers"})
	if !ok || containers.Kind() != plugin.KindArray || containers.Len() == 0 {
		return 0, errors.New("the Pod has no containers")
	}
	if name == nil {
		return 0, nil
	}
	i := 0
	for it := containers.Items(); it.Next(); i++ {
		if s, ok := strField(it.Value(), "name"); ok && s == *name {
			return i, nil
		}
	}
	return 0, errors.New("the Pod has no container named '" + *name + "'")
}

// AddVolume appends volume (named name) to spec.volumes unless a volume of that name exists,
// then its mount at mountPath to the container unless a mount at that path exists.
func (e *PodEdit) AddVolume(container int, volume plugin.Map, name, mountPath string) error {
	err := e.appendUnless(path{"spec", "volumes"}, volume, func(v plugin.Raw) bool {
		s, ok := strField(v, "name")
		return ok && s == name
	})
	if err != nil {
		return err
	}
	mount := plugin.Map{{"name", name}, {"mountPath", mountPath}}
	return e.appendUnless(path{"spec", "containers", container, "volumeMounts"}, mount,
		func(m plugin.Raw) bool {
			s, ok := strField(m, "mountPath")
			return ok && s == mountPath
		})
}

// appendUnless appends item to the list at p (created when missing) unless an item there
// matches.
func (e *PodEdit) appendUnless(p path, item plugin.Value, matches func(plugin.Raw) bool) error {
	current, ok := e.get(p)
	if !ok {
		return e.put(p, []plugin.Value{item})
	}
	if current.Kind() != plugin.KindArray {
		return errors.New("pod " + dotted(p) + " is a " + current.TypeName() + ", not an array")
	}
	for it := current.Items(); it.Next(); {
		if matches(it.Value()) {
			return nil
		}
	}
	e.Ops = append(e.Ops, plugin.Add(pointer(p)+"/-", item))
	return nil
}

// put sets p to value, creating the missing maps on the way in the same add.
func (e *PodEdit) put(p path, value plugin.Value) error {
	node := e.Pod
	for depth := 0; depth < len(p)-1; depth++ {
		child, exists, err := childAt(node, p, depth)
		if err != nil {
			return err
		}
		if !exists { // add the missing member, holding the rest of the path
			for i := len(p) - 1; i > depth; i-- {
				key, isKey := p[i].(string)
				if !isKey {
					return errors.New("pod " + dotted(p[:depth+1]) + " has no item " + strconv.Itoa(p[i].(int)))
				}
				value = plugin.Map{{key, value}}
			}
			return e.set(p[:depth+1], value)
		}
		node = child
	}
	return e.set(p, value)
}

// childAt is the member p[depth] of node (false when missing or nil), checked to be a container
// p[depth+1] can index.
func childAt(node plugin.Raw, p path, depth int) (plugin.Raw, bool, error) {
	var child plugin.Raw
	var ok bool
	if i, isIndex := p[depth].(int); isIndex {
		if node.Kind() != plugin.KindArray || i >= node.Len() {
			return child, false, errors.New("pod " + dotted(p[:depth]) + " has no item " + strconv.Itoa(i))
		}
		child, ok = node.Item(i)
	} else {
		child, ok = node.Get(p[depth].(string))
	}
	if !ok || child.IsNil() {
		return child, false, nil
	}
	wanted, noun := plugin.KindMap, "a map"
	if _, isIndex := p[depth+1].(int); isIndex {
		wanted, noun = plugin.KindArray, "an array"
	}
	if child.Kind() != wanted {
		return child, false, errors.New("pod " + dotted(p[:depth+1]) + " is a " + child.TypeName() + ", not " + noun)
	}
	return child, true, nil
}

// set adds value at p, whose parent exists and is a map.
func (e *PodEdit) set(p path, value plugin.Value) error {
	if _, isIndex := p[len(p)-1].(int); isIndex {
		return errors.New("pod " + dotted(p) + ": put cannot set a list item")
	}
	e.Ops = append(e.Ops, plugin.Add(pointer(p), value))
	return nil
}

// strField is item[key] when item is a map and the value a string.
func strField(item plugin.Raw, key string) (string, bool) {
	v, ok := item.Get(key)
	if !ok {
		return "", false
	}
	return v.Str()
}

// pointer is the JSON Pointer of p: /spec/containers/0/volumeMounts.
func pointer(p path) string {
	out := ""
	for _, key := range p {
		if i, isIndex := key.(int); isIndex {
			out += "/" + strconv.Itoa(i)
		} else {
			out += "/" + plugin.Escape(key.(string))
		}
	}
	return out
}

// dotted is p as error messages show it: spec.containers[0].volumeMounts.
func dotted(p path) string {
	out := ""
	for _, key := range p {
		if i, isIndex := key.(int); isIndex {
			out += "[" + strconv.Itoa(i) + "]"
		} else if out == "" {
			out = key.(string)
		} else {
			out += "." + key.(string)
		}
	}
	return out
}
