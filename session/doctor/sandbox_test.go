package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session/tools/sandbox"
)

func landlockABI7() sandbox.Status { return sandbox.Status{Backend: "landlock", ABI: 7, KernelABI: 7} }

func landlockABI5() sandbox.Status { return sandbox.Status{Backend: "landlock", ABI: 5, KernelABI: 5} }

func noLandlock() sandbox.Status {
	return sandbox.Status{Backend: "landlock", Err: errors.New("the kernel has no Landlock support")}
}

// policyOf is the policy acpd makes from cfg, with the kernel's answer
// replaced by probe.
func policyOf(cfg config.Config, probe func() sandbox.Status) *sandbox.Policy {
	p := sandbox.NewPolicy(sandbox.Settings{Mode: cfg.Tools.Sandbox, Writable: cfg.Tools.SandboxWritable,
		Network: cfg.Tools.SandboxNetwork, DataDir: cfg.Session.DataDir, Probe: probe})
	p.ShmProbe = func() error { return nil } // namespaces, as on the CI machines
	return p
}

func TestDoctor_Sandbox(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    string
		network string
		probe   func() sandbox.Status
		status  Status
		want    []string
	}{
		{"confined", "auto", "true", landlockABI7, OK, []string{"mode auto, landlock ABI 7", "writable: the session's workspace roots, a private per-session TMPDIR", "/extra (missing: skipped)", "network: allowed", "signals: scoped"}},
		{"no signal scoping", "auto", "true", landlockABI5, OK, []string{"landlock ABI 5", "signals: not scoped"}},
		{"confined, no network", "required", "false", landlockABI7, OK, []string{"mode required", "network: denied (Landlock TCP rules + seccomp socket filter)"}},
		{"auto without Landlock", "auto", "true", noLandlock, Warn, []string{"landlock unavailable: the kernel has no Landlock support", "commands run UNCONFINED"}},
		{"required without Landlock", "required", "true", noLandlock, Fail, []string{"commands are refused"}},
		{"off", "off", "true", noLandlock, Skip, []string{"off (commands run unconfined)"}},
		{"proxy", "required", "proxy", landlockABI7, OK, []string{"network: only through acpd's proxy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Tools.Sandbox, cfg.Tools.SandboxNetwork, cfg.Tools.SandboxWritable = tc.mode, tc.network, []string{"/extra"}
			cfg.Session.DataDir = t.TempDir()
			r := checkSandbox(context.Background(), &Env{Config: cfg, Sandbox: policyOf(cfg, tc.probe)})
			assert.Equal(t, tc.status, r.Status, r.Detail)
			for _, w := range tc.want {
				assert.Contains(t, r.Detail, w)
			}
			assert.NotContains(t, r.Detail, "\n")
		})
	}
	r := checkSandbox(context.Background(), &Env{ConfigErr: errors.New("bad")})
	assert.Equal(t, Skip, r.Status)
}

// TestDoctor_SandboxCacheUnavailable: a tool-cache folder that cannot be
// made (a file where the folder is expected — root cannot write through
// that either) drops the cache, not the confinement, and doctor says so.
func TestDoctor_SandboxCacheUnavailable(t *testing.T) {
	cfg := config.Default()
	blocker := filepath.Join(t.TempDir(), "not-a-folder")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	t.Setenv("XDG_CACHE_HOME", blocker)
	p := policyOf(cfg, landlockABI7)
	assert.Empty(t, p.CacheDir)
	r := checkSandbox(context.Background(), &Env{Config: cfg, Sandbox: p})
	assert.Equal(t, OK, r.Status, "still confined: %s", r.Detail)
	assert.Contains(t, r.Detail, "no tool-cache folder")
	assert.Contains(t, r.Detail, "not a directory")
	assert.NotContains(t, r.Detail, "UNCONFINED")
}
