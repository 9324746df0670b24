// Package plugin is the Go guest SDK for modelserving WebAssembly plugins (ABI v1, v2 and v3,
// see abi/README.md at the top of the repository).
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
// A plugin that writes files for a whole ServingGroup sets OnServingGroupChange (ABI v3): it gets
// the group's Pods (req.Pods: each one's role, node, IPs, phase, readiness and annotations) and
// returns the objects, ConfigMaps, the host should keep for the group; the SDK checks them by the
// host's shape rules ([ValidateObjects]) and sends them. A plugin that sets it imports the
// package modelserving.dev/plugin/abiv3, which exports the marker modelserving_abi_v3 and links
// the v3 code in (a plugin that does not stays a v2 module, without it), and exports the hook
// as ms_on_serving_group_change:
//
//	import _ "modelserving.dev/plugin/abiv3"
//
//	var addresses = plugin.Plugin{OnServingGroupChange: onGroup}
//
//	//go:wasmexport ms_on_serving_group_change
//	func msOnServingGroupChange(ptr, size uint32) uint64 {
//		return addresses.Export(plugin.OnServingGroupChange, ptr, size)
//	}
//
//	func onGroup(req *plugin.Request) ([]plugin.Object, error) {
//		data := plugin.Map{}
//		for _, pod := range req.Pods {
//			if pod.IsEntry {
//				data.Set(pod.RoleID, pod.PodIP) // "" until the Pod has an IP
//			}
//		}
//		return []plugin.Object{plugin.ConfigMap(req.ServingGroup+"-entries", data)}, nil
//	}
//
// Objects it returned before and leaves out are deleted; the name must start with the
// ServingGroup's name and "-". plugins-src/examples-go/entry-address is a complete example.
//
// What the package provides:
//
//   - [Value] and [Map]: JSON-shaped data, and a msgpack codec written out by hand ([Encode],
//     [Decode], the Append functions) that gives byte for byte what the host's Python
//     msgpack.packb(obj, use_bin_type=True) gives;
//   - [Request]: one hook call's request, checked and read lazily: the Pod and the ModelServing
//     stay undecoded [Raw] views of the request bytes; a ServingGroup's Pods are decoded into
//     [GroupPod] values;
//   - [Object] and [ConfigMap]: what OnServingGroupChange returns, checked by [ValidateObjects];
//   - [Raw]: a msgpack view to navigate (Get, Items, Entries, Str, ...) without decoding;
//   - [PodPatch] and [Op]: JSON Patch operations with the semantics of the host's Python
//     PodPatch and of the Rust SDK's, so the same calls give the same bytes in every runtime;
//   - [Fields]: strict config reading with the host's conventions;
//   - the Kubernetes name rules ([IsDNS1123Subdomain], [IsQualifiedName], [IsEnvVarName]) and
//     logging through the host ([Info], [Warn], ...).
//
// The package builds with the standard Go toolchain and with TinyGo (v0.37.0, -target=wasip1
// -buildmode=c-shared -no-debug -scheduler=none; plugins-src/README.md, section TinyGo), and
// avoids what TinyGo lacks or makes costly: it uses no reflection, no encoding/json and no fmt
// (TinyGo's reflect is partial, and they make a module several times larger), and starts no
// goroutine and uses no channel (-scheduler=none has no scheduler: a go statement fails the
// build). Under TinyGo a panic is not recovered on WebAssembly: it prints "panic: ..." to
// standard output and traps, without the error-level log line of a standard Go build. A plugin
// should keep to the same subset. Tests run natively: [Plugin.Call] runs exactly what an export
// runs, on request bytes.
package plugin
