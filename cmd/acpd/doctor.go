package main

import (
	"context"
	"fmt"

	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/doctor"
)

func doctorCommand() command {
	return command{
		summary:     "check the configuration, API key, model endpoint, data folder, shell sandbox, telemetry collector and acpd serve settings; exit 1 if any check fails",
		run:         cmdDoctor,
		configErrOK: true,
	}
}

// cmdDoctor prints one line per check of package doctor.
func cmdDoctor(ctx context.Context, a *app) int {
	env := &doctor.Env{Config: a.cfg, Sources: a.src, ConfigErr: a.cfgErr}
	if a.cfgErr == nil {
		env.Sandbox = newSandboxPolicy(a.cfg)
	}
	if !doctor.Run(ctx, env, doctor.Checks(), display.Writer(a.stdout)) {
		fmt.Fprintln(a.stderr, "acpd doctor: some checks failed")
		return exitError
	}
	return exitOK
}
