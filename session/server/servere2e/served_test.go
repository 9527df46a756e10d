// Package servere2e drives the built acpd as a served daemon (`acpd serve
// --listen`) over its real listener, as a remote editor would: the
// official TypeScript SDK's HTTP and WebSocket clients, two workspaces on
// one daemon, and the benchmarks of many connections and of the added
// latency per message.
package servere2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// acpdBin is the daemon built once for this test binary.
var acpdBin string

func TestMain(m *testing.M) {
	var err error
	if acpdBin, err = acptest.BuildAcpd(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	acptest.RemoveAcpd()
	os.Exit(code)
}

// served is one `acpd serve --listen 127.0.0.1:0` process.
type served struct {
	URL       string // the /acp endpoint, http://127.0.0.1:PORT/acp
	Token     string
	TokenFile string
	DataDir   string
	Model     *modeltest.Server
	cmd       *exec.Cmd
	stderr    *acptest.SyncBuffer
	// stop interrupts the daemon and waits for it to exit (at most once;
	// cleanup calls it too).
	stop func()
}

// addrLine finds the endpoint in the daemon's start-up line on stderr.
var addrLine = regexp.MustCompile(`https?://127\.0\.0\.1:[0-9]+/acp`)

// serve starts the built daemon serving on a loopback port of its choice
// against the scripted model srv, with a fresh token and data folder, env
// added to its environment and flags after the defaults (which they may
// override). It waits until /healthz answers; cleanup stops it.
func serve(t testing.TB, srv *modeltest.Server, env []string, flags ...string) *served {
	t.Helper()
	dir := t.TempDir()
	s := &served{Token: "e2e-" + strings.Repeat("7f", 16), TokenFile: filepath.Join(dir, "token"), DataDir: filepath.Join(dir, "data"), Model: srv}
	require.NoError(t, os.WriteFile(s.TokenFile, []byte(s.Token+"\n"), 0o600))
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--token-file", s.TokenFile,
		"--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "scripted",
		"--data-dir", s.DataDir, "--log-level", "info", "--approval-mode", "default"}, flags...)
	s.cmd = exec.Command(acpdBin, args...)
	s.cmd.Env = append(append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "OPENAI_API_KEY=test-key"), env...)
	s.stderr = &acptest.SyncBuffer{}
	pr, pw := io.Pipe()
	s.cmd.Stderr = pw
	require.NoError(t, s.cmd.Start())
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			_, _ = s.stderr.Write([]byte(line + "\n"))
			if u := addrLine.FindString(line); u != "" {
				select {
				case found <- u:
				default:
				}
			}
		}
	}()
	s.stop = sync.OnceFunc(func() {
		_ = s.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
			t.Errorf("acpd serve did not stop within 20 s of SIGINT")
		}
		_ = pw.Close()
	})
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("acpd serve stderr:\n%s", s.stderr.String())
		}
	})
	select {
	case s.URL = <-found:
	case <-time.After(60 * time.Second):
		t.Fatalf("acpd serve printed no http://127.0.0.1:PORT/acp line within 60 s; stderr:\n%s", s.stderr.String())
	}
	health := strings.TrimSuffix(s.URL, "/acp") + "/healthz"
	hc := http.DefaultClient
	if strings.HasPrefix(s.URL, "https:") {
		// Only whether it is up: the certificate is the caller's to check.
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		defer hc.CloseIdleConnections()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodGet, health, nil)
		require.NoError(t, err)
		req.Header = s.Header()
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered 200 (last: %v)", health, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// Header is what every request of a legitimate client carries.
func (s *served) Header() http.Header {
	return http.Header{"Authorization": {"Bearer " + s.Token}}
}

// client is a schema-validating ACP client on a new HTTP connection to s.
func (s *served) client(t testing.TB, fc *acptest.FakeClient, hc *http.Client) (*acptest.ClientConn, *acptest.HTTPStream) {
	t.Helper()
	hs := acptest.DialHTTP(s.URL, s.Header(), hc)
	t.Cleanup(func() { _ = hs.Close() })
	return acptest.NewClientConn(t, fc, hs.Reader(), hs), hs
}

// ctxFor is a context that ends with the test, at most after d.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func call(name string, args map[string]any) modeltest.ToolCall {
	b, _ := json.Marshal(args)
	return modeltest.ToolCall{Name: name, Arguments: string(b)}
}

func shell(cmd string) modeltest.ToolCall {
	return call("run_shell_command", map[string]any{"command": cmd})
}
