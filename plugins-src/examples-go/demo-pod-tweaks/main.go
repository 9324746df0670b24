// demo-pod-tweaks, in Go: Kthena's demo plugin (runtime class, annotations and env on every
// Pod), the twin of the Python built-in host/modelserving/plugins/builtins/demo_pod_tweaks.py
// and of the Rust built-in plugins-src/builtins/demo-pod-tweaks. All three accept the same
// configs and give byte-identical patches (main_test.go replays abi/vectors).
//
// Config (camelCase, unknown fields refused, nil = absent):
//
//   - runtimeClassName: set spec.runtimeClassName when non-empty (a DNS-1123 subdomain);
//   - annotations: merged into the Pod's annotations, overwriting same keys (keys must be
//     qualified names);
//   - env: core/v1 EnvVars (name, value, valueFrom) upserted into every container and
//     initContainer by name (Kthena appends, which duplicates names; this replaces a
//     same-named entry in place).
package main

import (
	"errors"

	"modelserving.dev/plugin"
)

// Name is the plugin's name in the vectors.
const Name = "demo-pod-tweaks"

// Demo is the plugin: its exports are below, its tests call Demo.Call.
var Demo = plugin.Plugin{OnPodCreate: onPodCreate, ValidateConfig: validateConfig}

//go:wasmexport ms_on_pod_create
func msOnPodCreate(ptr, size uint32) uint64 { return Demo.Export(plugin.OnPodCreate, ptr, size) }

//go:wasmexport ms_validate_config
func msValidateConfig(ptr, size uint32) uint64 {
	return Demo.Export(plugin.ValidateConfig, ptr, size)
}

// main is never called: a plugin is a WASI reactor (-buildmode=c-shared).
func main() {}

// Config is a validated config.
type Config struct {
	RuntimeClassName string         // "" = leave the Pod's alone
	Annotations      plugin.Map     // string values
	Env              []plugin.Value // EnvVar maps as the Python model's to_api() gives them
}

// ParseConfig validates a plugin config (nil = empty config).
func ParseConfig(config plugin.Value) (*Config, error) {
	f, err := plugin.ConfigFields(config)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	name, err := f.Str("runtimeClassName")
	if err != nil {
		return nil, err
	}
	if name != nil && *name != "" {
		if !plugin.IsDNS1123Subdomain(*name) {
			return nil, errors.New(f.LocOf("runtimeClassName") + ": '" + *name + "' is not a valid RuntimeClass name (a DNS-1123 subdomain)")
		}
		c.RuntimeClassName = *name
	}
	if c.Annotations, _, err = f.StringMap("annotations"); err != nil {
		return nil, err
	}
	for _, a := range c.Annotations {
		if !plugin.IsQualifiedName(a.Key) {
			return nil, errors.New(f.LocOf("annotations") + ": '" + a.Key + "' is not a valid annotation key")
		}
	}
	env, _, err := f.Array("env")
	if err != nil {
		return nil, err
	}
	for i, item := range env {
		v, err := envVar(item, f.LocOfItem("env", i))
		if err != nil {
			return nil, err
		}
		c.Env = append(c.Env, v)
	}
	return c, f.Finish()
}

// envVar checks one core/v1 EnvVar and re-emits it in to_api() form: name, then value and
// valueFrom when set.
func envVar(item plugin.Value, loc string) (plugin.Value, error) {
	f, err := plugin.NewFields(item, loc)
	if err != nil {
		return nil, err
	}
	name, err := f.Str("name")
	if err != nil {
		return nil, err
	}
	if err := f.Required("name", name != nil); err != nil {
		return nil, err
	}
	if *name == "" {
		return nil, errors.New(f.LocOf("name") + ": must not be empty")
	}
	if !plugin.IsEnvVarName(*name) {
		return nil, errors.New(f.LocOf("name") + ": '" + *name + "' is not a valid environment variable name")
	}
	value, err := f.Str("value")
	if err != nil {
		return nil, err
	}
	valueFrom, hasValueFrom, err := f.Map("valueFrom")
	if err != nil {
		return nil, err
	}
	if err := f.Finish(); err != nil {
		return nil, err
	}
	out := plugin.Map{{"name", *name}}
	if value != nil {
		out = append(out, plugin.Entry{"value", *value})
	}
	if hasValueFrom {
		out = append(out, plugin.Entry{"valueFrom", valueFrom})
	}
	return out, nil
}

// PatchPod is the patch for one Pod under config (reads only the Pod's annotations and env
// names).
func PatchPod(config *Config, pod plugin.Raw) *plugin.PodPatch {
	patch := plugin.NewPodPatch(pod)
	if config.RuntimeClassName != "" {
		patch.SetRuntimeClassName(config.RuntimeClassName)
	}
	patch.MergeAnnotations(config.Annotations)
	patch.UpsertEnv(config.Env)
	return patch
}

func onPodCreate(req *plugin.Request) ([]plugin.Op, error) {
	config, err := ParseConfig(req.Config)
	if err != nil {
		return nil, err
	}
	return PatchPod(config, req.Pod).Result()
}

func validateConfig(req *plugin.Request) error {
	_, err := ParseConfig(req.Config)
	return err
}
