package tools

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/shellline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunShellCommand_Local(t *testing.T) {
	w := newWorkspace(t)
	require.NoError(t, os.Mkdir(w.path("sub"), 0o755))
	tests := []struct {
		name      string
		args      map[string]any
		max       int
		title     string
		wantLLM   []string
		wantShown string
	}{
		{name: "stdout", args: map[string]any{"command": "echo hello"}, title: "echo hello",
			wantLLM: []string{"Command: echo hello", "Output: hello", "Exit Code: 0"}, wantShown: "hello\n"},
		{name: "stderr interleaved and exit code", args: map[string]any{"command": "echo out; echo err >&2; exit 3"}, title: "echo out; echo err >&2; exit 3",
			wantLLM: []string{"out\nerr", "Exit Code: 3"}, wantShown: "out\nerr\n\n[exit code 3]"},
		{name: "directory", args: map[string]any{"command": "pwd", "directory": w.path("sub")}, title: "pwd [in " + w.path("sub") + "]",
			wantLLM: []string{"Output: " + w.path("sub"), "Directory: " + w.path("sub")}},
		{name: "signal", args: map[string]any{"command": "kill -TERM $$"}, title: "kill -TERM $$",
			wantLLM: []string{"Signal: terminated"}},
		{name: "output truncated keeping the end", args: map[string]any{"command": "seq 1 20000"}, max: 64, title: "seq 1 20000",
			wantLLM: []string{"[output truncated: first", "20000"}},
		{name: "empty output", args: map[string]any{"command": "true"}, title: "true", wantLLM: []string{"Output: (empty)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := *w.env
			env.MaxOutputBytes = tt.max
			c, res := run(t, t.Context(), &env, NameRunShellCommand, tt.args)
			require.NoError(t, res.Err)
			assert.Equal(t, tt.title, c.Title())
			for _, s := range tt.wantLLM {
				assert.Contains(t, res.LLMContent, s)
			}
			require.Len(t, res.Content, 1)
			if tt.wantShown != "" {
				assert.Equal(t, tt.wantShown, text(res.Content[0]))
			}
		})
	}
}

func TestRunShellCommand_Confirmation(t *testing.T) {
	w := newWorkspace(t)
	c, err := tool(t, NameRunShellCommand).Build(w.env, args(t, map[string]any{"command": "npm test && git push", "description": "test and push"}))
	require.NoError(t, err)
	conf := c.Confirmation()
	assert.Equal(t, ConfirmExec, conf.Kind)
	assert.Equal(t, "npm test, git push", conf.Label)
	assert.False(t, conf.NoAlways)
	assert.Equal(t, shellline.Write, conf.Shell)
	require.Len(t, conf.Content, 1)
	assert.Equal(t, "npm test && git push\n\ntest and push", text(conf.Content[0]))
	assert.Nil(t, c.Locations())
}

func TestRunShellCommand_Timeout(t *testing.T) {
	w := newWorkspace(t)
	start := time.Now()
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo started; sleep 30", "timeout": 100})
	require.Error(t, res.Err)
	assert.Equal(t, ErrTypeTimeout, res.ErrType)
	assert.Contains(t, res.LLMContent, "timed out after 100ms")
	assert.Contains(t, res.LLMContent, "started")
	assert.Less(t, time.Since(start), 5*time.Second)

	env := *w.env
	env.ShellTimeout = 100 * time.Millisecond
	_, res = run(t, t.Context(), &env, NameRunShellCommand, map[string]any{"command": "sleep 30"})
	assert.Equal(t, ErrTypeTimeout, res.ErrType)
}

// groupMembers lists live (non-zombie) processes in process group pgid.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces.
		rest := b[bytes.LastIndexByte(b, ')')+2:]
		f := strings.Fields(string(rest))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestRunShellCommand_CancelKillsProcessGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	tests := []struct{ name, command string }{
		{"sleep", "echo $$ > pid; sleep 30"},
		{"background child", "echo $$ > pid; sleep 30 & sleep 30; wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkspace(t)
			c, err := tool(t, NameRunShellCommand).Build(w.env, args(t, map[string]any{"command": tt.command}))
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan Result, 1)
			go func() { done <- c.Execute(ctx, w.env) }()

			var pgid int
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(w.path("pid"))
				if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
					return false
				}
				pgid, err = strconv.Atoi(strings.TrimSpace(string(b)))
				return err == nil
			}, 10*time.Second, 5*time.Millisecond)
			wantMembers := strings.Count(tt.command, "sleep 30") + 1
			require.Eventually(t, func() bool { return len(groupMembers(t, pgid)) >= wantMembers }, 10*time.Second, 5*time.Millisecond)

			cancelled := time.Now()
			cancel()
			select {
			case res := <-done:
				assert.Equal(t, ErrTypeCancelled, res.ErrType)
				assert.ErrorIs(t, res.Err, context.Canceled)
			case <-time.After(time.Second):
				t.Fatal("Execute did not return within 1s of cancel")
			}
			require.Eventually(t, func() bool { return len(groupMembers(t, pgid)) == 0 },
				time.Second-time.Since(cancelled), 5*time.Millisecond, "process group still alive")
		})
	}
}

func TestRunShellCommand_BackgroundLeftoversKilled(t *testing.T) {
	w := newWorkspace(t)
	done := make(chan Result, 1)
	go func() {
		_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo $$ > pid; sleep 30 & echo started"})
		done <- res
	}()
	select {
	case res := <-done:
		require.NoError(t, res.Err)
		assert.Contains(t, res.LLMContent, "started")
	case <-time.After(5 * time.Second):
		t.Fatal("a background child kept the command running")
	}
	b, err := os.ReadFile(w.path("pid"))
	require.NoError(t, err)
	pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(groupMembers(t, pgid)) == 0 }, time.Second, 5*time.Millisecond)
}

func TestRunShellCommand_ContentIsText(t *testing.T) {
	w := newWorkspace(t)
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "printf 'a\\nb'"})
	require.NoError(t, res.Err)
	require.Len(t, res.Content, 1)
	assert.Equal(t, "content", res.Content[0].Type)
	assert.Equal(t, acp.TextContent("a\nb"), res.Content[0])
}
