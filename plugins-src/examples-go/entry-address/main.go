// entry-address: the Go port of the built-in entry-address-file
// (host/modelserving/plugins/builtins/entry_address_file.py), and the example of the ServingGroup
// hook (ABI v3, abi/README.md section 15) with the Go SDK. For the same request it answers
// with the same bytes as the native built-in (tests/wasm/test_go_entry_address.py).
//
// Some inference engines read the entry (leader) address from a file rather than from the
// ENTRY_ADDRESS environment variable. The address is the entry Pod's DNS name, known when the
// Pod is made, and its IP, known once it runs; so the ServingGroup hook writes them to a
// ConfigMap and every Pod mounts its own role replica's keys:
//
//   - OnServingGroupChange returns the ConfigMap <servingGroup>-<configMapSuffix> with two keys
//     per role replica that has a Pod in the request: <roleId>, the address as one line without
//     a newline (the entry Pod's IP once it has one, else its DNS name), and <roleId>.json,
//     {"dns":"<name>","ip":"<ip or empty>"} (compact, keys in this order, as Python's
//     json.dumps writes it). The DNS name is <servingGroup>-<roleId>-0.<namespace>, the value of
//     ENTRY_ADDRESS, known from any Pod of the replica.
//   - OnPodCreate mounts that ConfigMap (an optional volume named configMapSuffix: the Pod starts
//     before the ConfigMap exists) at mountPath, with the Pod's <roleId> key as the file
//     "address" and <roleId>.json as "address.json".
//
// An IP is taken only when it is 2 to 45 of 0-9 a-f A-F . : ; another value counts as none.
//
// Config (camelCase, unknown fields refused, nil = absent):
//
//   - mountPath: the folder of the files, an absolute path without ':'; default
//     /etc/modelserving/entry;
//   - configMapSuffix: the ConfigMap is <servingGroup>-<suffix> and the volume <suffix>, at most
//     40 lower-case letters, digits and '-'; default entry-address;
//   - container: the container to mount it in, by name; default the first one.
package main

import (
	"errors"
	"strings"

	"modelserving.dev/plugin"
	_ "modelserving.dev/plugin/abiv3" // exports the marker modelserving_abi_v3: the host may call OnServingGroupChange
)

// Name is the plugin's usual name in a ModelServing.
const Name = "entry-address"

// The files every Pod gets, and the defaults of the config.
const (
	AddressFile            = "address"
	JSONFile               = "address.json"
	DefaultMountPath       = "/etc/modelserving/entry"
	DefaultConfigMapSuffix = "entry-address"
)

// EntryAddress is the plugin: its exports are below, its tests call EntryAddress.Call.
var EntryAddress = plugin.Plugin{
	OnPodCreate:          onPodCreate,
	OnServingGroupChange: onServingGroupChange,
	ValidateConfig:       validateConfig,
}

//go:wasmexport ms_on_pod_create
func msOnPodCreate(ptr, size uint32) uint64 {
	return EntryAddress.Export(plugin.OnPodCreate, ptr, size)
}

//go:wasmexport ms_on_serving_group_change
func msOnServingGroupChange(ptr, size uint32) uint64 {
	return EntryAddress.Export(plugin.OnServingGroupChange, ptr, size)
}

//go:wasmexport ms_validate_config
func msValidateConfig(ptr, size uint32) uint64 {
	return EntryAddress.Export(plugin.ValidateConfig, ptr, size)
}

// main is never called: a plugin is a WASI reactor (-buildmode=c-shared).
func main() {}

// Config is a validated config.
type Config struct {
	MountPath       string
	ConfigMapSuffix string
	Container       *string // nil: the first container
}

// ParseConfig validates a plugin config with the rules of the native built-in's config model.
func ParseConfig(config plugin.Value) (*Config, error) {
	f, err := plugin.ConfigFields(config)
	if err != nil {
		return nil, err
	}
	c := &Config{MountPath: DefaultMountPath, ConfigMapSuffix: DefaultConfigMapSuffix}
	mountPath, err := f.Str("mountPath")
	if err != nil {
		return nil, err
	}
	if mountPath != nil {
		if !strings.HasPrefix(*mountPath, "/") || strings.ContainsAny(*mountPath, "\x00:") {
			return nil, errors.New(f.LocOf("mountPath") + ": '" + *mountPath + "' is not an absolute path without ':'")
		}
		c.MountPath = *mountPath
	}
	suffix, err := f.Str("configMapSuffix")
	if err != nil {
		return nil, err
	}
	if suffix != nil {
		if len(*suffix) > 40 || !plugin.IsDNS1123Label(*suffix) {
			return nil, errors.New(f.LocOf("configMapSuffix") + ": '" + *suffix + "' is not a name suffix (at most 40 lower-case letters, digits and '-')")
		}
		c.ConfigMapSuffix = *suffix
	}
	if c.Container, err = f.Str("container"); err != nil {
		return nil, err
	}
	return c, f.Finish()
}

// ConfigMapName is the name of the ConfigMap of a ServingGroup.
func (c *Config) ConfigMapName(servingGroup string) string {
	return servingGroup + "-" + c.ConfigMapSuffix
}

func validateConfig(req *plugin.Request) error {
	_, err := ParseConfig(req.Config)
	return err
}

func onServingGroupChange(req *plugin.Request) ([]plugin.Object, error) {
	config, err := ParseConfig(req.Config)
	if err != nil {
		return nil, err
	}
	name := config.ConfigMapName(req.ServingGroup)
	return []plugin.Object{plugin.ConfigMap(name, EntryAddresses(req))}, nil
}

// EntryAddresses is the ConfigMap's data: two keys per role replica with a Pod in the request,
// in the order the replicas first appear.
func EntryAddresses(req *plugin.Request) plugin.Map {
	var replicas []string
	ips := map[string]string{}
	for _, pod := range req.Pods {
		if _, seen := ips[pod.RoleID]; !seen {
			replicas = append(replicas, pod.RoleID)
			ips[pod.RoleID] = ""
		}
		if pod.IsEntry && IsIP(pod.PodIP) {
			ips[pod.RoleID] = pod.PodIP
		}
	}
	namespace := req.Namespace()
	data := plugin.Map{}
	for _, roleID := range replicas {
		dns := req.ServingGroup + "-" + roleID + "-0." + namespace
		ip := ips[roleID]
		address := ip
		if address == "" {
			address = dns
		}
		data.Set(roleID, address) // Set: a Python dict's semantics, should two keys meet
		data.Set(roleID+".json", `{"dns":`+JSONString(dns)+`,"ip":`+JSONString(ip)+`}`)
	}
	return data
}

// IsIP reports whether text is taken as an IP: 2 to 45 of 0-9 a-f A-F . : (IPv4 or IPv6, as
// Kubernetes writes them; not checked further).
func IsIP(text string) bool {
	if len(text) < 2 || len(text) > 45 {
		return false
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// JSONString is s as a JSON string exactly as Python's json.dumps writes it (ensure_ascii): '"'
// and '\\' escaped, \n \r \t \b \f by name, every other character outside ' '..'~' as \uXXXX
// (lower-case hex; above U+FFFF a surrogate pair).
func JSONString(s string) string {
	const hexDigits = "0123456789abcdef"
	out := make([]byte, 0, len(s)+2)
	out = append(out, '"')
	u := func(r rune) {
		out = append(out, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
	}
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			out = append(out, '\\', byte(r))
		case ' ' <= r && r <= '~':
			out = append(out, byte(r))
		case r == '\n':
			out = append(out, '\\', 'n')
		case r == '\r':
			out = append(out, '\\', 'r')
		case r == '\t':
			out = append(out, '\\', 't')
		case r == '\b':
			out = append(out, '\\', 'b')
		case r == '\f':
			out = append(out, '\\', 'f')
		case r > 0xffff:
			r -= 0x10000
			u(0xd800 + r>>10)
			u(0xdc00 + r&0x3ff)
		default:
			u(r)
		}
	}
	return string(append(out, '"'))
}

func onPodCreate(req *plugin.Request) ([]plugin.Op, error) {
	config, err := ParseConfig(req.Config)
	if err != nil {
		return nil, err
	}
	edit := PodEdit{Pod: req.Pod}
	container, err := edit.Container(config.Container)
	if err != nil {
		return nil, err
	}
	items := []plugin.Value{
		plugin.Map{{"key", req.RoleID}, {"path", AddressFile}},
		plugin.Map{{"key", req.RoleID + ".json"}, {"path", JSONFile}},
	}
	source := plugin.Map{{"name", config.ConfigMapName(req.ServingGroup)}, {"optional", true}, {"items", items}}
	volume := plugin.Map{{"name", config.ConfigMapSuffix}, {"configMap", source}}
	if err := edit.AddVolume(container, volume, config.ConfigMapSuffix, config.MountPath); err != nil {
		return nil, err
	}
	return edit.Ops, nil
}
