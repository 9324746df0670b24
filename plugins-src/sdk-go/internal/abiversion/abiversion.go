// Package abiversion is what the packages of the module modelserving.dev/plugin share about
// ABI versions and nothing outside it may use: the [Token] that only they can make, which
// plugin.SpeakABIv3 takes so that only modelserving.dev/plugin/abiv3 calls it.
package abiversion

// Token is an argument only packages of this module can write (its field is unexported and
// its package internal).
type Token struct{ module bool }
