package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/acpd/acpd/config"
)

var _ = addCommand(func(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config [flags]",
		Short: "print the effective configuration with each value's source",
		Long: `Prints the effective configuration as TOML: every key with its value, followed
by where the value came from (default, a file and line, an environment
variable, a flag). Secrets are redacted. Every configuration flag is accepted,
so "acpd config --model m" shows what "acpd --model m" would run with.`,
		Args: noArgs,
	}
	addConfigFlags(cmd.Flags(), groupAll...)
	cmd.RunE = a.action(cmdConfig)
	return cmd
})

func cmdConfig(_ context.Context, a *app) int {
	fmt.Fprint(a.stdout, config.FormatTOML(a.cfg, a.src))
	return exitOK
}
