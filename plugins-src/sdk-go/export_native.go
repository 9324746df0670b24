//go:build !wasm

package plugin

// Export is the hook glue of a WebAssembly module; outside one (tests), use [Plugin.Call].
func (p *Plugin) Export(hook Hook, ptr, size uint32) uint64 {
	panic("plugin: Export runs only in a WebAssembly module; use Plugin.Call in tests")
}
