//go:build wasm

package plugin

import "unsafe"

// The exports every plugin needs. A Go module is a WASI reactor: the host calls _initialize
// (the Go runtime's start-up, then package init functions) once per fresh instance before
// anything else, so these run with the runtime up. main.main is never called.

// modelservingABIv1 is the ABI v1 marker (never called).
//
//go:wasmexport modelserving_abi_v1
func modelservingABIv1() {}

// modelservingABIv2 is the ABI v2 marker (never called): a v2 host sends abiVersion 2 and takes
// observations from the response; a host that knows only v1 uses the v1 marker.
//
//go:wasmexport modelserving_abi_v2
func modelservingABIv2() {}

// pinned keeps every buffer handed to the host alive (the instance is discarded after one
// call, so nothing is ever freed).
var pinned [][]byte

// msAlloc gives the host size writable bytes for the request; 0 when size is negative as an
// i32. (A Go allocation that cannot get memory cannot answer 0: it is fatal, the runtime prints
// "fatal error: out of memory" to stderr and traps, which the host reports as MemoryLimit near
// the memory limit.)
//
//go:wasmexport ms_alloc
func msAlloc(size int32) int32 {
	n := int(size) + 1 // +1: a real address for size 0 too
	if size < 0 || n <= 0 {
		return 0
	}
	b := make([]byte, n)
	pinned = append(pinned, b)
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// Export runs hook on the request the host wrote at (ptr, size) and returns the response as
// ptr << 32 | len, for a hook's //go:wasmexport function:
//
//	//go:wasmexport ms_on_pod_create
//	func msOnPodCreate(ptr, size uint32) uint64 { return myPlugin.Export(plugin.OnPodCreate, ptr, size) }
//
// A panic in the hook ends the call: its value is logged at error level ("panic: ..."), the
// stack written to standard error, and the module exits (WASI proc_exit with status 2), which
// the host reports as a Trap (under TinyGo, which cannot recover it, see the package doc).
func (p *Plugin) Export(hook Hook, ptr, size uint32) uint64 {
	defer logPanic()
	out, ok := p.Call(hook, requestAt(ptr, size))
	if !ok {
		out = ErrorResponse("the plugin does not implement " + hook.String())
	}
	if len(out) == 0 {
		return 0
	}
	pinned = append(pinned, out)
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))
	return addr<<32 | uint64(len(out))
}

// requestAt is the request's bytes: the buffer msAlloc gave the host for it (ABI v1 step 4);
// nil, which fails to decode, for a range msAlloc did not hand out.
func requestAt(ptr, size uint32) []byte {
	for i := len(pinned) - 1; i >= 0; i-- {
		b := pinned[i]
		if uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) == ptr && uint32(len(b)) > size {
			return b[:size:size]
		}
	}
	return nil
}

// logPanic ends a call whose hook panicked: the panic's value at error level, the panicking
// goroutine's stack on standard error (warn lines), then WASI proc_exit(2), which the host
// reports as a Trap. Letting the panic go on would take the Go runtime's crash path, which
// sleeps (WASI poll_oneoff, refused by the host) and so dies with a second, misleading error
// and the crash path's stack instead of the panic site's.
func logPanic() {
	r := recover()
	if r == nil {
		return
	}
	switch v := r.(type) {
	case string:
		Error("panic: " + v)
	case error:
		Error("panic: " + v.Error())
	default:
		Error("panic (a value of another type)")
	}
	if stack := panicStack(); stack != "" {
		print(stack) // the builtin: to standard error, without fmt
	}
	procExit(2)
}

//go:wasmimport wasi_snapshot_preview1 proc_exit
func procExit(code int32)
