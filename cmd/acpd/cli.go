package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acpd/acpd/config"
)

// The command line is spf13/cobra's, with pflag's GNU-style flags. Every
// subcommand is one file that adds itself with addCommand; the flags that
// set configuration keys come from config.Flags (one row of
// config/fields.go each), grouped by what they configure, and a command
// offers the groups it reads.

// subcommands are the constructors of acpd's subcommands, in no order (help
// sorts them).
var subcommands []func(*app) *cobra.Command

// addCommand registers a subcommand's constructor; each subcommand's file
// calls it from a package variable: var _ = addCommand(newRunCommand).
func addCommand(newCmd func(*app) *cobra.Command) bool {
	subcommands = append(subcommands, newCmd)
	return true
}

// app is what a command gets: the process's streams and, once loaded, the
// configuration.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	deps           deps

	cmd    *cobra.Command // the running command
	cfg    config.Config
	src    config.Sources
	cfgErr error          // the configuration error, for commands that report it themselves
	flags  *pflag.FlagSet // the running command's flags, global ones included
	args   []string       // the running command's positional arguments
	// noModel is set before the configuration is loaded by a command
	// that will ask no model (acpd run --rewind).
	noModel bool
}

// exitStatus is a command's exit status carried through cobra as an error;
// the command has said what there was to say.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// usageError is a mistake on the command line: one line on stderr naming
// what is wrong, a pointer to the command's help, and exit status 2.
type usageError struct {
	msg string
	see string // the command whose help to point to, when not the one that failed
}

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// Annotations on pflag flags.
const (
	annotGroup  = "acpd_group"  // the help heading the flag is listed under
	annotConfig = "acpd_config" // the configuration key a flag sets
	annotValues = "acpd_values" // the values a flag takes, for completion
)

// configValue is a configuration flag's value: the raw text, which
// config.Load parses with the same rules and messages as the environment.
type configValue struct {
	s, typ string
	bool   bool
}

func (v *configValue) String() string     { return v.s }
func (v *configValue) Set(s string) error { v.s = s; return nil }
func (v *configValue) IsBoolFlag() bool   { return v.bool }
func (v *configValue) Type() string {
	if v.bool {
		return "bool"
	}
	return v.typ
}

// addConfigFlags registers on fs the configuration flags of groups.
func addConfigFlags(fs *pflag.FlagSet, groups ...config.FlagGroup) {
	for _, f := range config.Flags() {
		if !containsGroup(groups, f.Group) {
			continue
		}
		fl := fs.VarPF(&configValue{typ: f.Type, bool: f.Bool}, f.Name, "", f.Usage)
		if f.Default != "0" && f.Default != "false" {
			// A zero is explained by the usage ("0: no budget").
			fl.DefValue = f.Default
		}
		if f.Bool {
			fl.NoOptDefVal = "true"
		}
		fl.Hidden = f.Hidden
		_ = fs.SetAnnotation(f.Name, annotConfig, []string{f.Key})
		_ = fs.SetAnnotation(f.Name, annotGroup, []string{f.Group.Title()})
		if len(f.Values) > 0 {
			_ = fs.SetAnnotation(f.Name, annotValues, f.Values)
		}
	}
}

func containsGroup(groups []config.FlagGroup, g config.FlagGroup) bool {
	for _, x := range groups {
		if x == g {
			return true
		}
	}
	return false
}

// flagCompletion offers the values of a flag that takes one of a few (an
// enum key's, an output format) when the shell completes it, and no file
// names for the other flags that take no path (a path flag falls back to
// the shell's file completion).
func flagCompletion(cmd *cobra.Command) {
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags()} {
		fs.VisitAll(func(f *pflag.Flag) {
			values, ok := f.Annotations[annotValues]
			if !ok && (f.NoOptDefVal != "" || f.Value.Type() == "path") {
				return
			}
			_ = cmd.RegisterFlagCompletionFunc(f.Name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return values, cobra.ShellCompDirectiveNoFileComp
			})
		})
	}
}

// groupAll are every configuration flag group, for acpd config.
var groupAll = []config.FlagGroup{config.GroupModel, config.GroupTools, config.GroupLoop,
	config.GroupTelemetry, config.GroupGuard, config.GroupServer}

// groupAgent are the groups of the commands that run the agent.
var groupAgent = []config.FlagGroup{config.GroupModel, config.GroupTools, config.GroupLoop, config.GroupTelemetry}

// newRoot builds the command tree: acpd itself serves ACP on stdio. Without
// subcommands it is acpd alone, for an editor starting it without
// arguments: the subcommands' flags (some 250) would be registered for
// nothing on the way to the editor's first answer.
func newRoot(a *app, withSubcommands bool) *cobra.Command {
	root := &cobra.Command{
		Use: "acpd",
		Long: `acpd is an Agent Client Protocol (ACP) agent. Without a command it serves ACP on
stdin/stdout, which is how an editor starts it; the commands below run a turn
without an editor, serve editors over the network, guard another agent, and
look at what acpd recorded.`,
		Args: rootArgs,
		// Suggest a command one or two edits from a misspelt one.
		SuggestionsMinimumDistance: 2,
		SilenceErrors:              true,
		SilenceUsage:               true,
		// Completions are the completion command's: acpd completion bash.
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.Annotations = map[string]string{"usage": "acpd [flags]\n  acpd COMMAND [flags]"}
	pf := root.PersistentFlags()
	pf.String("config", "", "a config `file` read after the user file (overrides $ACPD_CONFIG)")
	addConfigFlags(pf, config.GroupGlobal)
	pf.BoolP("help", "h", false, "show this help")
	pf.VisitAll(func(f *pflag.Flag) { _ = pf.SetAnnotation(f.Name, annotGroup, []string{config.GroupGlobal.Title()}) })
	root.Flags().Bool("version", false, "print the version and exit")
	addConfigFlags(root.Flags(), groupAgent...)
	root.RunE = a.action(cmdServe)
	if !withSubcommands {
		return root
	}
	for _, newCmd := range subcommands {
		root.AddCommand(newCmd(a))
	}
	root.SetHelpCommand(newHelpCommand(root))
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { writeHelp(c.OutOrStdout(), c) })
	root.SetUsageFunc(func(c *cobra.Command) error { writeHelp(c.OutOrStderr(), c); return nil })
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })
	return root
}

func forEachCommand(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		forEachCommand(sub, fn)
	}
}

// rootArgs refuses any argument of acpd itself: a word that is not a
// command is a misspelt one.
func rootArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		return usageErrorf("unknown command %q (did you mean %q?)", args[0], s[0])
	}
	return usageErrorf("unknown command %q", args[0])
}

// noArgs is cobra.NoArgs with acpd's wording.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q", args[0])
	}
	return nil
}

// newHelpCommand is `acpd help [COMMAND]`: the command's help on stdout.
func newHelpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]",
		Short: "show the help of acpd or of a command (the same as --help)",
		ValidArgsFunction: func(c *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			target, _, err := root.Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, sub := range target.Commands() {
				if sub.IsAvailableCommand() {
					names = append(names, sub.Name()+"\t"+sub.Short)
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return &usageError{msg: fmt.Sprintf("unknown command %q", strings.Join(args, " ")), see: "acpd"}
			}
			writeHelp(c.OutOrStdout(), target)
			return nil
		},
	}
}

// action makes run a command's RunE: the configuration is loaded from the
// files, the environment and the flags given, and a mistake in it is
// reported before run is called.
func (a *app) action(run func(ctx context.Context, a *app) int) func(*cobra.Command, []string) error {
	return a.actionWith(run, false)
}

// actionConfigErrOK is action for a command that reports a configuration
// error itself (acpd doctor): run gets it in a.cfgErr.
func (a *app) actionConfigErrOK(run func(ctx context.Context, a *app) int) func(*cobra.Command, []string) error {
	return a.actionWith(run, true)
}

func (a *app) actionWith(run func(ctx context.Context, a *app) int, configErrOK bool) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.cmd, a.flags, a.args = cmd, cmd.Flags(), args
		if v, _ := cmd.Flags().GetBool("version"); v && cmd.Flags().Lookup("version") != nil {
			fmt.Fprintln(a.stdout, versionLine())
			return nil
		}
		set := map[string]string{}
		cmd.Flags().Visit(func(f *pflag.Flag) {
			if _, ok := f.Annotations[annotConfig]; ok {
				set[f.Name] = f.Value.String()
			}
		})
		configPath, _ := cmd.Flags().GetString("config")
		a.cfg, a.src, a.cfgErr = config.Load(config.LoadOptions{ConfigPath: configPath, Flags: set, Getenv: a.deps.getenv, NoModel: a.noModel})
		if a.cfgErr != nil && !configErrOK {
			return a.configError(cmd, a.cfgErr)
		}
		if code := run(cmd.Context(), a); code != exitOK {
			return exitStatus(code)
		}
		return nil
	}
}

// configError reports a configuration that does not load. A mistake in a
// flag's value is a usage error of one line; one in a file or a variable
// keeps the file:line:col form, one error a line.
func (a *app) configError(cmd *cobra.Command, err error) error {
	var ce *config.Error
	if !errors.As(err, &ce) {
		fmt.Fprintf(a.stderr, "%s: configuration error: %v\n", cmd.CommandPath(), err)
		return exitStatus(exitError)
	}
	msg := err.Error()
	if !strings.Contains(msg, "\n") && strings.HasPrefix(msg, "flag --") {
		return &usageError{msg: msg}
	}
	fmt.Fprintf(a.stderr, "%s: configuration error:\n%s\n", cmd.CommandPath(), indent(msg))
	return exitStatus(exitUsage)
}

// exitCode turns what the command tree returned into the exit status,
// printing a usage error (cobra's own ones too: an unknown flag, a missing
// value) as one line with a pointer to the command's help.
func exitCode(cmd *cobra.Command, err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var st exitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	path := "acpd"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	see := path
	if ue, ok := err.(*usageError); ok && ue.see != "" {
		see = ue.see
	}
	fmt.Fprintf(stderr, "%s: %s; see '%s --help'\n", path, strings.TrimSpace(err.Error()), see)
	return exitUsage
}

// badUsage prints a mistake on the command line of the running command
// as exitCode does, and returns the usage exit status.
func (a *app) badUsage(msg string) int {
	return exitCode(a.cmd, &usageError{msg: msg}, a.stderr)
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
