package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acpd/acpd/config"
)

// helpWidth is where help text is wrapped: flag descriptions are folded
// under their column, so a terminal of 80 columns shows them whole.
const helpWidth = 80

// writeHelp prints cmd's help: what it does, its usage, its subcommands,
// its own flags, the configuration flags it reads by group, and the global
// flags once, under their heading.
func writeHelp(w io.Writer, cmd *cobra.Command) {
	var b strings.Builder
	long := strings.TrimSpace(cmd.Long)
	if cmd.Short != "" {
		b.WriteString(wrapIndented(upperFirst(cmd.Short)+".", 0) + "\n")
	} else if long != "" {
		// acpd itself: what it is comes first.
		b.WriteString(long + "\n\n")
		long = ""
	}
	b.WriteString("Usage:\n")
	if u, ok := cmd.Annotations["usage"]; ok {
		b.WriteString("  " + u + "\n")
	} else {
		b.WriteString("  " + cmd.UseLine() + "\n")
		if cmd.HasAvailableSubCommands() {
			b.WriteString("  " + cmd.CommandPath() + " COMMAND [flags]\n")
		}
	}
	if long != "" {
		b.WriteString("\n" + long + "\n")
	}
	if ex := strings.TrimRight(cmd.Example, "\n"); ex != "" {
		b.WriteString("\nExamples:\n" + ex + "\n")
	}
	if cmd.HasAvailableSubCommands() {
		b.WriteString("\nCommands:\n")
		width := 0
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() || c.Name() == "help" {
				width = max(width, len(c.Name()))
			}
		}
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() || c.Name() == "help" {
				b.WriteString(wrapIndented(fmt.Sprintf("  %-*s  %s", width, c.Name(), c.Short), width+4))
			}
		}
	}

	// Flags by heading: the command's own first, the configuration groups
	// in their order, the global ones last.
	groups := map[string]*pflag.FlagSet{}
	var order []string
	add := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		title := "Flags"
		if g := f.Annotations[annotGroup]; len(g) > 0 {
			title = g[0]
		}
		fs, ok := groups[title]
		if !ok {
			fs = pflag.NewFlagSet(title, pflag.ContinueOnError)
			fs.SortFlags = false
			groups[title] = fs
			order = append(order, title)
		}
		if fs.Lookup(f.Name) == nil {
			fs.AddFlag(f)
		}
	}
	cmd.LocalFlags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	rank := func(title string) int {
		switch title {
		case "Flags":
			return 0
		case config.GroupGlobal.Title():
			return 100
		}
		for g := config.GroupModel; g <= config.GroupServer; g++ {
			if g.Title() == title {
				return int(g)
			}
		}
		return 50
	}
	slices.SortStableFunc(order, func(x, y string) int { return rank(x) - rank(y) })
	for _, title := range order {
		b.WriteString("\n" + title + ":\n")
		b.WriteString(groups[title].FlagUsagesWrapped(helpWidth))
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\nRun '%s help COMMAND' (or '%s COMMAND --help') for a command's own help.\n", cmd.CommandPath(), cmd.CommandPath())
	}
	_, _ = io.WriteString(w, b.String())
}

// wrapIndented wraps one line at helpWidth, continuation lines indented by
// indent spaces.
func wrapIndented(line string, indent int) string {
	var b strings.Builder
	for len(line) > helpWidth {
		cut := strings.LastIndexByte(line[:helpWidth], ' ')
		if cut <= indent || cut < 0 {
			break
		}
		b.WriteString(line[:cut] + "\n")
		line = strings.Repeat(" ", indent) + strings.TrimLeft(line[cut:], " ")
	}
	b.WriteString(line + "\n")
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
