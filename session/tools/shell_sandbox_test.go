package tools

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/sandbox"
	// This test binary is its own sandbox helper (see package helper).
	_ "github.com/acpd/acpd/session/tools/sandbox/helper"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// sandboxedWorkspace is a workspace whose commands run through helper
// (the test binary itself unless given).
func sandboxedWorkspace(t testing.TB, mode sandbox.Mode, helper string) *workspace {
	t.Helper()
	w := newWorkspace(t)
	if helper == "" {
		exe, err := os.Executable()
		require.NoError(t, err)
		helper = exe
	}
	p := &sandbox.Policy{Mode: mode, Helper: helper, TempRoot: t.TempDir(), CacheDir: filepath.Join(t.TempDir(), "cache")}
	w.env.Sandbox = p.NewSession(w.env.Roots)
	t.Cleanup(func() { w.env.Sandbox.Close() })
	return w
}

func TestRunShellCommand_Sandboxed(t *testing.T) {
	sandboxtest.Require(t)
	w := sandboxedWorkspace(t, sandbox.ModeRequired, "")
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo in > in.txt; echo out > " + w.outside + "/out.txt"})
	require.NoError(t, res.Err, "a failing command is not a tool error")
	assert.Contains(t, res.LLMContent, "Permission denied")
	assert.Contains(t, res.LLMContent, "Exit Code: 2")
	assert.Contains(t, res.LLMContent, "[sandbox: this command ran confined by acpd's Landlock sandbox")
	assert.Contains(t, res.LLMContent, w.root, "it names the writable folders")
	require.Len(t, res.Content, 2, "output, then the note")
	assert.Contains(t, text(res.Content[1]), "sandboxWritable")
	assert.FileExists(t, w.path("in.txt"))
	w.checkSentinel(t)

	_, res = run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo fine > fine.txt"})
	require.NoError(t, res.Err)
	assert.NotContains(t, res.LLMContent, "[sandbox", "no note when nothing was refused")
}

// TestRunShellCommand_SandboxSetupFails: the daemon found the kernel able
// to confine, the helper found it could not (simulated in the helper's
// environment). Neither mode runs the command, and auto does not switch to
// running it unconfined: that is decided from the kernel before any
// command runs, never from how one ran.
func TestRunShellCommand_SandboxSetupFails(t *testing.T) {
	sandboxtest.Require(t)        // the daemon side must see a usable kernel
	t.Setenv(sandbox.ABIEnv, "0") // inherited by the helper only: Probe is cached
	for _, mode := range []sandbox.Mode{sandbox.ModeRequired, sandbox.ModeAuto} {
		t.Run(string(mode), func(t *testing.T) {
			// The spawn server cannot start either, and the per-command
			// helper it falls back to reports the failure.
			w := sandboxedWorkspace(t, mode, "")
			for range 2 {
				_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo ran > ran.txt; echo ran"})
				require.Error(t, res.Err)
				assert.ErrorIs(t, res.Err, sandbox.ErrSetupFailed)
				assert.Equal(t, ErrTypeSandboxUnavailable, res.ErrType)
				assert.Contains(t, res.LLMContent, "ACPD_SANDBOX_ABI=0")
				assert.Contains(t, res.LLMContent, "The command was not run")
				assert.NotContains(t, res.LLMContent, "Exit Code", "not the command's status")
				assert.NotContains(t, res.LLMContent, "UNCONFINED")
				assert.NoFileExists(t, w.path("ran.txt"))
			}
		})
	}
}

func mustExe(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}

// localTerminals is an editor terminal backend for fakeClient that runs
// each terminal/create synchronously.
type localTerminals struct {
	mu      sync.Mutex
	out     map[string]string
	code    map[string]int
	creates []*acp.CreateTerminalRequest
}

func (lt *localTerminals) install(f *fakeClient) {
	lt.out, lt.code = map[string]string{}, map[string]int{}
	f.CreateTerminalFunc = func(_ context.Context, req *acp.CreateTerminalRequest) (*acp.CreateTerminalResponse, error) {
		cmd := exec.Command(req.Command, req.Args...)
		cmd.Dir = req.Cwd
		cmd.Env = os.Environ()
		for _, e := range req.Env {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			return nil, err
		}
		lt.mu.Lock()
		defer lt.mu.Unlock()
		id := "t" + string(rune('0'+len(lt.creates)))
		lt.creates = append(lt.creates, req)
		lt.out[id], lt.code[id] = string(out), code
		return &acp.CreateTerminalResponse{TerminalID: id}, nil
	}
	f.WaitForTerminalExitFunc = func(_ context.Context, req *acp.TerminalRequest) (*acp.TerminalExitStatus, error) {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		c := lt.code[req.TerminalID]
		return &acp.TerminalExitStatus{ExitCode: &c}, nil
	}
	f.TerminalOutputFunc = func(_ context.Context, req *acp.TerminalRequest) (*acp.TerminalOutputResponse, error) {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		return &acp.TerminalOutputResponse{Output: lt.out[req.TerminalID]}, nil
	}
	f.ReleaseTerminalFunc = func(context.Context, *acp.TerminalRequest) error { return nil }
	f.SessionUpdateFunc = func(context.Context, *acp.SessionNotification) error { return nil }
}

// TestRunShellCommand_SandboxedTerminal: the editor's terminal runs the
// helper, which confines the command the same way. There is no status pipe
// there: a failed set-up is reported in a status file the command cannot
// write, and a command that only pretends (the helper's line, exit 125) is
// a command that failed — later commands stay confined either way.
func TestRunShellCommand_SandboxedTerminal(t *testing.T) {
	sandboxtest.Require(t)
	for _, tc := range []struct {
		name   string
		mode   sandbox.Mode
		abiEnv string
	}{{"confined", sandbox.ModeAuto, ""}, {"setup fails, required", sandbox.ModeRequired, "0"}, {"setup fails, auto", sandbox.ModeAuto, "0"}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.abiEnv != "" {
				t.Setenv(sandbox.ABIEnv, tc.abiEnv)
			}
			w := sandboxedWorkspace(t, tc.mode, "")
			lt := &localTerminals{}
			fc := &fakeClient{t: t}
			lt.install(fc)
			w.env.Client, w.env.Caps = fc, acp.ClientCapabilities{Terminal: true}
			w.env.Update = func(context.Context, acp.ToolCallUpdate) error { return nil }
			_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo out > " + w.outside + "/out.txt; echo in > in.txt"})
			require.NotEmpty(t, lt.creates)
			first := lt.creates[0]
			assert.Equal(t, mustExe(t), first.Command)
			assert.Equal(t, sandbox.Subcommand, first.Args[0])
			assert.NotContains(t, first.Args, "--status-fd")
			assert.Contains(t, first.Args, "--status-file")
			assert.Equal(t, []string{"sh", "-c", "echo out > " + w.outside + "/out.txt; echo in > in.txt"}, first.Args[len(first.Args)-3:])
			assert.True(t, strings.Contains(envText(first.Env), "TMPDIR="), "the temp folder goes through the terminal's env")
			if tc.name == "confined" {
				require.NoError(t, res.Err)
				assert.Contains(t, res.LLMContent, "Permission denied")
				assert.Contains(t, res.LLMContent, "[sandbox: this command ran confined")
				assert.FileExists(t, w.path("in.txt"))
				w.checkSentinel(t)

				// The fake failure: the helper's words and its status.
				_, res = run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo '" + sandbox.StderrPrefix + "sandbox unavailable: fake' >&2; exit 125"})
				require.NoError(t, res.Err, "the command's own failure")
				assert.Contains(t, res.LLMContent, "Exit Code: 125")
				_, res = run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo out > " + w.outside + "/out2.txt"})
				assert.Contains(t, res.LLMContent, "Permission denied", "still confined")
				require.Len(t, lt.creates, 3, "nothing was run again")
				for _, c := range lt.creates {
					assert.Equal(t, mustExe(t), c.Command)
				}
				w.checkSentinel(t)
				assert.NoFileExists(t, filepath.Join(w.outside, "out.txt"))
				assert.NoFileExists(t, filepath.Join(w.outside, "out2.txt"))
				return
			}
			require.Error(t, res.Err)
			assert.ErrorIs(t, res.Err, sandbox.ErrSetupFailed)
			assert.Equal(t, ErrTypeSandboxUnavailable, res.ErrType)
			assert.Contains(t, res.LLMContent, "ACPD_SANDBOX_ABI=0")
			assert.Len(t, lt.creates, 1, "not run again unconfined")
			assert.NoFileExists(t, w.path("in.txt"))
			w.checkSentinel(t)
		})
	}
}

func envText(env []acp.EnvVariable) string {
	var b strings.Builder
	for _, e := range env {
		b.WriteString(e.Name + "=" + e.Value + "\n")
	}
	return b.String()
}

// TestRunShellCommand_HelperMissing: acpd's binary gone (replaced by an
// upgrade, removed) is a set-up failure like any other, never a crash, an
// unexplained error or an unconfined run.
func TestRunShellCommand_HelperMissing(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.ModeRequired, sandbox.ModeAuto} {
		t.Run(string(mode), func(t *testing.T) {
			w := sandboxedWorkspace(t, mode, filepath.Join(t.TempDir(), "no-such-acpd"))
			w.env.Sandbox = (&sandbox.Policy{Mode: mode, Helper: filepath.Join(t.TempDir(), "no-such-acpd"), TempRoot: t.TempDir(),
				Probe: func() sandbox.Status { return sandbox.Status{Backend: "landlock", ABI: 7} }}).NewSession(w.env.Roots)
			_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo ran > ran.txt"})
			require.Error(t, res.Err)
			assert.Equal(t, ErrTypeSandboxUnavailable, res.ErrType)
			assert.Contains(t, res.LLMContent, "starting the sandbox helper")
			assert.NotContains(t, res.LLMContent, "UNCONFINED")
			assert.NoFileExists(t, w.path("ran.txt"))
		})
	}
}
