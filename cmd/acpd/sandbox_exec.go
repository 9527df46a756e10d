package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/acpd/acpd/config"

	sbx "github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/netproxy"
	// The hidden subcommand `acpd __sandbox-exec` is served by this
	// import's init, before acpd's own packages initialize, so a confined
	// shell command does not pay acpd's start-up; see the package doc.
	_ "github.com/acpd/acpd/session/tools/sandbox/helper"
)

// sandboxHelper serves the hidden subcommand if this process is the helper.
// The init of package helper normally did it already; this is the fallback
// should the initialization order ever change (slower, still correct).
func sandboxHelper() {
	if len(os.Args) > 1 && os.Args[1] == sbx.Subcommand {
		os.Exit(sbx.HelperMain(os.Args[2:]))
	}
}

// inheritNoFiles keeps what acpd's own parent left open from every program
// acpd starts (commands, MCP servers, git, a guarded agent). A failure is
// not fatal: the sandbox helper and spawn server do it again and refuse to
// run a command when they cannot.
func inheritNoFiles() { _ = sbx.InheritNoFiles() }

// newSandboxPolicy is the shell sandbox the configuration asks for ([tools]
// sandbox, sandboxWritable, sandboxNetwork), for the daemon and for `acpd
// doctor` alike: what doctor reports is what commands get.
func newSandboxPolicy(cfg config.Config) *sbx.Policy {
	s := sandboxSettings(cfg)
	// The configured key and token variables, which package helper's init
	// could not know, leave acpd's /proc/PID/environ too.
	sbx.ScrubEnviron(sbx.EnvPolicy{Drop: s.Env.Drop})
	s.NewProxy = newProxy(cfg)
	return sbx.NewPolicy(s)
}

// sandboxSettings are the configuration's sandbox settings, without the
// proxy's maker.
func sandboxSettings(cfg config.Config) sbx.Settings {
	return sbx.Settings{
		Mode:           cfg.Tools.Sandbox,
		Writable:       cfg.Tools.SandboxWritable,
		Network:        cfg.Tools.SandboxNetwork,
		AllowedDomains: cfg.Tools.SandboxAllowedDomains,
		DataDir:        cfg.Session.DataDir,
		Env:            sbx.EnvPolicy{Drop: cfg.CredentialEnv(), Pass: cfg.Tools.SandboxPassEnv},
		DenyRead:       cfg.Tools.DenyRead(),
	}
}

// sandboxPolicy is the daemon's shell sandbox. The kernel is probed here,
// before any command runs: when it cannot confine, the log says so once at
// start-up, and each session's first command says it again in its result.
func sandboxPolicy(cfg config.Config, logger *slog.Logger) *sbx.Policy {
	p := newSandboxPolicy(cfg)
	if !p.Enabled() {
		return p
	}
	if st := p.Status(); !st.Usable() {
		if p.Mode == sbx.ModeRequired {
			logger.Error("shell sandbox unavailable: shell commands will be refused ([tools] sandbox = \"required\")", "reason", st.Err.Error())
		} else {
			logger.Warn("shell sandbox unavailable: shell commands run UNCONFINED ([tools] sandbox = \"auto\")", "reason", st.Err.Error())
		}
	}
	if p.CacheNote != "" {
		logger.Warn("shell sandbox: "+p.CacheNote, "cache", sbx.DefaultCacheDir(cfg.Session.DataDir))
	}
	return p
}

// newProxy makes a session's proxy for proxy mode from
// tools.sandboxAllowedDomains (the configuration checked each already).
func newProxy(cfg config.Config) func(sbx.ProxyConfig) sbx.ProxyServer {
	var allowed []netproxy.Pattern
	for _, d := range cfg.Tools.SandboxAllowedDomains {
		if p, err := netproxy.ParsePattern(d); err == nil {
			allowed = append(allowed, p)
		}
	}
	return func(c sbx.ProxyConfig) sbx.ProxyServer {
		return netproxy.New(netproxy.Options{
			Allowed:   allowed,
			DenyPorts: c.DenyPorts,
			Ask: func(ctx context.Context, t netproxy.Target) (bool, error) {
				return c.Ask(ctx, t.String())
			},
			Refused: func(t netproxy.Target, why string) { c.Refused(t.String(), why) },
		})
	}
}
