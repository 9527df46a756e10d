package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
)

// h2specModule is a module of its own that requires the conformance
// suite, github.com/summerwind/h2spec v2.2.1+incompatible (the newest the
// module proxy serves), as a tool. That module has no go.mod, so `go
// install pkg@version` would resolve its dependencies to whatever is
// newest on the day; here go.mod and go.sum fix every one of them, and the
// build is the same on every machine and every day. The main module
// ignores testdata, so none of this enters acpd's own go.mod.
const h2specModule = "testdata/h2spec"

// h2spec builds h2spec once per machine and pinned set (under the user's
// cache folder, named by a digest of go.mod and go.sum). Without the
// module proxy the test is skipped, or fails when
// acptest.RequireInteropEnv is set.
func h2spec(t *testing.T) string {
	t.Helper()
	sum := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(h2specModule, f))
		require.NoError(t, err)
		sum.Write(b)
	}
	root := t.TempDir()
	if cache, err := os.UserCacheDir(); err == nil {
		root = filepath.Join(cache, "acpd-test")
	}
	exe := filepath.Join(root, "h2spec-"+hex.EncodeToString(sum.Sum(nil))[:16], "h2spec")
	if _, err := os.Stat(exe); err == nil {
		return exe
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp := filepath.Join(t.TempDir(), "h2spec")
	// -mod=readonly: a go.sum that lacks a checksum fails the build
	// instead of being completed with whatever the proxy serves today.
	cmd := exec.CommandContext(ctx, "go", "build", "-mod=readonly", "-o", tmp, "github.com/summerwind/h2spec/cmd/h2spec")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	cmd.Dir = h2specModule
	if out, err := cmd.CombinedOutput(); err != nil {
		missing := t.Skipf
		if os.Getenv(acptest.RequireInteropEnv) != "" {
			missing = t.Fatalf
		}
		missing("go build h2spec in %s (needs the Go module proxy or its cache): %v\n%s", h2specModule, err, out)
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(exe), 0o755))
	require.NoError(t, os.Rename(tmp, exe))
	return exe
}

var (
	h2specSummary = regexp.MustCompile(`(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed`)
	h2specFailure = regexp.MustCompile(`(?m)^\s*× \d+: (.+)$`)
)

// h2specDeviations are the h2spec cases net/http's HTTP/2 server fails by
// its own choice, each harmless to an ACP client; any other failure fails
// the test.
var h2specDeviations = map[string]string{
	// RFC 9113 asks that the values be applied in order; Go refuses a
	// SETTINGS frame that repeats a setting (a connection error), a
	// defence against settings floods. No client sends one.
	"Sends multiple values of SETTINGS_INITIAL_WINDOW_SIZE": "both",
	// A request with a connection-specific header is malformed; Go
	// answers it 400 instead of resetting its stream. Either way the
	// request is refused.
	"Sends a HEADERS frame that contains the connection-specific header field":                     "both",
	`Sends a HEADERS frame that contains the TE header field with any value other than "trailers"`: "both",
	// The cleartext port also serves HTTP/1.1, where a first line that is
	// not the HTTP/2 preface is an HTTP/1.1 request: net/http answers it
	// 400 and closes, where RFC 9113 would close without a word.
	"Sends invalid connection preface": "h2c",
	// Every h2spec request lacks the token and is answered 401 at once;
	// Go's server then resets the stream whose body the client has not
	// finished (NO_ERROR), and the test's WINDOW_UPDATEs find it closed
	// when the answer beats them.
	"Sends multiple WINDOW_UPDATE frames increasing the flow control window to above 2^31-1 on a stream": "both",
	// The same race: when the 401 goes out before the (second) DATA frame
	// arrives, the stream is over before the lengths can disagree (both
	// seen over TLS on a loaded machine; one run in several).
	`Sends a HEADERS frame with the "content-length" header field which does not equal the sum of the multiple DATA frames payload length`: "both",
	`Sends a HEADERS frame with the "content-length" header field which does not equal the DATA frame payload length`:                      "both",
}

// TestServeH2Spec runs every h2spec case, the strict ones included,
// against `acpd serve` over h2c with prior knowledge and over TLS: each
// must pass, but for net/http's own deviations (h2specDeviations).
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
			_, failures, _ := strings.Cut(string(out), "\nFailures:")
			for _, f := range h2specFailure.FindAllStringSubmatch(failures, -1) {
				where, ok := h2specDeviations[f[1]]
				require.True(t, ok && (where == "both" || where == tc.name), "h2spec case failed: %s\n%s", f[1], out)
				t.Logf("net/http's own deviation: %s", f[1])
			}
			require.Equal(t, "146", string(m[1]), "%s", out)
		})
	}
}
