// Package plugin is the Go guest SDK for modelserving WebAssembly plugins (ABI v1 and v2, see
// abi/README.md at the top of the repository).
//
// A plugin is a main package built as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags="-s -w" -o plugin.wasm .
//
// It describes its hooks with a [Plugin] value and exports each hook it implements with one
// line of glue; this package exports the ABI markers modelserving_abi_v1 and modelserving_abi_v2
// and ms_alloc itself:
//
//	var teamLabel = plugin.Plugin{OnPodCreate: onPodCreate, ValidateConfig: validateConfig}
//
//	//go:wasmexport ms_on_pod_create
//	func msOnPodCreate(ptr, size uint32) uint64 { return teamLabel.Export(plugin.OnPodCreate, ptr, size) }
//
//	//go:wasmexport ms_validate_config
//	func msValidateConfig(ptr, size uint32) uint64 { return teamLabel.Export(plugin.ValidateConfig, ptr, size) }
//
//	func main() {}
//
// A plugin that measures something sets OnPodReadyObserve instead of OnPodReady and returns
// [Observation]s; the SDK checks them by the host's rules and sends them in the form the
// request asks for: in the response for a v2 host (abiVersion 2), as "observe" log lines for a
// host that knows only v1:
//
//	func onPodReady(req *plugin.Request) ([]plugin.Observation, error) {
//		return []plugin.Observation{{Name: "my_step_seconds", Seconds: 1.5}}, nil
//	}
//
// What the package provides:
//
//   - [Value] and [Map]: JSON-shaped data, and a msgpack codec written out by hand ([Encode],
//     [Decode], the Append functions) that gives byte for byte what the host's Python
//     msgpack.packb(obj, use_bin_type=True) gives;
//   - [Request]: one hook call's request, checked and read lazily: the Pod and the ModelServing
//     stay undecoded [Raw] views of the request bytes;
//   - [Raw]: a msgpack view to navigate (Get, Items, Entries, Str, ...) without decoding;
//   - [PodPatch] and [Op]: JSON Patch operations with the semantics of the host's Python
//     PodPatch and of the Rust SDK's, so the same calls give the same bytes in every runtime;
//   - [Fields]: strict config reading with the host's conventions;
//   - the Kubernetes name rules ([IsDNS1123Subdomain], [IsQualifiedName], [IsEnvVarName]) and
//     logging through the host ([Info], [Warn], ...).
//
// The package uses no reflection and no fmt, so it builds with the standard Go toolchain
// and keeps to the subset TinyGo compiles. Tests run natively: [Plugin.Call] runs exactly what
// an export runs, on request bytes.
package plugin
