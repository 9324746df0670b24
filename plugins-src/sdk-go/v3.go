package plugin

// ABI v3 is linked into a module only when the module imports modelserving.dev/plugin/abiv3:
// that package's init calls SpeakABIv3, the only reference to the code below, so a plugin that
// speaks versions 1 and 2 carries none of it (Go's linker leaves out what nothing reaches).

import (
	"strconv"

	"modelserving.dev/plugin/internal/abiversion"
)

// v3Code is what ABI v3 adds to a call: reading a ServingGroup request's Pods and answering
// with objects. v3 is nil unless the module speaks v3.
type v3Code struct {
	readGroup            func(r *Request, b []byte, expected Raw, hasExpected bool, pods Raw, hasPods bool) error
	onServingGroupChange func(p *Plugin, req *Request) ([]byte, error)
}

var v3 *v3Code

// SpeakABIv3 makes the module answer requests of ABI v3 ([ModuleABIVersion] 3) and run a
// [Plugin]'s OnServingGroupChange. Only the package modelserving.dev/plugin/abiv3 can call it
// (the argument's type is internal), from its init: import that package, which also exports the
// marker modelserving_abi_v3 that makes the host send v3 requests.
func SpeakABIv3(abiversion.Token) {
	v3 = &v3Code{readGroup: readGroup, onServingGroupChange: onServingGroupChange}
}

// readGroup reads the ServingGroup hook's expectedPods and pods into r.
func readGroup(r *Request, b []byte, expected Raw, hasExpected bool, pods Raw, hasPods bool) error {
	n, isInt := expected.Int()
	if !hasExpected || !isInt {
		return wrong("expectedPods", "int", expected, hasExpected)
	}
	if n < 0 || n > maxInt32 {
		return requestError("'expectedPods' " + strconv.FormatInt(n, 10) + " is not a number of Pods")
	}
	r.ExpectedPods = int(n)
	if !hasPods || pods.Kind() != KindArray {
		return wrong("pods", "array", pods, hasPods)
	}
	var err error
	r.Pods, err = decodeGroupPods(b, pods)
	return err
}

// onServingGroupChange runs the plugin's OnServingGroupChange and checks its objects.
func onServingGroupChange(p *Plugin, req *Request) ([]byte, error) {
	objects, err := p.OnServingGroupChange(req)
	if err != nil {
		return nil, err
	}
	if err := ValidateObjects(objects); err != nil {
		return nil, err
	}
	return ObjectsResponse(objects), nil
}
