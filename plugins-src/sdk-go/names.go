package plugin

// Kubernetes name rules as predicates, the same as the host's modelserving.api.names, so a
// plugin refuses in its config what the API server would refuse later.

import "strings"

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func isAlnum(c byte) bool { return isLowerAlnum(c) || 'A' <= c && c <= 'Z' }

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isLabelShape: one DNS-1123 label pattern [a-z0-9]([-a-z0-9]*[a-z0-9])? (no length limit).
func isLabelShape(s string) bool {
	if s == "" || !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isLowerAlnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// IsDNS1123Label: lower-case letters, digits and '-', starting and ending with a letter or
// digit, at most 63 characters (e.g. a namespace, or a suffix of an object's name).
func IsDNS1123Label(value string) bool { return len(value) <= 63 && isLabelShape(value) }

// IsDNS1123Subdomain: lower-case DNS labels joined by dots, at most 253 characters (e.g. a
// RuntimeClass name).
func IsDNS1123Subdomain(value string) bool {
	if value == "" || len(value) > 253 {
		return false
	}
	for _, label := range strings.Split(value, ".") {
		if !isLabelShape(label) {
			return false
		}
	}
	return true
}

// IsQualifiedName: a label or annotation key: an optional DNS-subdomain prefix and "/", then a
// name of at most 63 characters matching [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?.
func IsQualifiedName(value string) bool {
	name := value
	if slash := strings.LastIndexByte(value, '/'); slash >= 0 {
		if !IsDNS1123Subdomain(value[:slash]) {
			return false
		}
		name = value[slash+1:]
	}
	if name == "" || len(name) > 63 || !isAlnum(name[0]) || !isAlnum(name[len(name)-1]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// IsEnvVarName: an environment variable name, ^[-._a-zA-Z][-._a-zA-Z0-9]*$ (what the API
// server accepts).
func IsEnvVarName(value string) bool {
	if value == "" || '0' <= value[0] && value[0] <= '9' {
		return false
	}
	for i := 0; i < len(value); i++ {
		c := value[i]
		if !isAlpha(c) && !('0' <= c && c <= '9') && c != '-' && c != '.' && c != '_' {
			return false
		}
	}
	return true
}
