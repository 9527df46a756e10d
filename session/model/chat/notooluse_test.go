package chat

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
)

// A request with NoToolUse offers the same tools with tool_choice "none",
// and the cached head of an ordinary request is not reused for it.
func TestBuildRequest_NoToolUse(t *testing.T) {
	tools := []model.ToolSpec{{Name: "list"}}
	cache := &MessageCache{}
	plain, err := buildRequest(model.Request{Model: "m", Tools: tools}, cache, false)
	require.NoError(t, err)
	side, err := buildRequest(model.Request{Model: "m", Tools: tools, NoToolUse: true}, cache, false)
	require.NoError(t, err)
	var p, s map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(plain.bytes(), &p))
	require.NoError(t, json.Unmarshal(side.bytes(), &s))
	assert.NotContains(t, p, "tool_choice")
	assert.JSONEq(t, `"none"`, string(s["tool_choice"]))
	assert.JSONEq(t, string(p["tools"]), string(s["tools"]), "the same tool list")

	none, err := buildRequestBytes(model.Request{Model: "m", NoToolUse: true})
	require.NoError(t, err)
	assert.NotContains(t, string(none), "tool_choice", "no tools: nothing to choose from")
}
