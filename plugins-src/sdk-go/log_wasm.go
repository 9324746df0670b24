//go:build wasm

package plugin

import "unsafe"

//go:wasmimport modelserving log
func modelservingLog(level int32, ptr unsafe.Pointer, size int32)

func hostLog(level Level, message string) {
	if message == "" {
		modelservingLog(int32(level), nil, 0)
		return
	}
	modelservingLog(int32(level), unsafe.Pointer(unsafe.StringData(message)), int32(len(message)))
}

// TakeLogs returns nothing in a module: the messages went to the host.
func TakeLogs() []LogLine { return nil }
