// team-label-extism: an Extism-flavoured plugin in Go (abi/README.md section 10), built with the
// Extism Go PDK (github.com/extism/go-pdk) for the request and response bytes and the
// modelserving Go SDK for everything between them.
//
// It labels every Pod with its team, "example.com/team: <team>", and, when roles are listed,
// only the Pods of those roles.
//
// Config (camelCase, unknown fields refused, nil = absent):
//
//   - team (required): the label value (at most 63 characters: alphanumerics, '-', '_', '.',
//     beginning and ending with an alphanumeric);
//   - roles: role names whose Pods get the label; absent or empty = every role.
//
// An Extism module exports its hooks as on_pod_create / on_pod_ready / validate_config, of
// type () -> i32, and the ABI markers modelserving_abi_v1 and modelserving_abi_v2 (the SDK
// exports them; it also exports ms_alloc, which the Extism flavour does not use). The request
// is the Extism input, the response the Extism output; a hook that fails sets an Extism error
// (the host reports it as PluginError, with the text). It may not import modelserving.log, so it does not call the
// SDK's logging functions.
package main

import (
	"errors"
	"strings"

	"modelserving.dev/plugin"
)

// Name is the plugin's usual name in a ModelServing.
const Name = "team-label"

// LabelKey is the label the plugin sets.
const LabelKey = "example.com/team"

// TeamLabel is the plugin: the Extism exports in extism.go run it, its tests call
// TeamLabel.Call.
var TeamLabel = plugin.Plugin{OnPodCreate: onPodCreate, ValidateConfig: validateConfig}

// main is never called: the module is a WASI reactor (-buildmode=c-shared).
func main() {}

// Config is a validated config.
type Config struct {
	Team  string
	Roles []string // empty = every role
}

// ParseConfig validates a plugin config.
func ParseConfig(config plugin.Value) (*Config, error) {
	f, err := plugin.ConfigFields(config)
	if err != nil {
		return nil, err
	}
	team, err := f.Str("team")
	if err != nil {
		return nil, err
	}
	if err := f.Required("team", team != nil); err != nil {
		return nil, err
	}
	if *team == "" || !IsLabelValue(*team) {
		return nil, errors.New(f.LocOf("team") + ": '" + *team + "' is not a valid label value")
	}
	c := &Config{Team: *team}
	roles, _, err := f.Array("roles")
	if err != nil {
		return nil, err
	}
	for i, r := range roles {
		role, ok := r.(string)
		if !ok {
			return nil, errors.New(f.LocOfItem("roles", i) + ": must be a str, got " + plugin.TypeName(r))
		}
		c.Roles = append(c.Roles, role)
	}
	return c, f.Finish()
}

// IsLabelValue: at most 63 characters, empty or alphanumerics, '-', '_' and '.' beginning and
// ending with an alphanumeric (a qualified name without a prefix).
func IsLabelValue(v string) bool {
	return v == "" || !strings.Contains(v, "/") && plugin.IsQualifiedName(v)
}

func (c *Config) wants(role string) bool {
	if len(c.Roles) == 0 {
		return true
	}
	for _, r := range c.Roles {
		if r == role {
			return true
		}
	}
	return false
}

func onPodCreate(req *plugin.Request) ([]plugin.Op, error) {
	config, err := ParseConfig(req.Config)
	if err != nil {
		return nil, err
	}
	if !config.wants(req.RoleName) {
		return nil, nil
	}
	return plugin.NewPodPatch(req.Pod).MergeLabels(plugin.Map{{LabelKey, config.Team}}).Result()
}

func validateConfig(req *plugin.Request) error {
	_, err := ParseConfig(req.Config)
	return err
}
