package autoallow

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/acpd/acpd/session/toolcall"
	"github.com/acpd/acpd/session/tools"
)

// TestDecider_Abstains: other tools, other confirmations, plan and yolo
// mode are not the decider's business; without a sandbox it abstains with
// the reason, which the permission request then shows.
func TestDecider_Abstains(t *testing.T) {
	shell := func(mode toolcall.Mode) *toolcall.Call {
		return &toolcall.Call{Name: tools.NameRunShellCommand, Mode: mode, Confirm: tools.Confirmation{Kind: tools.ConfirmExec}}
	}
	d := Decider{}
	for name, c := range map[string]*toolcall.Call{
		"write_file": {Name: tools.NameWriteFile, Mode: toolcall.ModeDefault, Confirm: tools.Confirmation{Kind: tools.ConfirmEdit}},
		"plan":       shell(toolcall.ModePlan),
		"yolo":       shell(toolcall.ModeYolo),
		"read-only":  {Name: tools.NameRunShellCommand, Mode: toolcall.ModeDefault},
	} {
		got := d.Decide(context.Background(), c)
		assert.Equal(t, toolcall.Decision{}, got, name)
	}
	for _, mode := range []toolcall.Mode{toolcall.ModeDefault, toolcall.ModeAutoEdit} {
		got := d.Decide(context.Background(), shell(mode))
		assert.Equal(t, toolcall.Abstain, got.Verdict, mode)
		assert.Contains(t, got.Reason, "the shell sandbox is off", mode)
	}
	assert.Equal(t, "sandbox", d.Name())
}
