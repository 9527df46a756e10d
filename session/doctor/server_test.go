package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/config"
)

func writeToken(t *testing.T, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(p, []byte("doctor-token-0123456789\n"), 0o600))
	require.NoError(t, os.Chmod(p, mode))
	return p
}

// writeCert writes a self-signed certificate valid from nb to na and its key.
func writeCert(t *testing.T, nb, na time.Time) (cert, key string) {
	c := acptest.WriteCert(t, nb, na, "acpd.example")
	return c.CertFile, c.KeyFile
}

func TestCheckServer(t *testing.T) {
	t.Parallel()
	now := time.Now()
	good, goodKey := writeCert(t, now.Add(-time.Hour), now.Add(365*24*time.Hour))
	old, oldKey := writeCert(t, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	soon, soonKey := writeCert(t, now.Add(-time.Hour), now.Add(24*time.Hour))
	_, otherKey := writeCert(t, now.Add(-time.Hour), now.Add(time.Hour))
	tok := writeToken(t, 0o600)
	tests := []struct {
		name   string
		server config.ServerConfig
		status Status
		detail string
	}{
		{"not set up", config.ServerConfig{}, Skip, "[server] listen unset"},
		{"loopback", config.ServerConfig{Listen: "127.0.0.1:8123", TokenFile: tok}, OK, "127.0.0.1:8123 (loopback, no TLS); token file " + tok + " (owner only)"},
		{"beyond loopback without TLS", config.ServerConfig{Listen: "0.0.0.0:8123", TokenFile: tok}, Fail, "without TLS"},
		{"TLS", config.ServerConfig{Listen: "0.0.0.0:8443", TLSCert: good, TLSKey: goodKey, TokenFile: tok}, OK, "certificate valid until"},
		{"expired", config.ServerConfig{Listen: "0.0.0.0:8443", TLSCert: old, TLSKey: oldKey, TokenFile: tok}, Fail, "expired on"},
		{"expires soon", config.ServerConfig{Listen: "0.0.0.0:8443", TLSCert: soon, TLSKey: soonKey, TokenFile: tok}, Warn, "expires soon"},
		{"key of another certificate", config.ServerConfig{Listen: "0.0.0.0:8443", TLSCert: good, TLSKey: otherKey, TokenFile: tok}, Fail, "private key does not match"},
		{"unreadable certificate", config.ServerConfig{Listen: "0.0.0.0:8443", TLSCert: "/nonexistent/c.pem", TLSKey: goodKey, TokenFile: tok}, Fail, "/nonexistent/c.pem"},
		{"token file others can read", config.ServerConfig{Listen: "127.0.0.1:8123", TokenFile: writeToken(t, 0o644)}, Fail, "other users can read it"},
		{"no token", config.ServerConfig{Listen: "127.0.0.1:8123", TokenFile: "/nonexistent/token"}, Fail, "--init-token"},
		{"token from the environment", config.ServerConfig{Listen: "127.0.0.1:8123", TokenEnv: "DOCTOR_TOKEN"}, OK, "token from $DOCTOR_TOKEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.Session.DataDir = t.TempDir()
			cfg.Server = tt.server
			env := &Env{Config: cfg, Getenv: func(k string) string {
				if k == "DOCTOR_TOKEN" {
					return strings.Repeat("t", 20)
				}
				return ""
			}}
			r := checkServer(context.Background(), env)
			assert.Equal(t, tt.status, r.Status, r.Detail)
			assert.Contains(t, r.Detail, tt.detail)
		})
	}
}
