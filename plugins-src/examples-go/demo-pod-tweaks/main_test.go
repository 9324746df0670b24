package main

// Replays the shared ABI test vectors (abi/vectors/*.json at the top of the repository, or the
// directory in MODELSERVING_ABI_VECTORS) against this plugin, natively: each vector's request
// goes through exactly the code the module's exports run (Demo.Call), and the response bytes
// must be the expected ones (or an {"error": ...} response where the host expects the failure
// class PluginError). Vectors of other plugins are skipped.

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"modelserving.dev/plugin"
)

const vectorsEnv = "MODELSERVING_ABI_VECTORS"

type vector struct {
	Name    string `json:"name"`
	Plugin  string `json:"plugin"`
	Hook    string `json:"hook"`
	Request string `json:"request"`
	Expect  struct {
		Response *string `json:"response"`
		Failure  string  `json:"failure"`
	} `json:"expect"`
}

func vectorFiles(t *testing.T) []string {
	dir, explicit := os.LookupEnv(vectorsEnv)
	if !explicit {
		dir = filepath.Join("..", "..", "..", "abi", "vectors")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		if explicit {
			t.Fatalf("%s=%s holds no *.json vectors", vectorsEnv, dir)
		}
		t.Skipf("no vectors in %s", dir)
	}
	sort.Strings(files)
	return files
}

func TestABIVectors(t *testing.T) {
	checked := 0
	for _, path := range vectorFiles(t) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var v vector
		if err := json.Unmarshal(text, &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if v.Plugin != Name {
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			hook, ok := plugin.HookNamed(v.Hook)
			if !ok {
				t.Fatalf("unknown hook %q", v.Hook)
			}
			request, err := base64.StdEncoding.DecodeString(v.Request)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			got, ok := Demo.Call(hook, request)
			if !ok {
				t.Fatalf("the plugin does not implement %s", hook)
			}
			if v.Expect.Response != nil {
				want, err := base64.StdEncoding.DecodeString(*v.Expect.Response)
				if err != nil {
					t.Fatalf("expect.response: %v", err)
				}
				if string(got) != string(want) {
					t.Fatalf("response differs\n want %s %s\n got  %s %s", hex.EncodeToString(want), describe(want), hex.EncodeToString(got), describe(got))
				}
				return
			}
			if v.Expect.Failure != "PluginError" {
				t.Skipf("failure class %s is the host's to produce", v.Expect.Failure)
			}
			r, err := plugin.DecodeResponse(got)
			if err != nil || r.Error == "" {
				t.Fatalf("expected an error response (PluginError), got %s (%v)", describe(got), err)
			}
		})
		checked++
	}
	if checked == 0 {
		t.Fatalf("no vector is for %s", Name)
	}
	t.Logf("%d vectors replayed", checked)
}

func describe(response []byte) string {
	v, err := plugin.Decode(response)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return plugin.Format(v)
}
