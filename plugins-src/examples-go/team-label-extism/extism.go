//go:build wasm

package main

// The Extism glue. go-pdk's functions are imports of the Extism kernel (extism:host/env), which
// exist only in a WebAssembly module, so this file is left out of native builds (tests).

import (
	"github.com/extism/go-pdk"
	"modelserving.dev/plugin"
)

//go:wasmexport on_pod_create
func extismOnPodCreate() int32 { return run(plugin.OnPodCreate) }

//go:wasmexport validate_config
func extismValidateConfig() int32 { return run(plugin.ValidateConfig) }

// run answers one Extism call: input = request bytes, output = response bytes (none = the
// empty response), an Extism error and status 1 when the hook fails.
func run(hook plugin.Hook) int32 {
	out, err := TeamLabel.Run(hook, pdk.Input())
	if err != nil {
		pdk.SetError(err)
		return 1
	}
	if len(out) > 0 {
		pdk.Output(out)
	}
	return 0
}
