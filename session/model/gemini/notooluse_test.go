package gemini

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
)

// A request with NoToolUse offers the same tools with functionCallingConfig mode NONE.
func TestBuildRequest_NoToolUse(t *testing.T) {
	req := model.Request{Model: "m", Tools: []model.ToolSpec{{Name: "list"}},
		Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}
	plain, err := buildRequest(req, buildInput{})
	require.NoError(t, err)
	req.NoToolUse = true
	side, err := buildRequest(req, buildInput{})
	require.NoError(t, err)
	var p, s map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(plain, &p))
	require.NoError(t, json.Unmarshal(side, &s))
	assert.JSONEq(t, `{"functionCallingConfig":{"mode":"AUTO"}}`, string(p["toolConfig"]))
	assert.JSONEq(t, `{"functionCallingConfig":{"mode":"NONE"}}`, string(s["toolConfig"]))
	assert.JSONEq(t, string(p["tools"]), string(s["tools"]))
}
