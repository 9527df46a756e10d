package main

import (
	"context"
	"fmt"
	"os"
	"slices"

	"golang.org/x/term"

	"github.com/spf13/cobra"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/doctor"
	"github.com/acpd/acpd/session/mcp/imported"
)

var _ = addCommand(func(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor [flags]",
		Short: "check the configuration, API key, model endpoint, data folder, shell sandbox, telemetry collector and acpd serve settings",
		Long: `Checks what acpd would run with, one line per check: the configuration,
the model and its API key, the model endpoint (GET {baseUrl}/models), the data
folder, the shell sandbox, the telemetry collector when telemetry is on,
acpd serve's settings when an address to listen on is configured, and the MCP
servers a session in the current folder takes from Claude Code's and Gemini
CLI's configurations (mcp.import), each with the file it came from. Give it the
same flags and environment as the editor gives acpd. Exits 1 if any check
fails.`,
		Args: noArgs,
	}
	addConfigFlags(cmd.Flags(), slices.Concat(groupAgent, []config.FlagGroup{config.GroupServer})...)
	cmd.RunE = a.actionConfigErrOK(cmdDoctor)
	return cmd
})

// cmdDoctor prints one line per check of package doctor.
func cmdDoctor(ctx context.Context, a *app) int {
	env := &doctor.Env{Config: a.cfg, Sources: a.src, ConfigErr: a.cfgErr}
	if f, ok := a.stdout.(*os.File); ok && isTerminal(f) {
		// A person reads it: lines wrapped to the terminal (grep and
		// scripts get one line per check).
		env.Width = 80
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w >= 40 {
			env.Width = w
		}
	}
	if a.cfgErr == nil {
		env.Sandbox = newSandboxPolicy(a.cfg)
		env.MCP = func() imported.Found {
			// The servers a session in this folder would start, its trust
			// as acpd trust left it.
			dir, err := os.Getwd()
			if err != nil {
				return imported.Found{Problems: []string{err.Error()}}
			}
			pol := newPolicy(a.cfg, nil).Workspace(dir).Session("", "", []string{dir})
			return session.ImportedMCP(mcpImport(a.cfg), pol, dir)
		}
	}
	if !doctor.Run(ctx, env, doctor.Checks(), display.Writer(a.stdout)) {
		fmt.Fprintln(a.stderr, "acpd doctor: some checks failed")
		return exitError
	}
	return exitOK
}
