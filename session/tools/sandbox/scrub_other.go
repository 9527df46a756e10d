//go:build !linux

package sandbox

// ScrubEnviron does nothing off Linux, where nothing is confined.
func ScrubEnviron(EnvPolicy) {}
