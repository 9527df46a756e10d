package hooks

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Verdict is what the hooks of one event said together.
type Verdict struct {
	// Block: a hook exited 2 or answered decision "block" (PreToolUse:
	// "deny"): the call is refused, the prompt dropped, the stop turned
	// into going on, the compaction skipped; Reason says why (a blocking
	// hook's stderr).
	Block  bool
	Reason string
	// Permission is PreToolUse's combined permissionDecision: "deny" >
	// "ask" > "allow"; "" when no hook gave one.
	Permission string
	// UpdatedInput replaces the tool's input (PreToolUse).
	UpdatedInput json.RawMessage
	// Context is for the model: additionalContext, and the plain stdout of
	// SessionStart and UserPromptSubmit hooks.
	Context string
	// Messages are for the user: systemMessage.
	Messages []string
	// Stop: a hook answered continue false; StopReason is shown to the
	// user.
	Stop       bool
	StopReason string
	// Notes are the hooks that failed without deciding (another exit
	// status, a timeout, a command that did not start), for the user.
	Notes []string
	// By is the hook whose answer decided (Block or Permission).
	By *Hook
}

// permissionRank orders PreToolUse's answers: deny > ask > allow.
func permissionRank(p string) int {
	switch p {
	case "allow":
		return 1
	case "ask":
		return 2
	case "deny":
		return 3
	}
	return 0
}

// Combine reads the results of one event's hooks, Claude Code's way. A
// hook that exits 2 blocks and its stderr is the reason (its JSON is not
// read); one that exits 0, or another status with a JSON answer, is read
// for its JSON; another status without one is a non-blocking error; a
// hook that timed out was killed and its output dropped.
func Combine(event string, rs []Result) Verdict {
	var v Verdict
	for i := range rs {
		r := &rs[i]
		switch {
		case r.TimedOut:
			v.Notes = append(v.Notes, fmt.Sprintf("%s timed out after %s and was killed; acpd went on without it", r.Hook, r.Hook.timeout().Round(time.Millisecond)))
			continue
		case r.Err != nil:
			v.Notes = append(v.Notes, fmt.Sprintf("%s could not run: %v", r.Hook, r.Err))
			continue
		case r.Exit == 2:
			reason := Bound(strings.TrimSpace(r.Stderr))
			if reason == "" {
				reason = fmt.Sprintf("blocked by the %s", r.Hook)
			}
			v.block(r.Hook, reason)
			if event == PreToolUse {
				v.permission(r.Hook, "deny")
			}
			continue
		case r.Output == nil && r.Exit != 0:
			note := fmt.Sprintf("%s failed (exit status %d)", r.Hook, r.Exit)
			if s := strings.TrimSpace(r.Stderr); s != "" {
				note += ": " + Bound(s)
			}
			v.Notes = append(v.Notes, note)
			continue
		case r.Output == nil:
			if event == SessionStart || event == UserPromptSubmit {
				v.context(r.Text())
			}
			continue
		}
		o := r.Output
		if o.Continue != nil && !*o.Continue {
			v.Stop = true
			if v.StopReason == "" {
				v.StopReason = Bound(o.StopReason)
			}
		}
		if o.SystemMessage != "" {
			v.Messages = append(v.Messages, Bound(o.SystemMessage))
		}
		sp := o.HookSpecificOutput
		if sp != nil {
			v.context(Bound(sp.AdditionalContext))
		}
		if event == PreToolUse {
			p, reason := "", ""
			switch {
			case sp != nil && sp.PermissionDecision != "":
				p, reason = sp.PermissionDecision, sp.PermissionDecisionReason
			case o.Decision == "approve":
				p, reason = "allow", o.Reason
			case o.Decision == "block":
				p, reason = "deny", o.Reason
			}
			if permissionRank(p) > 0 {
				if p == "deny" && reason == "" {
					reason = fmt.Sprintf("denied by the %s", r.Hook)
				}
				if permissionRank(p) > permissionRank(v.Permission) {
					v.Reason = Bound(reason)
				}
				v.permission(r.Hook, p)
				if p == "deny" {
					v.Block = true
				}
			}
			if sp != nil && len(sp.UpdatedInput) > 0 && v.UpdatedInput == nil && p != "deny" {
				v.UpdatedInput = sp.UpdatedInput
			}
			continue
		}
		if o.Decision == "block" {
			reason := o.Reason
			if reason == "" {
				reason = fmt.Sprintf("blocked by the %s", r.Hook)
			}
			v.block(r.Hook, Bound(reason))
		}
	}
	return v
}

func (v *Verdict) block(h *Hook, reason string) {
	if !v.Block {
		v.Block, v.Reason, v.By = true, reason, h
		return
	}
	v.Reason += "\n" + reason
}

func (v *Verdict) permission(h *Hook, p string) {
	if permissionRank(p) > permissionRank(v.Permission) {
		v.Permission = p
		if !v.Block || p == "deny" {
			v.By = h
		}
	}
}

func (v *Verdict) context(s string) {
	if s == "" {
		return
	}
	if v.Context != "" {
		v.Context += "\n\n"
	}
	v.Context += s
}
