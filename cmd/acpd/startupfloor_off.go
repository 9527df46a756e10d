//go:build !startupfloor

package main

// startupFloor is the start-up benchmark's stand-in, built only with
// -tags startupfloor (startupfloor.go).
func startupFloor() bool { return false }
