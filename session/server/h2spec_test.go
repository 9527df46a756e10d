package server_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
)

// h2specVersion is the conformance suite the HTTP/2 server is held to.
// The module has no go.mod (hence +incompatible): this version is the
// newest the module proxy serves.
const h2specVersion = "github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible"

// h2spec installs h2spec once per machine (under the user's cache folder)
// with `go install`. Without the module proxy the test is skipped, or
// fails when acptest.RequireInteropEnv is set.
func h2spec(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if cache, err := os.UserCacheDir(); err == nil {
		root = filepath.Join(cache, "acpd-test")
	}
	bin := filepath.Join(root, "h2spec-v2.2.1")
	exe := filepath.Join(bin, "h2spec")
	if _, err := os.Stat(exe); err == nil {
		return exe
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp, err := os.MkdirTemp(t.TempDir(), "gobin")
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, "go", "install", h2specVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		missing := t.Skipf
		if os.Getenv(acptest.RequireInteropEnv) != "" {
			missing = t.Fatalf
		}
		missing("go install %s (needs the Go module proxy): %v\n%s", h2specVersion, err, out)
	}
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, os.Rename(filepath.Join(tmp, "h2spec"), exe))
	return exe
}

var h2specSummary = regexp.MustCompile(`(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed`)

// TestServeH2Spec runs every h2spec case, the strict ones included,
// against `acpd serve` over h2c with prior knowledge and over TLS: each
// must pass.
func TestServeH2Spec(t *testing.T) {
	exe := h2spec(t)
	cert, key, _ := selfSigned(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"h2c", nil},
		{"tls", []string{"--tls-cert", cert, "--tls-key", key}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, "http://127.0.0.1:1/v1", "", tc.args)
			u, err := url.Parse(d.url)
			require.NoError(t, err)
			args := []string{"--strict", "--host", u.Hostname(), "--port", u.Port(), "--timeout", "5"}
			if u.Scheme == "https" {
				args = append(args, "--tls", "--insecure")
			}
			out, err := exec.Command(exe, args...).CombinedOutput()
			m := h2specSummary.FindSubmatch(out)
			require.NotNil(t, m, "h2spec %v: %v\n%s", args, err, out)
			require.Equal(t, string(m[1]), string(m[2]), "every case passes:\n%s", out)
			require.Equal(t, "0", string(m[4]), "%s", out)
			require.NoError(t, err)
		})
	}
}
