package doctor

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session/tools/sandbox"
)

func landlockABI7() sandbox.Status { return sandbox.Status{Backend: "landlock", ABI: 7, KernelABI: 7} }

func noLandlock() sandbox.Status {
	return sandbox.Status{Backend: "landlock", Err: errors.New("the kernel has no Landlock support")}
}

func TestDoctor_Sandbox(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    string
		network bool
		probe   func() sandbox.Status
		status  Status
		want    []string
	}{
		{"confined", "auto", true, landlockABI7, OK, []string{"mode auto, landlock ABI 7", "writable: the session's workspace roots, a private per-session TMPDIR", "/extra", "network: allowed"}},
		{"confined, no network", "required", false, landlockABI7, OK, []string{"mode required", "network: denied (Landlock TCP rules + seccomp socket filter)"}},
		{"auto without Landlock", "auto", true, noLandlock, Warn, []string{"landlock unavailable: the kernel has no Landlock support", "commands run UNCONFINED"}},
		{"required without Landlock", "required", true, noLandlock, Fail, []string{"commands are refused"}},
		{"off", "off", true, noLandlock, Skip, []string{"off (commands run unconfined)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Tools.Sandbox, cfg.Tools.SandboxNetwork, cfg.Tools.SandboxWritable = tc.mode, tc.network, []string{"/extra"}
			r := checkSandbox(context.Background(), &Env{Config: cfg, SandboxProbe: tc.probe})
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
