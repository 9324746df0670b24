//go:build wasm && !tinygo

package plugin

import "runtime"

// panicStack is the current goroutine's stack (called from a deferred function while it
// panics, so it shows where the panic happened).
func panicStack() string {
	buf := make([]byte, 16<<10)
	return string(buf[:runtime.Stack(buf, false)])
}
