package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/acpd/acpd/session/display"
)

// trustFlags are acpd trust's own flags.
type trustFlags struct{ revoke bool }

var _ = addCommand(func(a *app) *cobra.Command {
	o := &trustFlags{}
	cmd := &cobra.Command{
		Use:   "trust [DIR] [--revoke]",
		Short: "trust a workspace's settings: its allow rules, hooks and MCP servers apply until the files change",
		Long: `Trusts the settings files of the workspace DIR (default: the current folder) as
they are now: .claude/settings.json, .claude/settings.local.json,
.gemini/settings.json, .acpd/settings.toml, .mcp.json, .codex/config.toml and
the hook scripts they name in the workspace. Their allow rules and hooks then
apply, in the editor, in acpd run and in acpd guard, and their MCP servers
start in acpd's sessions (mcp.import), until one of those files changes; acpd then asks again
(and acpd run, which never trusts by itself, leaves them off). Their deny and
ask rules apply whether trusted or not. The trust is kept in session.dataDir,
never in the workspace. --revoke forgets it.`,
		Args: maxArgs(1),
	}
	cmd.Flags().BoolVar(&o.revoke, "revoke", false, "forget the workspace's trust")
	cmd.RunE = a.action(func(ctx context.Context, a *app) int { return cmdTrust(ctx, a, o) })
	return cmd
})

func cmdTrust(_ context.Context, a *app, o *trustFlags) int {
	arg := ""
	if len(a.args) > 0 {
		arg = a.args[0]
	}
	dir, err := workspaceArg(arg)
	if err != nil {
		return a.badUsage(err.Error())
	}
	e := newPolicy(a.cfg, nil)
	if o.revoke {
		found, err := e.Revoke(dir)
		if err != nil {
			fmt.Fprintf(a.stderr, "acpd trust: %v\n", err)
			return exitError
		}
		if !found {
			fmt.Fprintf(a.stdout, "%s was not trusted.\n", display.Line(dir))
			return exitOK
		}
		fmt.Fprintf(a.stdout, "%s is no longer trusted: its allow rules and hooks are off.\n", display.Line(dir))
		return exitOK
	}
	p, err := e.Trust(dir)
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd trust: %v\n", err)
		return exitError
	}
	if !p.Widens() {
		fmt.Fprintf(a.stdout, "Trusted %s; its settings enable nothing now (no allow rules, no hooks).\n", display.Line(p.Root))
		return exitOK
	}
	fmt.Fprintf(a.stdout, "Trusted %s until its settings change. Enabled:\n", display.Line(p.Root))
	for _, x := range p.Enables() {
		fmt.Fprintln(a.stdout, "  "+display.Line(x))
	}
	return exitOK
}
