package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/policy"
)

// permissionsFlags are acpd permissions' own flags.
type permissionsFlags struct {
	cwd    string
	format outputFormat
}

var _ = addCommand(func(a *app) *cobra.Command {
	o := &permissionsFlags{}
	cmd := &cobra.Command{
		Use:   "permissions [--cwd DIR]",
		Short: "list the permission rules and hooks in force for a workspace, each with the file it came from",
		Long: `Lists the permission rules (allow, ask, deny) and hooks in force for the
workspace in the current folder (or --cwd), numbered, each with its kind and
the file it came from: acpd's configuration, the "always allow" answers acpd
keeps in session.dataDir/permissions, Claude Code's user settings when
permissions.claudeUserSettings is on, and the project's settings files. A
project's allow rules and hooks wait for trust (acpd trust DIR) and are marked
so. acpd permissions rm RULE removes an "always allow" answer.`,
		Args: noArgs,
	}
	cmd.Flags().StringVar(&o.cwd, "cwd", "", "the workspace `folder` (default: the current folder)")
	_ = cmd.MarkFlagDirname("cwd")
	outputFormatFlags(cmd.Flags(), &o.format, "table", "json")
	cmd.RunE = a.action(func(ctx context.Context, a *app) int { return cmdPermissions(ctx, a, o) })

	rm := &cobra.Command{
		Use:   "rm RULE|N [--cwd DIR]",
		Short: `remove an "always allow" rule, given as written or by its number in acpd permissions`,
		Long: `Removes a rule acpd keeps in session.dataDir/permissions (the "always allow"
answers of the workspace, or the user's), given as acpd permissions lists it
(Bash(npm test:*)) or by its number there. A rule of the configuration or of a
project's settings is edited in its file; the message names it.`,
		Args: exactArgs(1),
	}
	rm.Flags().StringVar(&o.cwd, "cwd", "", "the workspace `folder` (default: the current folder)")
	_ = rm.MarkFlagDirname("cwd")
	rm.RunE = a.action(func(ctx context.Context, a *app) int { return cmdPermissionsRm(ctx, a, o) })
	cmd.AddCommand(rm)
	return cmd
})

// workspaceArg is a command's workspace folder: dir, else the current
// folder.
func workspaceArg(dir string) (string, error) {
	if dir == "" {
		return os.Getwd()
	}
	return filepath.Abs(dir)
}

func cmdPermissions(_ context.Context, a *app, o *permissionsFlags) int {
	dir, err := workspaceArg(o.cwd)
	if err != nil {
		return a.badUsage("--cwd: " + err.Error())
	}
	rep := newPolicy(a.cfg, nil).Workspace(dir).Report()
	if o.format.v == "json" {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return exitOK
	}
	writePermissions(a, rep)
	return exitOK
}

func writePermissions(a *app, rep policy.Report) {
	out := a.stdout
	fmt.Fprintf(out, "Permission rules for %s\n", display.Line(rep.Workspace))
	switch {
	case rep.TrustNeeded:
		fmt.Fprintf(out, "The project's allow rules and hooks wait for trust: acpd trust %s\n", display.Line(rep.Workspace))
	case rep.Trusted:
		fmt.Fprintln(out, "The project's settings are trusted as they are.")
	}
	if len(rep.Rules) == 0 {
		fmt.Fprintln(out, "\nNo rules: the approval mode decides every call.")
	} else {
		fmt.Fprintln(out)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tKIND\tRULE\tSOURCE")
		for _, r := range rep.Rules {
			src := r.Source
			if r.Pending {
				src += " (waits for trust)"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.N, r.Kind, display.Line(r.Rule), display.Line(src))
		}
		_ = tw.Flush()
	}
	if len(rep.Hooks) > 0 {
		fmt.Fprintln(out, "\nHooks:")
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT\tMATCHER\tCOMMAND\tSOURCE")
		for _, h := range rep.Hooks {
			src := h.Source
			if h.Pending {
				src += " (waits for trust)"
			}
			m := h.Matcher
			if m == "" {
				m = "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", h.Event, display.Line(m), display.Line(h.Command), display.Line(src))
		}
		_ = tw.Flush()
	}
	var notes []string
	for _, r := range rep.Rules {
		if r.Warning != "" {
			notes = append(notes, fmt.Sprintf("rule %d (%s): %s", r.N, r.Rule, r.Warning))
		}
	}
	if len(rep.Ignored) > 0 {
		notes = append(notes, "never taken from a workspace: "+strings.Join(rep.Ignored, ", "))
	}
	notes = append(notes, rep.Problems...)
	if len(notes) > 0 {
		fmt.Fprintln(out, "\nNotes:")
		for _, n := range notes {
			fmt.Fprintln(out, "  "+display.Line(n))
		}
	}
}

func cmdPermissionsRm(_ context.Context, a *app, o *permissionsFlags) int {
	dir, err := workspaceArg(o.cwd)
	if err != nil {
		return a.badUsage("--cwd: " + err.Error())
	}
	r, err := newPolicy(a.cfg, nil).Workspace(dir).RemoveRule(a.args[0])
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd permissions rm: %s\n", display.Line(err.Error()))
		return exitError
	}
	fmt.Fprintf(a.stdout, "Removed the %s rule %s from %s.\n", r.Kind, display.Line(r.Rule), display.Line(r.Source))
	return exitOK
}

// exactArgs and maxArgs refuse other numbers of positional arguments, as
// usage errors.
func exactArgs(n int) cobra.PositionalArgs { return argCount(n, n) }

func maxArgs(n int) cobra.PositionalArgs { return argCount(0, n) }

func argCount(least, most int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) < least:
			return usageErrorf("missing argument: %d expected, got %d", least, len(args))
		case len(args) > most:
			return usageErrorf("unexpected argument %q", args[most])
		}
		return nil
	}
}
