//go:build startupfloor

package main

import (
	"bufio"
	"os"
)

// startupFloor, in a build with -tags startupfloor, makes acpd run without
// arguments behave as the start-up benchmark's floor program: read the
// initialize line, write a fixed answer, exit. Everything else of acpd is
// linked and every package init runs as in a release build (the binary
// keeps all of acpd's code: with an argument it is acpd), so beside the
// floor and acpd it splits acpd's start-up into what linking its packages
// costs (the runtime's start on a larger binary and the package inits)
// and what acpd itself does before it answers.
func startupFloor() bool {
	if len(os.Args) > 1 {
		return false
	}
	_, _ = bufio.NewReader(os.Stdin).ReadBytes('\n')
	_, _ = os.Stdout.WriteString("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":1}}\n")
	return true
}
