package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/acpd/acpd/config"

	sbx "github.com/acpd/acpd/session/tools/sandbox"
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

// sandboxPolicy is the shell sandbox of this process, from [tools] sandbox,
// sandboxWritable and sandboxNetwork. When commands cannot be confined it
// says so once, in the log, at start-up; each session's first command says
// it again in its result.
func sandboxPolicy(cfg config.Config, logger *slog.Logger) *sbx.Policy {
	p := &sbx.Policy{
		Mode:        sbx.Mode(cfg.Tools.Sandbox),
		Writable:    cfg.Tools.SandboxWritable,
		DenyNetwork: !cfg.Tools.SandboxNetwork,
		CacheDir:    sbx.DefaultCacheDir(cfg.Session.DataDir),
	}
	if !p.Enabled() {
		return p
	}
	exe, err := os.Executable()
	if err != nil {
		p.Probe = func() sbx.Status {
			return sbx.Status{Backend: "landlock", Err: fmt.Errorf("cannot find acpd's own executable to run the helper: %w", err)}
		}
	}
	p.Helper = exe
	if st := p.Status(); !st.Usable() {
		if p.Mode == sbx.ModeRequired {
			logger.Error("shell sandbox unavailable: shell commands will be refused ([tools] sandbox = \"required\")", "reason", st.Err.Error())
		} else {
			logger.Warn("shell sandbox unavailable: shell commands run UNCONFINED ([tools] sandbox = \"auto\")", "reason", st.Err.Error())
		}
	}
	return p
}
