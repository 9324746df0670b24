package plugin

import (
	"strings"
	"testing"
)

func TestLabels(t *testing.T) {
	for _, ok := range []string{"a", "0", "entry-address", "a-b-c9", strings.Repeat("a", 63)} {
		if !IsDNS1123Label(ok) {
			t.Error(ok)
		}
	}
	for _, bad := range []string{"", "A", "-a", "a-", "a.b", "a_b", "é", strings.Repeat("a", 64), "a\n"} {
		if IsDNS1123Label(bad) {
			t.Error(bad)
		}
	}
}

func TestSubdomains(t *testing.T) {
	for _, ok := range []string{"a", "gvisor", "kata-qemu", "a.b.c", "0", strings.Repeat("a", 253)} {
		if !IsDNS1123Subdomain(ok) {
			t.Error(ok)
		}
	}
	for _, bad := range []string{"", "A", "-a", "a-", "a..b", ".a", "a.", "a_b", "é", strings.Repeat("a", 254), "a/b"} {
		if IsDNS1123Subdomain(bad) {
			t.Error(bad)
		}
	}
}

func TestQualifiedNames(t *testing.T) {
	for _, ok := range []string{"a", "A", "a.b_c-D", "example.com/Key", "a/b", strings.Repeat("x", 63)} {
		if !IsQualifiedName(ok) {
			t.Error(ok)
		}
	}
	for _, bad := range []string{"", "/a", "a/", "Example.com/a", "a/b/c", "-a", "a_", strings.Repeat("x", 64), "a b", "é"} {
		if IsQualifiedName(bad) {
			t.Error(bad)
		}
	}
}

func TestEnvVarNames(t *testing.T) {
	for _, ok := range []string{"A", "_a", "-", ".x9", "a.b-c_D1"} {
		if !IsEnvVarName(ok) {
			t.Error(ok)
		}
	}
	for _, bad := range []string{"", "1A", "A B", "A=B", "é", "A\n"} {
		if IsEnvVarName(bad) {
			t.Error(bad)
		}
	}
}
