package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/agentconfine"
	"github.com/acpd/acpd/session/agentguard"
	"github.com/acpd/acpd/session/store"
	sbx "github.com/acpd/acpd/session/tools/sandbox"
)

var _ = addCommand(func(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "guard [flags] -- COMMAND [ARG...]",
		Short: "put acpd's loop protection, stats and telemetry in front of another ACP agent",
		Long:  guardHelp,
		Args:  cobra.ArbitraryArgs,
	}
	// The agent's own arguments follow its command: flags stop at the
	// first argument, so "acpd guard opencode acp --port 3" works too.
	cmd.Flags().SetInterspersed(false)
	addConfigFlags(cmd.Flags(), config.GroupLoop, config.GroupTelemetry, config.GroupGuard)
	cmd.RunE = a.action(cmdGuard)
	return cmd
})

const guardHelp = `Starts the ACP agent COMMAND (same environment and working directory) and
relays ACP between the editor, on stdin and stdout, and the agent, unchanged,
while acpd's loop protection watches every prompt turn's tool calls. Configure
the editor to run "acpd guard -- AGENT ARGS" where it ran "AGENT ARGS".

When a call crosses a limit, the guard refuses the turn's permission
requests, sends session/cancel to the agent and answers the editor's prompt
with acpd's loop error (code -32603, data.code LOOP_DETECTED, loopType,
capReason, toolCalls, maxKeyRepeat), after at most --guard-cancel-grace. The
next prompt goes to the agent as usual.

Limits (as for acpd's own turns):
  --max-tool-calls-per-turn N   hard cap; unset: adaptive (past 100 calls only
                                when one call repeated 6 times; always past
                                1000); 0 or less: no cap
  --loop-detection              also stop the 6th repeat of one call
  --stuck-window W              judge "stuck" on the last W calls only

The agent's permission requests are answered from acpd's permission rules
and PreToolUse hooks ([permissions], [hooks], the workspace's "always allow"
rules and trusted settings; see acpd permissions): a deny picks the agent's
reject option, an allow its allow-once option, the rest goes to the editor,
and the editor's "always allow" is kept as a rule. PostToolUse hooks run on
completed calls.

With --confine the agent and everything it starts run in acpd's sandbox,
as confined shell commands do ([tools] sandbox*; see docs/sandbox.md):
writes only to the working folder, the agent's own state folders and a
private temp folder; the user's secrets unreadable except the agent's own
credential file; no provider key but the agent's own in its environment;
with sandboxNetwork = "proxy" the network only through acpd's proxy, where
the agent's provider host (and a base URL it is given) is allowed and any
other host not in sandboxAllowedDomains is refused. An agent the kernel
cannot confine is not started.

Each guarded turn is recorded under session.dataDir/guard for "acpd stats",
with the agent's name; --telemetry exports the turns over OpenTelemetry.
The agent's stderr goes to stderr, or with --log-file into the log.

Exit status: the agent's (128+N when signal N ended it); 2 for a usage or
configuration error or an agent that cannot be started.
`

// cmdGuard is `acpd guard`.
func cmdGuard(ctx context.Context, a *app) int {
	if len(a.args) == 0 {
		return a.badUsage("give the agent's command after --: acpd guard [flags] -- COMMAND [ARG...]")
	}
	cfg := a.cfg
	logger, closeLog, ok := openLog(cfg.Log, a.stderr, "acpd guard")
	if !ok {
		return exitUsage
	}
	defer closeLog()
	st, err := store.Open(filepath.Join(cfg.Session.DataDir, store.GuardDir), store.Options{Logger: logger, IndexInBackground: true})
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd guard: configuration error: session.dataDir: %v\n", err)
		return exitUsage
	}
	// The guard knows nothing of the agent's model or provider.
	tcfg := cfg
	tcfg.Model.Provider = ""
	tel, stopTel, err := startTelemetry(ctx, tcfg, logger)
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd guard: configuration error: %v\n", err)
		return exitUsage
	}
	defer stopTel()

	var agentStderr io.Writer = a.stderr
	if cfg.Log.File != "" {
		agentStderr = &agentguard.LineLogger{Logger: logger}
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// An editor that goes away makes writes to stdout fail with EPIPE
	// instead of killing the guard before it has stopped the agent.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)

	cwd, _ := os.Getwd()
	var start func([3]*os.File) (agentguard.Process, error)
	if cfg.Guard.Confine {
		start = confinedStart(ctx, a, cfg, cwd, logger)
	}
	m := cfg.Model
	return agentguard.Run(ctx, agentguard.RunOptions{
		Options: agentguard.Options{
			Cap: loopdetect.Cap{Max: m.MaxToolCallsPerTurn, Explicit: m.MaxToolCallsPerTurnExplicit, StuckWindow: m.StuckWindow,
				Signal: loopdetect.StuckSignal(m.StuckSignal), Recovery: loopdetect.LoopRecovery(m.LoopRecovery)},
			SkipLoopDetection: m.SkipLoopDetection,
			FailureGuard:      loopdetect.FailureMode(cfg.Tools.RepeatedToolFailureGuard),
			CancelGrace:       cfg.Guard.CancelGrace,
			Store:             st,
			Telemetry:         tel,
			AgentName:         filepath.Base(a.args[0]),
			Cwd:               cwd,
			// The wrapped agent runs its own MCP servers: a workspace's
			// are no part of the guard's trust question.
			Policy: newPolicy(withoutMCPImport(cfg), logger),
			Logger: logger,
		},
		Command:       a.args,
		ShutdownGrace: cfg.Guard.ShutdownGrace,
		AgentStderr:   agentStderr,
		Stderr:        a.stderr,
		Signals:       sigs,
		Start:         start,
	}, a.stdin, a.stdout)
}

// confinedStart starts the agent in acpd's sandbox (--confine): the
// configured one ([tools] sandbox, sandboxNetwork, sandboxAllowedDomains,
// sandboxDenyRead, sandboxPassEnv, sandboxWritable) widened by what the
// agent needs (package agentconfine), with the guard's working folder as
// its workspace: the agent starts before any session names a folder, and
// its sandbox cannot grow afterwards.
func confinedStart(ctx context.Context, a *app, cfg config.Config, cwd string, logger *slog.Logger) func([3]*os.File) (agentguard.Process, error) {
	return func(stdio [3]*os.File) (agentguard.Process, error) {
		environ := os.Environ()
		needs := agentconfine.For(a.args, environ)
		if err := needs.MakeState(); err != nil {
			return nil, fmt.Errorf("the agent's state folder: %w", err)
		}
		s := needs.Apply(sandboxSettings(cfg))
		wcfg := cfg
		wcfg.Tools.SandboxAllowedDomains = s.AllowedDomains
		s.NewProxy = newProxy(wcfg)
		// --confine asks for the sandbox whatever tools.sandbox says for
		// commands: an agent that cannot be confined is not started.
		s.Mode = string(sbx.ModeRequired)
		agent, err := agentconfine.Start(ctx, agentconfine.Options{
			Policy: sbx.NewPolicy(s), Argv: a.args, Dir: cwd, Environ: environ,
			Refused: func(target, why string) {
				logger.Warn("the confined agent's connection was refused", "target", target, "reason", why)
			},
		}, stdio)
		if err != nil {
			return nil, err
		}
		if agent.Warning != "" {
			fmt.Fprintf(a.stderr, "acpd guard: %s\n", agent.Warning)
		}
		name := needs.Agent
		if name == "" {
			name = "unknown (a confined command's sandbox only)"
		}
		logger.Info("agent confined", "profile", name, "writable", s.Writable, "network", s.Network, "allowed", s.AllowedDomains, "passEnv", s.Env.Pass)
		return confinedProcess{agent}, nil
	}
}

// confinedProcess is a confined agent as the guard waits for it; its
// sandbox session ends with it.
type confinedProcess struct{ *agentconfine.Agent }

func (p confinedProcess) Wait() (int, string) {
	ws, err := p.Agent.Wait()
	defer p.Close()
	if err != nil {
		return 1, err.Error()
	}
	return agentguard.WaitStatusExit(ws)
}

// withoutMCPImport is cfg reading no other agent's MCP configuration.
func withoutMCPImport(cfg config.Config) config.Config {
	cfg.MCP.Import = nil
	return cfg
}
