// Package autoallow is the tool-call decider behind tools.autoAllowConfined:
// in default and auto-edit mode, a shell command that the sandbox runs
// confined — writes kept to the workspace, the user's secrets unreadable,
// the environment without credentials, the network only through acpd's
// proxy (every host not allowed asked about while it runs; no unix
// socket) — runs without a permission request. The network turned off is
// not enough: Landlock and the socket filter leave unix sockets open
// there, and /var/run/docker.sock is a full escape. A command that cannot do harm needs no question; what needs to
// leave the sandbox still asks, and its question says why.
//
// It abstains in every other case: plan mode keeps its own rules, yolo
// asks nothing anyway, other tools are not its business, and a call that
// another decider asks about or refuses stays so (the strictest verdict
// wins). When the sandbox cannot contain the session's commands, it
// abstains with the reason, which the permission request then shows; an
// "always" the user gave keeps answering.
package autoallow

import (
	"context"

	"github.com/acpd/acpd/session/toolcall"
	"github.com/acpd/acpd/session/tools"
	"github.com/acpd/acpd/session/tools/sandbox"
)

// Name is the decider's name in a call's trail (the transcript, acpd
// stats, the editor's _meta).
const Name = "sandbox"

// Decider decides about the shell commands of one session, whose sandbox
// is Sandbox (nil: none, commands unconfined).
type Decider struct {
	Sandbox *sandbox.Session
}

func (Decider) Name() string { return Name }

func (d Decider) Decide(_ context.Context, c *toolcall.Call) toolcall.Decision {
	if c.Name != tools.NameRunShellCommand || c.Confirm.Kind != tools.ConfirmExec {
		return toolcall.Decision{}
	}
	if c.Mode != toolcall.ModeDefault && c.Mode != toolcall.ModeAutoEdit {
		return toolcall.Decision{}
	}
	ok, why := d.Sandbox.Contained()
	if !ok {
		return toolcall.Decision{Reason: "not run without asking (tools.autoAllowConfined): " + why}
	}
	return toolcall.Decision{Verdict: toolcall.Allow, Reason: "confined by the sandbox: writes kept to the workspace, secrets unreadable, network only through acpd's proxy"}
}
