package session_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// startFresh runs the built acpd as a new user would: a home without any
// configuration and only env in the environment besides PATH and HOME.
func startFresh(t *testing.T, env []string, args ...string) *acptest.ClientConn {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(acpdBin, append([]string{"--log-level", "warn"}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}, env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &testLog{t: t}
	require.NoError(t, cmd.Start())
	cc := acptest.NewClientConn(t, &acptest.FakeClient{}, stdout, stdin)
	t.Cleanup(func() {
		_ = stdin.Close()
		acptest.WaitExit(t, cmd, 5*time.Second)
	})
	return cc
}

// TestE2E_FirstRunWithoutModel: with no configuration at all, session/new
// works and the first prompt fails with a message naming the three ways to
// set a model (-32603, data.errorKind model_not_configured).
func TestE2E_FirstRunWithoutModel(t *testing.T) {
	cc := startFresh(t, nil)
	ctx := ctxFor(t)
	_, err := cc.Initialize(ctx)
	require.NoError(t, err)
	cwd := t.TempDir()
	sid, err := cc.NewSession(ctx, cwd)
	require.NoError(t, err, "session/new works without a model")
	_, err = cc.Prompt(ctx, sid, "hi")
	var ae *acp.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, acp.CodeInternalError, ae.Code)
	for _, want := range []string{"No model is configured", "[model] name", "OPENAI_MODEL", "--model", "acpd doctor"} {
		assert.Contains(t, ae.Message, want)
	}
	assert.Equal(t, map[string]any{"errorKind": "model_not_configured"}, ae.Data)

	// The session was recorded (without a model record) and stays usable.
	_, err = cc.Prompt(ctx, sid, "again")
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "model_not_configured", ae.Data.(map[string]any)["errorKind"])
}

// TestE2E_ProviderRefusesKey: a 401 names the variable the key was read
// from and says it was empty.
func TestE2E_ProviderRefusesKey(t *testing.T) {
	srv := modeltest.NewServer(t, modeltest.Response{Status: 401, ErrorMessage: "Incorrect API key provided"})
	cc := startFresh(t, nil, "--model", "m1", "--base-url", srv.BaseURL())
	ctx := ctxFor(t)
	_, err := cc.Initialize(ctx)
	require.NoError(t, err)
	sid, err := cc.NewSession(ctx, t.TempDir())
	require.NoError(t, err)
	_, err = cc.Prompt(ctx, sid, "hi")
	var ae *acp.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, acp.CodeInternalError, ae.Code)
	assert.Contains(t, ae.Message, "HTTP 401: Incorrect API key provided")
	assert.Contains(t, ae.Message, "environment variable OPENAI_API_KEY, which is empty or unset")
	assert.Equal(t, map[string]any{"errorKind": "provider_auth_failed", "status": float64(401), "apiKeyEnv": "OPENAI_API_KEY", "apiKeyEmpty": true}, ae.Data)
	assert.Empty(t, srv.Requests()[0].Header.Get("Authorization"), "no key was sent")
}

// TestE2E_ProviderRefusesSetKey: a 403 names the configured variable and
// says it was set.
func TestE2E_ProviderRefusesSetKey(t *testing.T) {
	srv := modeltest.NewServer(t, modeltest.Response{Status: 403, ErrorMessage: "forbidden"})
	cfg := filepath.Join(t.TempDir(), "c.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[model]\napiKeyEnv = \"MY_KEY\"\n"), 0o644))
	cc := startFresh(t, []string{"MY_KEY=sk-x"}, "--config", cfg, "--model", "m1", "--base-url", srv.BaseURL())
	ctx := ctxFor(t)
	_, err := cc.Initialize(ctx)
	require.NoError(t, err)
	sid, err := cc.NewSession(ctx, t.TempDir())
	require.NoError(t, err)
	_, err = cc.Prompt(ctx, sid, "hi")
	var ae *acp.Error
	require.ErrorAs(t, err, &ae)
	assert.Contains(t, ae.Message, "HTTP 403: forbidden")
	assert.Contains(t, ae.Message, "environment variable MY_KEY, which was set")
	assert.Equal(t, "Bearer sk-x", srv.Requests()[0].Header.Get("Authorization"))
}
