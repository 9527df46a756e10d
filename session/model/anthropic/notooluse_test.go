package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
)

// A request with NoToolUse offers the same tools with tool_choice
// {"type":"none"}.
func TestBuild_NoToolUse(t *testing.T) {
	c := New(Options{})
	req := model.Request{Model: "m", Tools: []model.ToolSpec{{Name: "list"}},
		Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}
	plain, err := c.build(req)
	require.NoError(t, err)
	req.NoToolUse = true
	side, err := c.build(req)
	require.NoError(t, err)
	var p, s map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(plain.b, &p))
	require.NoError(t, json.Unmarshal(side.b, &s))
	assert.NotContains(t, p, "tool_choice")
	assert.JSONEq(t, `{"type":"none"}`, string(s["tool_choice"]))
	assert.JSONEq(t, string(p["tools"]), string(s["tools"]))
}
