//go:build wasm && tinygo

package plugin

// panicStack: TinyGo's runtime keeps no goroutine stacks to print.
func panicStack() string { return "" }
