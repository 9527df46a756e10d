package doctor

import (
	"context"
	"strings"

	"github.com/acpd/acpd/session/tools/sandbox"
)

// Warn is an outcome that does not fail the run but needs the user's eye:
// acpd works, with less protection than configured.
const Warn Status = "WARN"

// SandboxPolicy is the shell sandbox the configuration asks for; acpd's
// daemon builds the same one (cmd/acpd sandboxPolicy).
func sandboxPolicy(env *Env) *sandbox.Policy {
	t := env.Config.Tools
	return &sandbox.Policy{
		Mode:        sandbox.Mode(t.Sandbox),
		Writable:    t.SandboxWritable,
		DenyNetwork: !t.SandboxNetwork,
		CacheDir:    sandbox.DefaultCacheDir(env.Config.Session.DataDir),
		Probe:       env.SandboxProbe,
	}
}

// checkSandbox reports the shell sandbox: backend and Landlock ABI, what
// confined commands may write, the network. A kernel that cannot confine
// fails the check in mode required (every command would be refused) and
// warns in mode auto (commands run unconfined).
func checkSandbox(_ context.Context, env *Env) Result {
	if env.ConfigErr != nil {
		return skipNoConfig()
	}
	p := sandboxPolicy(env)
	detail := strings.Join(strings.Fields(strings.ReplaceAll(p.Describe(), "\n", ";")), " ")
	detail = strings.TrimPrefix(detail, "sandbox: ")
	switch {
	case !p.Enabled():
		return Result{Status: Skip, Detail: detail + ` ([tools] sandbox = "off")`}
	case p.Status().Usable():
		return Result{Status: OK, Detail: detail}
	case p.Mode == sandbox.ModeRequired:
		return Result{Status: Fail, Detail: detail}
	}
	return Result{Status: Warn, Detail: detail}
}
