package session_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

func optionByID(opts []acp.SessionConfigOption, id string) *acp.SessionConfigOption {
	for i := range opts {
		if opts[i].ID == id {
			return &opts[i]
		}
	}
	return nil
}

// A client accepting boolean config options gets the auto_approve toggle:
// on is mode yolo, off the mode before; the modes API and the mode option
// follow. A client without the capability gets no boolean option, and
// setting auto_approve is an unknown configId. logout answers {} (it is
// advertised), and session/new still works after it (no authentication
// is required by this configuration).
func TestE2E_AutoApproveToggleAndLogout(t *testing.T) {
	t.Run("with boolean options", func(t *testing.T) {
		d := startDaemon(t, nil, nil, "--approval-mode", "auto-edit")
		ctx := ctxFor(t)
		init, err := d.cc.InitializeWith(ctx, acp.ClientCapabilities{Session: &acp.ClientSessionCapabilities{
			ConfigOptions: &acp.SessionConfigOptionsCapabilities{Boolean: &acp.Capability{}}}})
		require.NoError(t, err)
		require.NotNil(t, init.AgentCapabilities.Auth)
		require.NotNil(t, init.AgentCapabilities.Auth.Logout)
		var nr acp.NewSessionResponse
		require.NoError(t, d.cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: d.cwd, MCPServers: []acp.MCPServer{}}, &nr))
		toggle := optionByID(nr.ConfigOptions, "auto_approve")
		require.NotNil(t, toggle)
		assert.Equal(t, "boolean", toggle.Type)
		assert.False(t, toggle.Bool)

		set := func(v bool) []acp.SessionConfigOption {
			var r acp.SetSessionConfigOptionResponse
			require.NoError(t, d.cc.Call(ctx, acp.MethodSessionSetConfigOption, map[string]any{
				"sessionId": nr.SessionID, "configId": "auto_approve", "type": "boolean", "value": v}, &r))
			return r.ConfigOptions
		}
		on := set(true)
		assert.True(t, optionByID(on, "auto_approve").Bool)
		assert.Equal(t, "yolo", optionByID(on, "mode").CurrentValue)
		off := set(false)
		assert.False(t, optionByID(off, "auto_approve").Bool)
		assert.Equal(t, "auto-edit", optionByID(off, "mode").CurrentValue, "off returns to the mode before")

		var r json.RawMessage
		err = d.cc.Call(ctx, acp.MethodSessionSetConfigOption, map[string]any{
			"sessionId": nr.SessionID, "configId": "auto_approve", "value": "yes"}, &r)
		var ae *acp.Error
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, acp.CodeInvalidParams, ae.Code)

		require.NoError(t, d.cc.Call(ctx, acp.MethodLogout, map[string]any{}, &r))
		assert.JSONEq(t, `{}`, string(r))
		_, err = d.cc.NewSession(ctx, d.cwd)
		require.NoError(t, err)
	})
	t.Run("without", func(t *testing.T) {
		d := startDaemon(t, nil, nil)
		ctx := ctxFor(t)
		_, err := d.cc.InitializeWith(ctx, acp.ClientCapabilities{})
		require.NoError(t, err)
		var nr acp.NewSessionResponse
		require.NoError(t, d.cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: d.cwd, MCPServers: []acp.MCPServer{}}, &nr))
		assert.Nil(t, optionByID(nr.ConfigOptions, "auto_approve"))
		var r json.RawMessage
		err = d.cc.Call(ctx, acp.MethodSessionSetConfigOption, map[string]any{
			"sessionId": nr.SessionID, "configId": "auto_approve", "type": "boolean", "value": true}, &r)
		var ae *acp.Error
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, acp.CodeInvalidParams, ae.Code)
	})
}
