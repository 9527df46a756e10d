package doctor

import (
	"context"
	"strings"

	"github.com/acpd/acpd/session/tools/sandbox"
)

// Warn is an outcome that does not fail the run but needs the user's eye:
// acpd works, with less protection than configured.
const Warn Status = "WARN"

// checkSandbox reports the shell sandbox: backend and Landlock ABI, what
// confined commands may write, the network. A kernel that cannot confine
// fails the check in mode required (every command would be refused) and
// warns in mode auto (commands run unconfined).
func checkSandbox(_ context.Context, env *Env) Result {
	if env.ConfigErr != nil {
		return skipNoConfig()
	}
	p := env.Sandbox
	if p == nil {
		return Result{Status: Skip, Detail: "no sandbox policy given"}
	}
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
