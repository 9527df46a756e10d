// Package helper makes a binary serve acpd's hidden helper subcommands from
// package initialization: the sandbox helper (sandbox.Subcommand) and the
// command watcher (lifeline.Subcommand), which a binary that imports this
// package may then start as itself (lifeline.Enable). Import it for its
// side effect, in acpd's main package and in tests that use their own test
// binary as the helper:
//
//	import _ "github.com/acpd/acpd/session/tools/sandbox/helper"
//
// Why init and not main: the helper runs once per shell command, and Go runs
// every package's init before main. acpd's heaviest one (the JSON Schema
// library compiling its meta-schemas, about 6 ms) would then be paid per
// command. Go initializes packages in import-path order as soon as their
// imports are ready, and this package needs only the standard library,
// golang.org/x/sys, psx and go-landlock, so it runs before that library and
// the helper execs the command without ever reaching the rest of acpd's
// initialization. cmd/acpd's tests check that the helper skips it.
package helper

import (
	"os"

	"github.com/acpd/acpd/session/tools/lifeline"
	"github.com/acpd/acpd/session/tools/sandbox"
)

func init() {
	if dir := os.Getenv(sandbox.ProbeShmEnv); dir != "" {
		os.Exit(sandbox.ProbeShmMain(dir))
	}
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case sandbox.Subcommand:
			os.Exit(sandbox.HelperMain(os.Args[2:]))
		case lifeline.Subcommand:
			// The watcher holds acpd's environment: scrubbed like acpd's.
			sandbox.ScrubEnviron(sandbox.EnvPolicy{})
			os.Exit(lifeline.Main(os.Args[2:]))
		}
	}
	// What a command could read in /proc/PID/environ of acpd: the built-in
	// names and patterns now, the configured ones once the configuration
	// is loaded (cmd/acpd).
	sandbox.ScrubEnviron(sandbox.EnvPolicy{})
	lifeline.Enable()
}
