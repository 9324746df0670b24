//go:build wasm

package abiv3

// modelservingABIv3 is the ABI v3 marker (never called): a v3 host sends abiVersion 3 and may
// call OnServingGroupChange; a host that knows only v1 or v2 uses the older markers.
//
//go:wasmexport modelserving_abi_v3
func modelservingABIv3() {}
