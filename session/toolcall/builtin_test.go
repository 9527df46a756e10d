package toolcall

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/acpd/acpd/session/shellline"
	"github.com/acpd/acpd/session/tools"
)

// needsConfirmation reports whether the built-in deciders keep a call of
// confirmation c from running unasked in mode (they ask, or plan mode
// refuses it).
func needsConfirmation(g *Grants, mode Mode, c tools.Confirmation) bool {
	tc := &Turn{Deciders: []Decider{PlanMode{}, g, Approval{}}}
	d, _ := tc.decide(context.Background(), &Call{Mode: mode, Confirm: c})
	return d.Verdict != Allow
}

// §11 for the confirmation kinds the vectors leave out: MCP asks in
// default and auto-edit; informational calls ask outside yolo; plan mode
// blocks MCP and writing shell, never reads or informational calls.
func TestNeedsConfirmationAndPlanBlocking(t *testing.T) {
	g := &Grants{}
	mcpC := tools.Confirmation{Kind: tools.ConfirmMCP, Label: "mcp__s__t"}
	info := tools.Confirmation{Kind: tools.ConfirmInfo}
	write := tools.Confirmation{Kind: tools.ConfirmExec, Label: "rm", Shell: shellline.Write}
	unknown := tools.Confirmation{Kind: tools.ConfirmExec, Label: "make"}
	tests := []struct {
		mode    Mode
		c       tools.Confirmation
		ask     bool
		blocked bool
	}{
		{ModeDefault, mcpC, true, false}, {ModeAutoEdit, mcpC, true, false}, {ModeYolo, mcpC, false, false},
		{ModeDefault, info, true, false}, {ModeAutoEdit, info, false, false}, {ModeYolo, info, false, false},
		{ModePlan, mcpC, true, true}, {ModePlan, info, true, false}, {ModePlan, write, true, true},
		{ModePlan, unknown, true, false}, {ModePlan, tools.Confirmation{Kind: tools.ConfirmEdit}, true, true},
		{ModePlan, tools.Confirmation{}, false, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.ask, needsConfirmation(g, tt.mode, tt.c), "ask %s %+v", tt.mode, tt.c)
		if tt.mode == ModePlan {
			assert.Equal(t, tt.blocked, planBlocked(tt.c), "blocked %+v", tt.c)
		}
	}
}

// §11: an "always allow" answer for a command skips the question in
// default and auto-edit, but plan mode still confirms a command it cannot
// classify as read-only.
func TestPlanModeConfirmsAlwaysAllowedCommand(t *testing.T) {
	g := &Grants{}
	unknown := tools.Confirmation{Kind: tools.ConfirmExec, Label: "make"}
	g.Allow(unknown)
	assert.False(t, needsConfirmation(g, ModeDefault, unknown))
	assert.False(t, needsConfirmation(g, ModeAutoEdit, unknown))
	assert.True(t, needsConfirmation(g, ModePlan, unknown))
	ro := tools.Confirmation{Kind: tools.ConfirmExec, Label: "ls", Shell: shellline.ReadOnly}
	assert.False(t, needsConfirmation(g, ModePlan, ro))
}

func TestNeedsConfirmation(t *testing.T) {
	g := &Grants{}
	edit := tools.Confirmation{Kind: tools.ConfirmEdit}
	exec := tools.Confirmation{Kind: tools.ConfirmExec, Label: "npm test"}
	ro := tools.Confirmation{Kind: tools.ConfirmExec, Label: "ls", Shell: shellline.ReadOnly}
	read := tools.Confirmation{Kind: tools.ConfirmNone}
	tests := []struct {
		mode Mode
		c    tools.Confirmation
		want bool
	}{
		{ModeYolo, exec, false}, {ModeYolo, edit, false},
		{ModeDefault, read, false}, {ModeDefault, edit, true}, {ModeDefault, exec, true}, {ModeDefault, ro, true},
		{ModeAutoEdit, edit, false}, {ModeAutoEdit, exec, true},
		{ModePlan, ro, false}, {ModePlan, exec, true}, {ModePlan, read, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, needsConfirmation(g, tt.mode, tt.c), "%s %+v", tt.mode, tt.c)
	}
}
