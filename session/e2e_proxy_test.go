package session_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// proxyWorld is what the proxy tests reach: one HTTP server on every
// address of this machine, a "public" address for it (sandboxtest.PublicAddr),
// and a unix socket a command must not reach.
type proxyWorld struct {
	port   int
	public string // host:port on the public test address
	local  string // localhost:port
	sock   string
	hits   chan string
}

func newProxyWorld(t testing.TB) *proxyWorld {
	t.Helper()
	w := &proxyWorld{hits: make(chan string, 64)}
	ln, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		select {
		case w.hits <- r.URL.Path:
		default:
		}
		fmt.Fprintf(rw, "served:%s", r.URL.Path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	w.port = ln.Addr().(*net.TCPAddr).Port
	w.public = net.JoinHostPort(sandboxtest.PublicAddr(t), strconv.Itoa(w.port))
	w.local = net.JoinHostPort("localhost", strconv.Itoa(w.port))
	w.sock = filepath.Join(t.TempDir(), "service.sock")
	ul, err := net.Listen("unix", w.sock)
	require.NoError(t, err)
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("unix-reached\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() { ul.Close() })
	return w
}

// proxyPermissions answers the network questions of a fake editor: "always"
// for always, "once" for once, anything else rejected.
type proxyPermissions struct {
	mu      sync.Mutex
	answers map[string]string // host → always, once
	asked   []*acp.RequestPermissionRequest
}

func (p *proxyPermissions) answer(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, r)
	if r.Meta[acp.MetaPermission] != acp.PermissionSandboxNetwork {
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: r.Options[0].OptionID}}, nil
	}
	text := ""
	for _, c := range r.ToolCall.Content {
		if c.Content != nil {
			text += c.Content.Text
		}
	}
	want := acp.RejectOnce
	for host, a := range p.answers {
		if strings.Contains(text, host) {
			want = map[string]acp.PermissionOptionKind{"always": acp.AllowAlways, "once": acp.AllowOnce}[a]
		}
	}
	for _, o := range r.Options {
		if o.Kind == want {
			return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: o.OptionID}}, nil
		}
	}
	return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}, nil
}

func (p *proxyPermissions) networkQuestions() []*acp.RequestPermissionRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*acp.RequestPermissionRequest
	for _, r := range p.asked {
		if r.Meta[acp.MetaPermission] == acp.PermissionSandboxNetwork {
			out = append(out, r)
		}
	}
	return out
}

// TestE2E_Sandbox_Proxy: with sandboxNetwork = "proxy" the built acpd's
// commands reach an allowed host through the proxy; a host not allowed
// becomes a permission request while the command runs, and "allow always"
// lets the next command reach it without asking; a rejected host, this
// machine's loopback (directly or through the proxy), other hosts
// directly, UDP and unix sockets are out of reach, and the model is told
// what to do.
func TestE2E_Sandbox_Proxy(t *testing.T) {
	sandboxtest.RequirePrivateShm(t, acpdBin)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("SKIPPED: curl is not installed")
	}
	w := newProxyWorld(t)
	publicHost, _, _ := net.SplitHostPort(w.public)
	perms := &proxyPermissions{answers: map[string]string{publicHost: "always"}}
	fc := &acptest.FakeClient{RequestPermissionFunc: perms.answer}
	cfg := writeConfig(t, fmt.Sprintf("[tools]\nsandboxNetwork = \"proxy\"\nsandboxAllowedDomains = [%q]\n", w.local))
	l := newSbxLayout(t)
	d := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), fc, nil, "--config", cfg, "--sandbox", "required")
	py := func(code string) string { return "python3 -c '" + code + "'" }
	cmds := []string{
		"echo proxy=$HTTPS_PROXY/$http_proxy no=[$NO_PROXY$no_proxy]; curl -sS -m 20 http://" + w.local + "/allowed",
		"curl -sS -m 20 http://" + w.public + "/asked",
		"curl -sS -m 20 http://" + w.public + "/again",
		"curl -sS -m 20 http://127.0.0.2:" + strconv.Itoa(w.port) + "/rejected; echo rc=$?",
		"curl -sS -m 5 --noproxy '*' http://" + w.local + "/direct-local; echo rc=$?",
		"curl -sS -m 5 --noproxy '*' http://" + w.public + "/direct-public; echo rc=$?",
		py(`import socket; s=socket.socket(socket.AF_UNIX); s.connect("`+w.sock+`"); print(s.recv(100))`) + "; echo rc=$?",
		py(`import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("`+publicHost+`", 53))`) + "; echo rc=$?",
		// Root's commands hold no CAP_NET_ADMIN: no veth pair back to the
		// machine's network namespace (pid 1's), no address of their own.
		"ip link add acpdv0 type veth peer name acpdv1 netns 1; ip addr add 10.9.9.9/32 dev lo; echo rc=$?",
	}
	_, results := shellTurn(t, d, acp.ClientCapabilities{Terminal: true}, cmds)
	out := func(i int) string { _, o, _ := strings.Cut(results[i], "\nOutput: "); return o }
	for i := range results {
		t.Logf("result %d: %s", i, out(i))
	}

	assert.Contains(t, out(0), "served:/allowed", results[0])
	assert.Contains(t, out(0), "proxy=http://127.0.0.1:")
	assert.Contains(t, out(0), "no=[]", "no NO_PROXY exemption")
	assert.Contains(t, out(1), "served:/asked", results[1])
	assert.Contains(t, out(2), "served:/again", results[2])
	qs := perms.networkQuestions()
	require.Len(t, qs, 2, "the public host once (then always), 127.0.0.2 once: %v", qs)
	assert.Contains(t, qs[0].ToolCall.Content[0].Content.Text, w.public)
	var kinds []acp.PermissionOptionKind
	for _, o := range qs[0].Options {
		kinds = append(kinds, o.Kind)
	}
	assert.ElementsMatch(t, []acp.PermissionOptionKind{acp.AllowOnce, acp.AllowAlways, acp.RejectOnce}, kinds)

	assert.NotContains(t, out(3), "served:", results[3])
	assert.Contains(t, results[3], "acpd's proxy refused network access: 127.0.0.2:")
	assert.Contains(t, results[3], "sandboxAllowedDomains")
	assert.Contains(t, out(8), "Operation not permitted", results[8])
	for i := 4; i <= 8; i++ {
		assert.NotContains(t, out(i), "served:", results[i])
		assert.NotContains(t, out(i), "unix-reached", results[i])
		assert.NotContains(t, out(i), "rc=0", "command %d reached out: %s", i, results[i])
	}
	assert.Contains(t, out(6), "PermissionError", "a unix socket cannot even be made")
	hits := len(w.hits)
	got := map[string]bool{}
	for range hits {
		got[<-w.hits] = true
	}
	assert.Equal(t, map[string]bool{"/allowed": true, "/asked": true, "/again": true}, got)
}

// TestRunCmd_ProxyHeadless: `acpd run` cannot ask anyone: a host not allowed
// is refused, said on stderr, and the model reads what to do.
func TestE2E_Sandbox_ProxyHeadless(t *testing.T) {
	sandboxtest.RequirePrivateShm(t, acpdBin)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("SKIPPED: curl is not installed")
	}
	w := newProxyWorld(t)
	cfg := writeConfig(t, "[tools]\nsandboxNetwork = \"proxy\"\n")
	script := filepath.Join(t.TempDir(), "script.jsonl")
	call := fmt.Sprintf(`{"toolCalls":[{"name":"run_shell_command","arguments":{"command":"curl -sS -m 20 http://%s/headless; echo rc=$?"}}]}`, w.public)
	require.NoError(t, os.WriteFile(script, []byte(call+"\n"+`{"text":"done"}`+"\n"), 0o600))
	cmd := exec.Command(acpdBin, "run", "--config", cfg, "--provider", "script", "--model-script", script, "--model", "s",
		"--data-dir", t.TempDir(), "--sandbox", "required", "--yolo", "-o", "stream-json", "fetch it")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	// A refused call makes the run exit 7 (headless.ExitRefused).
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, out)
	assert.Equal(t, 7, ee.ExitCode(), out)
	assert.Contains(t, out, "refused network access")
	assert.Contains(t, out, "acpd's proxy refused network access: "+w.public)
	assert.Len(t, w.hits, 0)
}
