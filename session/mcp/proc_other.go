//go:build !linux

package mcp

import "os/exec"

// setProcAttr leaves the child in the daemon's process group outside Linux.
func setProcAttr(*exec.Cmd) {}

// killGroup is a no-op outside Linux; the SDK still stops the server itself.
func killGroup(*exec.Cmd) {}
