package headless

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/policy"
)

// acpd run declines the workspace-trust question, saying how to trust.
func TestPermission_DeclinesTrust(t *testing.T) {
	var stdout, stderr bytes.Buffer
	o := NewOutput(&stdout, &stderr, FormatText, "default")
	req := acp.RequestPermissionRequest{SessionID: "s", ToolCall: acp.ToolCallUpdate{ToolCallID: "trust_1"},
		Options: []acp.PermissionOption{{OptionID: "trust", Kind: acp.AllowOnce}, {OptionID: "decline", Kind: acp.RejectOnce}},
		Meta:    acp.Meta{acp.MetaPermission: policy.PermissionTrust}}
	params, err := json.Marshal(req)
	require.NoError(t, err)
	r := o.Permission(params)
	assert.Equal(t, "decline", r.Outcome.OptionID)
	assert.Contains(t, stderr.String(), "acpd trust DIR")
}
