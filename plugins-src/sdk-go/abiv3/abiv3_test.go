package abiv3_test

import (
	"testing"

	"modelserving.dev/plugin"
	_ "modelserving.dev/plugin/abiv3"
)

func TestImportingThePackageMakesTheModuleSpeakV3(t *testing.T) {
	if plugin.ModuleABIVersion() != 3 {
		t.Fatal(plugin.ModuleABIVersion())
	}
	b := (&plugin.Request{Hook: plugin.ValidateConfig, PluginName: "p"}).Encode()
	r, err := plugin.DecodeRequest(b)
	if err != nil || r.ABIVersion != 3 {
		t.Error(err, r)
	}
}
