// Package abiv3 makes a plugin module speak ABI v3 (abi/README.md section 15: the ServingGroup
// hook OnServingGroupChange and the owned objects it returns). Import it for its effect, in the
// plugin's main package:
//
//	import _ "modelserving.dev/plugin/abiv3"
//
// In a WebAssembly module it exports the marker modelserving_abi_v3 (beside the v1 and v2 markers
// the package modelserving.dev/plugin exports), so a v3 host sends abiVersion 3 and may call
// ms_on_serving_group_change; everywhere, tests included, it links in the SDK's v3 code, so the
// package plugin answers requests of version 3 and runs a Plugin's OnServingGroupChange
// ([plugin.ModuleABIVersion] is then 3). A plugin that does not import it speaks versions 1
// and 2 and carries none of that code.
package abiv3

import (
	"modelserving.dev/plugin"
	"modelserving.dev/plugin/internal/abiversion"
)

func init() { plugin.SpeakABIv3(abiversion.Token{}) }
