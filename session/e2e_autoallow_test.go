package session_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
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
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// devProject is a small Python project under git, the workspace of the
// prompt-count session.
func devProject(t testing.TB, ws string) {
	t.Helper()
	files := map[string]string{
		"calc/__init__.py":  "",
		"calc/ops.py":       "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n",
		"tests/test_ops.py": "import unittest\n\nfrom calc.ops import add, mul\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n",
		"tests/__init__.py": "",
		"Makefile":          "test:\n\tpython3 -m unittest -q\n\nbuild:\n\tpython3 -m compileall -q calc\n",
		"README.md":         "# calc\n\nAdds and multiplies.\n",
		".gitignore":        "__pycache__/\nbuild/\nvendor/\n",
	}
	for name, text := range files {
		p := filepath.Join(ws, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "calc: add and mul"},
	} {
		out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
}

// devSession is a scripted session of typical development steps on
// devProject: reading, searching, building, testing, formatting, git
// inspection, a package fetched from the registry host registry (through
// acpd's proxy when the network is proxied), and a few file edits.
func devSession(ws, registry string) []modeltest.ToolCall {
	sh := func(c string) modeltest.ToolCall {
		return call("run_shell_command", map[string]any{"command": c, "timeout": 120000})
	}
	write := func(name, text string) modeltest.ToolCall {
		return call("write_file", map[string]any{"file_path": filepath.Join(ws, name), "content": text})
	}
	return []modeltest.ToolCall{
		sh("ls -la"),
		sh("cat README.md"),
		sh("find . -name '*.py' -not -path './.git/*'"),
		sh("grep -rn 'def ' calc"),
		sh("git status --short"),
		sh("git log --oneline -5"),
		sh("wc -l calc/ops.py tests/test_ops.py"),
		sh("python3 -m unittest -q"),
		sh("make test"),
		sh("make build"),
		sh("python3 -m compileall -q calc tests"),
		sh("mkdir -p build && python3 -c 'import calc.ops as o; print(o.add(1, 2))' > build/out.txt && cat build/out.txt"),
		sh("curl -fsS -m 30 -o pkg.tar.gz http://" + registry + "/pkg.tar.gz && mkdir -p vendor && tar -xzf pkg.tar.gz -C vendor && ls vendor"),
		sh("python3 -c 'import sys; sys.path.insert(0, \"vendor\"); import pkg; print(pkg.VERSION)'"),
		write("calc/ops.py", "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n\n\ndef sub(a, b):\n    return a - b\n"),
		sh("git diff --stat"),
		sh("python3 -m unittest -q"),
		write("tests/test_sub.py", "import unittest\n\nfrom calc.ops import sub\n\n\nclass S(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(sub(5, 3), 2)\n"),
		sh("python3 -m unittest -q tests.test_sub"),
		sh("sed -i 's/Adds and multiplies./Adds, subtracts and multiplies./' README.md"),
		sh("git diff README.md"),
		sh("expand -t 4 calc/ops.py > build/ops.py && cmp calc/ops.py build/ops.py && echo formatted"),
		sh("python3 -m py_compile calc/ops.py && echo ok"),
		sh("head -20 tests/test_ops.py"),
		sh("git add -A && git status --short"),
		sh("git -c user.email=t@example.com -c user.name=t commit -q -m 'calc: sub' && git log --oneline -3"),
		sh("git show --stat HEAD"),
		write("CHANGES.md", "# Changes\n\n- sub\n"),
		sh("cat CHANGES.md"),
		sh("rm -rf build && make build"),
		sh("python3 -m unittest -q"),
		sh("du -sh calc tests"),
		sh("tar -czf dist.tar.gz calc && tar -tzf dist.tar.gz | head"),
	}
}

// permissionCounter answers every permission request "allow once" and
// counts them, by tool.
type permissionCounter struct {
	mu    sync.Mutex
	asked []*acp.RequestPermissionRequest
}

func (p *permissionCounter) answer(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
	p.mu.Lock()
	p.asked = append(p.asked, r)
	p.mu.Unlock()
	for _, o := range r.Options {
		if o.Kind == acp.AllowOnce {
			return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: o.OptionID}}, nil
		}
	}
	return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}, nil
}

func (p *permissionCounter) requests() []*acp.RequestPermissionRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*acp.RequestPermissionRequest(nil), p.asked...)
}

func (p *permissionCounter) titles() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range p.asked {
		if r.ToolCall.Title != nil {
			out = append(out, *r.ToolCall.Title)
		}
	}
	return out
}

// registryHost serves pkg.tar.gz (a Python package) on a "public" address
// of this machine (sandboxtest.PublicAddr), the stand-in for a package
// registry: host:port.
func registryHost(t testing.TB) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	src := []byte("VERSION = \"1.0\"\n")
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "pkg/__init__.py", Mode: 0o644, Size: int64(len(src))}))
	_, err := tw.Write(src)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	ln, err := net.Listen("tcp", net.JoinHostPort(sandboxtest.PublicAddr(t), "0"))
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pkg.tar.gz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(buf.Bytes())
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// promptCount runs devSession in default mode through the built acpd
// (autoAllowConfined on or off) and returns the permission requests asked,
// and the results the model read.
func promptCount(t testing.TB, autoAllow bool, registry string) (asked []string, results []string) {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "calc")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	devProject(t, ws)
	host, _, _ := net.SplitHostPort(registry)
	conf := fmt.Sprintf("[tools]\nsandboxAllowedDomains = [%q]\n", host)
	if autoAllow {
		conf += "autoAllowConfined = true\n"
	}
	pc := &permissionCounter{}
	fc := &acptest.FakeClient{RequestPermissionFunc: pc.answer}
	home := t.TempDir()
	srv := modeltest.NewServer(t)
	d := launch(t, ws, t.TempDir(), []string{"--config", writeConfig(t, conf), "--provider", "openai", "--base-url", srv.BaseURL(),
		"--model", "scripted", "--sandbox", "required", "--approval-mode", "default"},
		[]string{"OPENAI_API_KEY=test-key", "HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, ".cache")}, fc, nil)
	d.model = srv
	steps := devSession(ws, registry)
	var rs []modeltest.Response
	for _, s := range steps {
		rs = append(rs, calls(s))
	}
	rs = append(rs, modeltest.Response{Text: "done"})
	d.model.Add(rs...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := d.cc.InitializeWith(ctx, localCaps)
	require.NoError(t, err)
	sid, err := d.cc.NewSession(ctx, d.cwd)
	require.NoError(t, err)
	resp, err := d.cc.Prompt(ctx, sid, "work on calc")
	require.NoError(t, err)
	require.Equal(t, acp.StopEndTurn, resp.StopReason)
	reqs := d.model.Requests()
	require.Len(t, reqs, len(steps)+1)
	for i := range steps {
		msgs := reqs[i+1].Messages
		results = append(results, msgs[len(msgs)-1].Text())
	}
	return pc.titles(), results
}

// TestE2E_AutoAllow_PromptCount: the scripted development session asks at
// most 16% as many permission questions with tools.autoAllowConfined as
// without, and every step succeeds both ways.
func TestE2E_AutoAllow_PromptCount(t *testing.T) {
	sandboxtest.RequirePrivateShm(t, acpdBin)
	for _, tool := range []string{"curl", "python3", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: %s is not installed", tool)
		}
	}
	registry := registryHost(t)
	without, r0 := promptCount(t, false, registry)
	with, r1 := promptCount(t, true, registry)
	t.Logf("permission requests: %d without autoAllowConfined, %d with (%d steps)", len(without), len(with), len(r0))
	for i := range r0 {
		assert.Equal(t, 0, exitCodeOr0(r0[i]), "step %d without: %s", i, r0[i])
		assert.Equal(t, 0, exitCodeOr0(r1[i]), "step %d with: %s", i, r1[i])
	}
	assert.GreaterOrEqual(t, len(r0), 30)
	require.NotEmpty(t, without)
	assert.LessOrEqual(t, float64(len(with)), 0.16*float64(len(without)), "asked with: %q\nwithout: %q", with, without)
}

// exitCodeOr0 is a shell result's exit code; 0 for another tool's result.
func exitCodeOr0(result string) int {
	if !strings.Contains(result, "Exit Code:") {
		return 0
	}
	return exitCode(result)
}

// BenchmarkPromptCount reports the permission requests of the scripted
// development session (devSession, 33 steps) in default mode without and
// with tools.autoAllowConfined, and their ratio. Run:
//
//	go test ./session -run '^$' -bench PromptCount -benchtime 1x
func BenchmarkPromptCount(b *testing.B) {
	sandboxtest.RequirePrivateShm(b, acpdBin)
	registry := registryHost(b)
	var without, with int
	for b.Loop() {
		w0, _ := promptCount(b, false, registry)
		w1, _ := promptCount(b, true, registry)
		without, with = len(w0), len(w1)
	}
	b.ReportMetric(float64(without), "prompts-without")
	b.ReportMetric(float64(with), "prompts-with")
	if without > 0 {
		b.ReportMetric(100*float64(with)/float64(without), "%-of-prompts")
	}
}

// TestE2E_AutoAllowConfined: in default mode with autoAllowConfined on, a
// confined command runs without a question yet cannot read the user's
// secrets, another session's transcript, acpd's configuration or the serve
// token, does not see the provider key, and cannot connect to a loopback
// port, a unix socket or a host not allowed; the transcript says which
// commands ran auto-allowed. With the sandbox off the same commands ask.
func TestE2E_AutoAllowConfined(t *testing.T) {
	sandboxtest.RequirePrivateShm(t, acpdBin)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("SKIPPED: curl is not installed")
	}
	w := newProxyWorld(t)
	l := newSbxLayout(t)
	secrets := map[string]string{
		".ssh/id_rsa":                            "ssh-secret-AUTOALLOW",
		".aws/credentials":                       "aws-secret-AUTOALLOW",
		".config/acpd/config.toml":               "# config-secret-AUTOALLOW\n",
		".local/state/acpd/server.token":         "token-secret-AUTOALLOW-0123456789",
		".local/state/acpd/sessions/OTHER.jsonl": "transcript-secret-AUTOALLOW",
	}
	for name, text := range secrets {
		p := filepath.Join(l.home, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	}
	pc := &permissionCounter{}
	fc := &acptest.FakeClient{RequestPermissionFunc: pc.answer}
	cfg := writeConfig(t, "[tools]\nautoAllowConfined = true\n")
	env := append(l.env(), "XDG_CONFIG_HOME="+filepath.Join(l.home, ".config"), "ACPD_SERVER_TOKEN=env-token-AUTOALLOW-0123456789")
	d := startDaemonEnv(t, l.ws, filepath.Join(l.home, ".config"), env, fc, nil,
		"--config", cfg, "--sandbox", "required", "--approval-mode", "default",
		"--data-dir", filepath.Join(l.home, ".local", "state", "acpd"))
	var cmds []string
	for name := range secrets {
		cmds = append(cmds, "cat "+filepath.Join(l.home, name)+"; echo rc=$?")
	}
	cmds = append(cmds,
		"echo key=[$OPENAI_API_KEY] token=[$ACPD_SERVER_TOKEN]",
		"curl -sS -m 5 --noproxy '*' http://"+w.local+"/direct; echo rc=$?",
		"curl -sS -m 20 http://127.0.0.2:"+strconv.Itoa(w.port)+"/proxied-loopback; echo rc=$?",
		"python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\""+w.sock+"\")'; echo rc=$?",
		"echo built > out.txt && cat out.txt",
	)
	_, results := shellTurn(t, d, localCaps, cmds)
	all := strings.Join(results, "\n")
	for _, text := range secrets {
		assert.NotContains(t, all, strings.TrimSpace(strings.TrimPrefix(text, "# ")))
	}
	assert.NotContains(t, all, "test-key")
	assert.NotContains(t, all, "env-token-AUTOALLOW")
	assert.Contains(t, all, "key=[] token=[]")
	assert.NotContains(t, all, "served:")
	assert.Contains(t, results[len(results)-1], "built")
	// No command asked before it ran; the one host not allowed
	// (127.0.0.2) was asked about while its command ran, allowed once by
	// the test's editor, and still refused: a loopback address is reached
	// only through a configured pattern.
	for _, r := range pc.requests() {
		assert.Equal(t, acp.PermissionSandboxNetwork, r.Meta[acp.MetaPermission], "a confined command asked: %q", pc.titles())
	}
	// The transcript names the sandbox as what allowed each command.
	entries, err := filepath.Glob(filepath.Join(l.home, ".local", "state", "acpd", "sessions", "*.jsonl"))
	require.NoError(t, err)
	decided := 0
	for _, e := range entries {
		if filepath.Base(e) == "OTHER.jsonl" {
			continue
		}
		b, err := os.ReadFile(e)
		require.NoError(t, err)
		decided += strings.Count(string(b), `"by":"sandbox","verdict":"allow"`)
	}
	// Read-only commands need no decider; the write at least was the
	// sandbox's to allow.
	assert.GreaterOrEqual(t, decided, 1, "commands recorded as allowed by the sandbox")
}
