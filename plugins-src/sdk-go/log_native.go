//go:build !wasm

package plugin

import "sync"

var (
	logsMu sync.Mutex
	logs   []LogLine
)

func hostLog(level Level, message string) {
	logsMu.Lock()
	logs = append(logs, LogLine{level, message})
	logsMu.Unlock()
}

// TakeLogs returns the messages logged since the last call (outside a WebAssembly module,
// where they cannot go to the host).
func TakeLogs() []LogLine {
	logsMu.Lock()
	defer logsMu.Unlock()
	out := logs
	logs = nil
	return out
}
