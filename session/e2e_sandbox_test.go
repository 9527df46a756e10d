package session_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/instructions/gittest"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// The shell sandbox end to end: the built acpd in yolo mode runs commands
// the way a model would send them, and the file system and the listeners
// are checked afterwards.

// sbxLayout is a workspace with neighbours to attack: another project beside
// it, a home folder, a folder in /tmp.
type sbxLayout struct {
	root, ws, sibling, home, tmp, cache string
}

func newSbxLayout(t *testing.T) *sbxLayout {
	t.Helper()
	root := t.TempDir()
	l := &sbxLayout{
		root: root, ws: filepath.Join(root, "ws"), sibling: filepath.Join(root, "sibling"),
		home: filepath.Join(root, "home"), cache: filepath.Join(root, "cache"),
	}
	tmp, err := os.MkdirTemp("/tmp", "acpd-sbx-e2e-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(tmp) })
	l.tmp = tmp
	for _, d := range []string{l.ws, filepath.Join(l.ws, "sub"), l.sibling, l.home} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for _, d := range []string{filepath.Join(l.ws, "sub"), l.sibling, l.home, l.tmp} {
		require.NoError(t, os.WriteFile(filepath.Join(d, "existing.txt"), []byte("keep me\n"), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(l.ws, "src.txt"), []byte("source\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(l.home, ".bashrc"), []byte("# rc\n"), 0o644))
	return l
}

// env is the daemon's environment: its own HOME and cache home.
func (l *sbxLayout) env() []string {
	return []string{"HOME=" + l.home, "XDG_CACHE_HOME=" + l.cache}
}

// writeCommands are the ways a model writes files, all aimed at dir (a
// shell word, "$HOME" allowed); tag keeps the mv sources apart.
func writeCommands(t *testing.T, ws, dir, tag string) []string {
	t.Helper()
	mvSrc := filepath.Join(ws, "mv-"+tag+".txt")
	require.NoError(t, os.WriteFile(mvSrc, []byte("move me\n"), 0o644))
	cmds := []string{
		"echo x > " + dir + "/redir.txt",
		"touch " + dir + "/touch.txt",
		"cp " + ws + "/src.txt " + dir + "/cp.txt",
		"mv " + mvSrc + " " + dir + "/mv.txt",
		"ln -s " + ws + "/src.txt " + dir + "/symlink.txt",
		"ln " + ws + "/src.txt " + dir + "/hardlink.txt",
		"mkdir " + dir + "/newdir",
		"truncate -s 0 " + dir + "/existing.txt",
		"echo appended >> " + dir + "/existing.txt",
		"rm " + dir + "/existing.txt",
		`python3 -c "open('` + dir + `/py.txt', 'w').write('x')"`,
		"(echo x > " + dir + "/background.txt) & wait",
		"setsid sh -c 'echo x > " + dir + "/setsid.txt'; sleep 0.2",
	}
	if _, err := exec.LookPath("node"); err == nil {
		cmds = append(cmds, `node -e "require('fs').writeFileSync('`+dir+`/node.txt', 'x')"`)
	} else {
		t.Log("node not found: the node -e write is not tested")
	}
	return cmds
}

// snapshot lists every path under dir with its size and content.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		line := p
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += " " + strconv.Quote(string(b))
		} else if d.Type()&os.ModeSymlink != 0 {
			line += " symlink"
		}
		out = append(out, line)
		return nil
	}))
	return out
}

// shellTurn runs cmds, one run_shell_command call per model response, in
// one prompt of a new session, and returns the tool results as the model
// saw them.
func shellTurn(t *testing.T, d *daemon, caps acp.ClientCapabilities, cmds []string) (sid string, results []string) {
	t.Helper()
	var rs []modeltest.Response
	for _, c := range cmds {
		rs = append(rs, calls(call("run_shell_command", map[string]any{"command": c, "timeout": 600000})))
	}
	rs = append(rs, modeltest.Response{Text: "done"})
	first := len(d.model.Requests())
	d.model.Add(rs...)
	// Generous: a cold `go test` compiles the standard library into
	// acpd's empty cache, and the CI box has two busy cores.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	_, err := d.cc.InitializeWith(ctx, caps)
	require.NoError(t, err)
	sid, err = d.cc.NewSession(ctx, d.cwd)
	require.NoError(t, err)
	resp, err := d.cc.Prompt(ctx, sid, "run them")
	require.NoError(t, err)
	require.Equal(t, acp.StopEndTurn, resp.StopReason)
	reqs := d.model.Requests()
	require.Len(t, reqs, first+len(cmds)+1)
	for i := range cmds {
		msgs := reqs[first+i+1].Messages
		results = append(results, msgs[len(msgs)-1].Text())
	}
	return sid, results
}

var exitCodeRe = regexp.MustCompile(`(?m)^Exit Code: (\d+)$`)

func exitCode(result string) int {
	m := exitCodeRe.FindStringSubmatch(result)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

var (
	localCaps    = acp.ClientCapabilities{}
	terminalCaps = acp.ClientCapabilities{Terminal: true}
)

// TestE2E_Sandbox_WritesOutsideFail: every way of writing outside the
// workspace fails and leaves nothing behind — into another project beside
// it, into $HOME, into /tmp — while the same commands inside succeed.
func TestE2E_Sandbox_WritesOutsideFail(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	l := newSbxLayout(t)
	targets := []struct{ name, word, dir string }{
		{"sibling project", l.sibling, l.sibling},
		{"home", "$HOME", l.home},
		{"tmp", l.tmp, l.tmp},
	}
	var cmds []string
	var owner []int
	before := map[int][]string{}
	for i, tg := range targets {
		c := writeCommands(t, l.ws, tg.word, tg.name[:3])
		cmds = append(cmds, c...)
		for range c {
			owner = append(owner, i)
		}
	}
	for i, tg := range targets {
		before[i] = snapshot(t, tg.dir)
	}
	wsBefore := snapshot(t, l.ws)
	d := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), nil, nil)
	_, results := shellTurn(t, d, localCaps, cmds)
	for i, r := range results {
		assert.Contains(t, r, "Permission denied", "%s: %s", targets[owner[i]].name, r)
		if !strings.Contains(cmds[i], "&") && !strings.HasPrefix(cmds[i], "setsid") {
			// (else the shell's own status is wait's or sleep's)
			assert.NotZero(t, exitCode(r), "%s: %s", targets[owner[i]].name, r)
		}
		assert.Contains(t, r, "[sandbox: this command ran confined", "the model is told why: %s", r)
		assert.Contains(t, r, "sandboxWritable", "and how the user can allow more")
	}
	time.Sleep(300 * time.Millisecond) // anything left running in the background
	for i, tg := range targets {
		assert.Equal(t, before[i], snapshot(t, tg.dir), "nothing changed in %s", tg.name)
	}
	assert.Equal(t, wsBefore, snapshot(t, l.ws), "failed moves leave their source in the workspace")
	_, err := os.Stat(filepath.Join(l.home, ".bashrc"))
	assert.NoError(t, err)
}

// TestE2E_Sandbox_WritesInsideSucceed: the same commands work inside the
// workspace, and so do git and go test (with the tool caches redirected).
func TestE2E_Sandbox_WritesInsideSucceed(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	l := newSbxLayout(t)
	sub := filepath.Join(l.ws, "sub")
	cmds := writeCommands(t, l.ws, sub, "in")
	// rm removed existing.txt; the appends before it wrote it.
	cmds = append(cmds,
		`echo "tmp=$TMPDIR" && touch "$TMPDIR/scratch" && test -f "$TMPDIR/scratch"`,
		"echo quiet > /dev/null && head -c 4 /dev/zero | wc -c",
		"git init -q repo && cd repo && echo a > a.txt && git add -A && git -c user.name=t -c user.email=t@example.com commit -qm first && git log --oneline | wc -l",
	)
	d := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), nil, nil)
	_, results := shellTurn(t, d, localCaps, cmds)
	for _, r := range results {
		assert.Equal(t, 0, exitCode(r), r)
		assert.NotContains(t, r, "[sandbox:", r)
	}
	for _, name := range []string{"redir.txt", "touch.txt", "cp.txt", "mv.txt", "symlink.txt", "hardlink.txt", "newdir", "py.txt", "background.txt", "setsid.txt"} {
		_, err := os.Lstat(filepath.Join(sub, name))
		assert.NoError(t, err, name)
	}
	_, err := os.Stat(filepath.Join(sub, "existing.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist, "rm inside the workspace works")
	assert.Contains(t, results[len(results)-3], "tmp=/", "TMPDIR is set")
	assert.NotContains(t, results[len(results)-3], "tmp="+os.TempDir()+"\n", "TMPDIR is private")
	assert.Contains(t, results[len(results)-2], "Output: 4")
	assert.Contains(t, results[len(results)-1], "Output: 1", "git committed")
}

// TestE2E_Sandbox_GoTest builds and tests a small module inside the
// workspace: the Go build cache is pointed at acpd's own cache folder.
func TestE2E_Sandbox_GoTest(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	l := newSbxLayout(t)
	// The tool caches are one folder per workspace, so the workspace is
	// one folder that stays, and the daemon's real cache home is kept:
	// acpd's sandbox cache (…/acpd/sandbox/acpd-e2e-gotest-…/go-build)
	// stays warm between test runs, where a cold one costs minutes of
	// compiling the standard library. HOME is the test's own, and
	// unwritable to the command. The files are written only when they
	// differ, by rename, so concurrent runs never see half a file.
	ws := filepath.Join(os.TempDir(), "acpd-e2e-gotest-"+strconv.Itoa(os.Getuid()))
	mod := filepath.Join(ws, "mod")
	require.NoError(t, os.MkdirAll(mod, 0o755))
	for name, text := range map[string]string{
		"go.mod":    "module example.com/m\n\ngo 1.22\n",
		"m.go":      "package m\n\nfunc Add(a, b int) int { return a + b }\n",
		"m_test.go": "package m\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n",
	} {
		p := filepath.Join(mod, name)
		if b, err := os.ReadFile(p); err == nil && string(b) == text {
			continue
		}
		f, err := os.CreateTemp(mod, ".tmp-")
		require.NoError(t, err)
		_, err = f.WriteString(text)
		require.NoError(t, errors.Join(err, f.Close()))
		require.NoError(t, os.Rename(f.Name(), p))
	}
	d := startDaemonEnv(t, ws, t.TempDir(), []string{"HOME=" + l.home, "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local"}, nil, nil)
	_, results := shellTurn(t, d, localCaps, []string{
		"cd mod && " + goBin + " env GOCACHE && " + goBin + " test -count=1 ./...",
	})
	assert.Equal(t, 0, exitCode(results[0]), results[0])
	assert.Contains(t, results[0], "ok  \texample.com/m")
	assert.Regexp(t, `/acpd/sandbox/acpd-e2e-gotest-\d+-[0-9a-f]{16}/go-build\n`, results[0], "GOCACHE is acpd's, the workspace's own")
}

// TestE2E_Sandbox_Network: with sandboxNetwork = false a TCP connect and a
// UDP send to loopback listeners fail; with the default both get through.
func TestE2E_Sandbox_Network(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed for the network clients: %v", err)
	}
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { tcp.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { udp.Close() })
	var received atomic.Int32
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			received.Add(1)
		}
	}()
	tcpPort, udpPort := tcp.Addr().(*net.TCPAddr).Port, udp.LocalAddr().(*net.UDPAddr).Port
	cmds := []string{
		fmt.Sprintf(`python3 -c "import socket; socket.create_connection(('127.0.0.1', %d), 5).close(); print('tcp connected')"`, tcpPort),
		fmt.Sprintf(`python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', %d)); print('udp sent')"`, udpPort),
	}

	l := newSbxLayout(t)
	denied := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), nil, nil, "--config", writeConfig(t, "[tools]\nsandboxNetwork = false\n"))
	_, results := shellTurn(t, denied, localCaps, cmds)
	for _, r := range results {
		assert.NotZero(t, exitCode(r), r)
		assert.Contains(t, r, "PermissionError", r)
		assert.Contains(t, r, "Network access is denied", "the model is told")
	}
	time.Sleep(200 * time.Millisecond)
	assert.Zero(t, accepted.Load(), "no TCP connection got through")
	assert.Zero(t, received.Load(), "no UDP datagram got through")

	allowed := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), nil, nil)
	_, results = shellTurn(t, allowed, localCaps, cmds)
	assert.Contains(t, results[0], "tcp connected")
	assert.Contains(t, results[1], "udp sent")
	assert.Eventually(t, func() bool { return accepted.Load() == 1 && received.Load() == 1 }, 5*time.Second, 10*time.Millisecond)
}

func writeConfig(t testing.TB, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

// TestE2E_Sandbox_EditorTerminal: a command sent to the editor's terminal
// is the acpd helper wrapping sh, and is confined the same way.
func TestE2E_Sandbox_EditorTerminal(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	l := newSbxLayout(t)
	ed := newEditor(t)
	d := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), ed.fc, nil)
	before := snapshot(t, l.sibling)
	_, results := shellTurn(t, d, terminalCaps, []string{
		"echo x > " + l.sibling + "/evil.txt",
		"echo x > " + l.ws + "/fine.txt && echo wrote",
	})
	require.NoError(t, d.cc.End())
	assert.NotZero(t, exitCode(results[0]), results[0])
	assert.Contains(t, results[0], "Permission denied")
	assert.Contains(t, results[0], "[sandbox: this command ran confined")
	assert.Equal(t, 0, exitCode(results[1]), results[1])
	assert.Equal(t, before, snapshot(t, l.sibling))
	_, err := os.Stat(filepath.Join(l.ws, "fine.txt"))
	assert.NoError(t, err)
	tc := ed.terms.Calls()
	require.NotEmpty(t, tc)
	create := tc[0]
	assert.Equal(t, acpdBin, create.Command, "the editor runs acpd's helper")
	require.NotEmpty(t, create.Args)
	assert.Equal(t, "__sandbox-exec", create.Args[0])
	assert.Equal(t, []string{"--", "sh", "-c", "echo x > " + l.sibling + "/evil.txt"}, create.Args[len(create.Args)-4:])
}

// TestE2E_Sandbox_DaemonKeepsWriting: the daemon is never confined — after
// sandboxed commands it still writes its transcript and its log outside the
// workspace.
func TestE2E_Sandbox_DaemonKeepsWriting(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	l := newSbxLayout(t)
	data, logFile := filepath.Join(l.root, "data"), filepath.Join(l.root, "logs", "acpd.log")
	d := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), nil, nil, "--data-dir", data, "--log-file", logFile, "--trace")
	sid, results := shellTurn(t, d, localCaps, []string{"echo x > " + l.sibling + "/evil.txt", "echo inside > in.txt"})
	require.NotZero(t, exitCode(results[0]))
	logSize := fileSize(t, logFile)
	d.model.Add(modeltest.Response{Text: "second answer"})
	resp, err := d.cc.Prompt(ctxFor(t), sid, "second prompt after sandboxed commands")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	transcript, err := os.ReadFile(filepath.Join(data, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	assert.Contains(t, string(transcript), "second prompt after sandboxed commands")
	assert.Contains(t, string(transcript), "second answer")
	assert.Greater(t, fileSize(t, logFile), logSize, "the log keeps growing")
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return fi.Size()
}

// TestE2E_Sandbox_Off: sandbox = "off" runs commands as before the sandbox.
func TestE2E_Sandbox_Off(t *testing.T) {
	t.Parallel()
	l := newSbxLayout(t)
	d := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), nil, nil, "--sandbox", "off")
	_, results := shellTurn(t, d, localCaps, []string{"echo x > " + l.sibling + "/allowed.txt && echo TMPDIR=${TMPDIR:-unset}"})
	assert.Equal(t, 0, exitCode(results[0]), results[0])
	assert.NotContains(t, results[0], "[sandbox")
	tmpdir := os.Getenv("TMPDIR")
	if tmpdir == "" {
		tmpdir = "unset"
	}
	assert.Contains(t, results[0], "TMPDIR="+tmpdir+"\n", "the environment is the daemon's")
	_, err := os.Stat(filepath.Join(l.sibling, "allowed.txt"))
	assert.NoError(t, err)
}

// TestE2E_Sandbox_NoLandlock simulates a kernel without Landlock
// (ACPD_SANDBOX_ABI=0): mode auto warns and runs the command unconfined,
// mode required refuses to run it and says why.
func TestE2E_Sandbox_NoLandlock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode string
		caps acp.ClientCapabilities
	}{{"auto", localCaps}, {"required", localCaps}, {"auto", terminalCaps}, {"required", terminalCaps}} {
		name := tc.mode + " local"
		if tc.caps.Terminal {
			name = tc.mode + " terminal"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l := newSbxLayout(t)
			logFile := filepath.Join(l.root, "acpd.log")
			env := append(l.env(), "ACPD_SANDBOX_ABI=0")
			d := startDaemonEnv(t, l.ws, t.TempDir(), env, nil, nil, "--sandbox", tc.mode, "--log-file", logFile)
			target := filepath.Join(l.sibling, "written.txt")
			_, results := shellTurn(t, d, tc.caps, []string{"echo x > " + target + " && echo ran", "echo second"})
			log, err := os.ReadFile(logFile)
			require.NoError(t, err)
			assert.Contains(t, string(log), "shell sandbox unavailable", "one warning at start-up, in the log")
			assert.Contains(t, string(log), "ACPD_SANDBOX_ABI=0")
			_, statErr := os.Stat(target)
			if tc.mode == "auto" {
				assert.Equal(t, 0, exitCode(results[0]), results[0])
				assert.Contains(t, results[0], "ran")
				assert.Contains(t, results[0], "UNCONFINED", "the model and user are warned")
				assert.NotContains(t, results[1], "UNCONFINED", "once per session")
				assert.Equal(t, 1, strings.Count(string(log), "shell sandbox unavailable"))
				assert.NoError(t, statErr, "the command ran as before")
				return
			}
			for _, r := range results {
				assert.Equal(t, -1, exitCode(r), "no exit status: it did not run: %s", r)
				assert.Contains(t, r, "sandbox unavailable")
				assert.Contains(t, r, "The command was not run")
				assert.Contains(t, r, `sandbox = "auto"`)
			}
			assert.ErrorIs(t, statErr, os.ErrNotExist, "refused: nothing written")
			failed := toolText(d.cc.Updates(), acp.StatusFailed)
			assert.Len(t, failed, 2, "both calls failed")
			assert.True(t, slices.ContainsFunc(failed, func(s string) bool { return strings.Contains(s, "ACPD_SANDBOX_ABI=0") }))
		})
	}
}

// TestE2E_Sandbox_LinkedWorktree: in a linked worktree (its git folder lives
// in the main repository, outside the workspace) git commit works, while the
// main repository's own files stay out of reach.
func TestE2E_Sandbox_LinkedWorktree(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	l := newSbxLayout(t)
	main, wt := filepath.Join(l.root, "main"), filepath.Join(l.root, "wt")
	require.NoError(t, os.MkdirAll(main, 0o755))
	gittest.Git(t, main, "init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(main, "a.txt"), []byte("a\n"), 0o644))
	gittest.Git(t, main, "add", "-A")
	gittest.Git(t, main, "commit", "-qm", "first")
	gittest.Git(t, main, "worktree", "add", "-q", "-b", "feature", wt)
	before := snapshot(t, main)
	before = slices.DeleteFunc(before, func(p string) bool { return strings.Contains(p, string(filepath.Separator)+".git") })

	d := startDaemonEnv(t, wt, t.TempDir(), l.env(), nil, nil)
	_, results := shellTurn(t, d, localCaps, []string{
		"echo b > b.txt && git add b.txt && git -c user.name=t -c user.email=t@example.com commit -qm second && git log --oneline | wc -l",
		"echo x > " + main + "/evil.txt",
	})
	assert.Equal(t, 0, exitCode(results[0]), results[0])
	assert.Contains(t, results[0], "Output: 2", "committed in the worktree")
	assert.Contains(t, results[1], "Permission denied", "the main work tree is not writable")
	after := slices.DeleteFunc(snapshot(t, main), func(p string) bool { return strings.Contains(p, string(filepath.Separator)+".git") })
	assert.Equal(t, before, after)
}
