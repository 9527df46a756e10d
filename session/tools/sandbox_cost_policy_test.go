package tools

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/netproxy"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// costSandbox confines w's commands as a default configuration with
// tools.sandboxNetwork = "proxy" does: the default deny list of this
// machine's home folder, the scrubbed environment, the network only
// through acpd's proxy (BenchmarkSandboxCost).
func costSandbox(b *testing.B, w *workspace, helper string) {
	sandboxtest.RequirePrivateShm(b, helper)
	cfg, _, err := config.Load(config.LoadOptions{ConfigPath: "/dev/null", NoModel: true})
	require.NoError(b, err)
	p := &sandbox.Policy{Mode: sandbox.ModeRequired, Helper: helper, TempRoot: b.TempDir(), CacheDir: filepath.Join(b.TempDir(), "cache"),
		DenyRead: cfg.Tools.DenyRead(), Env: sandbox.EnvPolicy{Drop: cfg.CredentialEnv()}, Proxy: true,
		NewProxy: func(c sandbox.ProxyConfig) sandbox.ProxyServer {
			return netproxy.New(netproxy.Options{DenyPorts: c.DenyPorts,
				Ask: func(ctx context.Context, t netproxy.Target) (bool, error) { return c.Ask(ctx, t.String()) }})
		}}
	w.env.Sandbox = p.NewSession(w.env.Roots)
	b.Cleanup(func() { w.env.Sandbox.Close() })
}
