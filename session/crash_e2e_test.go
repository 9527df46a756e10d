package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/store"
)

// crashDaemon is the built acpd on a given data directory. Unlike
// startDaemon's, it may be killed: its cleanup only checks a daemon that is
// still running.
type crashDaemon struct {
	cc     *acptest.ClientConn
	model  *modeltest.Server
	cmd    *exec.Cmd
	killed bool
}

func startCrashDaemon(t *testing.T, fc *acptest.FakeClient, dataDir string, responses ...modeltest.Response) *crashDaemon {
	t.Helper()
	srv := modeltest.NewServer(t, responses...)
	cmd := exec.Command(acpdBin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(),
		"--model", "scripted", "--data-dir", dataDir, "--log-level", "warn", "--approval-mode", "yolo")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "OPENAI_API_KEY=test-key")
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &testLog{t: t}
	require.NoError(t, cmd.Start())
	d := &crashDaemon{model: srv, cmd: cmd}
	d.cc = acptest.NewClientConn(t, fc, stdout, stdin)
	t.Cleanup(func() {
		if d.killed {
			return
		}
		_ = stdin.Close()
		acptest.WaitExit(t, cmd, 10*time.Second)
	})
	return d
}

// initialize initializes without the terminal capability (shell commands run
// as local processes).
func (d *crashDaemon) initialize(t *testing.T) {
	t.Helper()
	require.NoError(t, d.cc.Call(t.Context(), acp.MethodInitialize, acp.InitializeRequest{
		ProtocolVersion:    acp.ProtocolVersion,
		ClientCapabilities: acp.ClientCapabilities{FS: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}},
	}, nil))
}

// kill sends SIGKILL and reaps the process.
func (d *crashDaemon) kill(t *testing.T) {
	t.Helper()
	d.killed = true
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGKILL))
	err := d.cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.Equal(t, syscall.SIGKILL, ws.Signal())
}

func updateDesc(u acp.SessionUpdate) string {
	switch u.Kind {
	case acp.UpdateUserMessageChunk, acp.UpdateAgentMessageChunk, acp.UpdateAgentThoughtChunk:
		return u.Kind + ":" + u.Content.Text
	case acp.UpdateToolCall:
		return fmt.Sprintf("%s:%s:%s", u.Kind, u.ToolCall.ToolCallID, u.ToolCall.Status)
	case acp.UpdateToolCallUpdate:
		return fmt.Sprintf("%s:%s:%s", u.Kind, u.ToolCallUpdate.ToolCallID, u.ToolCallUpdate.Status)
	case acp.UpdateCurrentMode:
		return u.Kind + ":" + u.CurrentModeID
	}
	return u.Kind
}

// requireWholeRecords checks the transcript a killed daemon left: every
// line is one complete JSON record ending in a newline, and the store
// loads all of them without a warning.
func requireWholeRecords(t *testing.T, dataDir, sid string) []store.Record {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	require.True(t, bytes.HasSuffix(raw, []byte("\n")), "transcript ends with a whole line")
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	for i, l := range lines {
		require.True(t, json.Valid(l), "line %d is not a whole record: %q", i+1, l)
	}
	st, err := store.Open(dataDir, store.Options{})
	require.NoError(t, err)
	tr, err := st.Load(sid)
	require.NoError(t, err)
	require.Empty(t, tr.Warnings)
	require.Len(t, tr.Records, len(lines))
	return tr.Records
}

// The daemon is killed with SIGKILL in the middle of a turn, during a tool
// call and during a model stream. A new daemon on the same data directory
// loads the session: every record written before the kill is replayed (the
// unfinished tool call closed as failed), nothing partial, no error, and
// the conversation goes on.
func TestCrash_SIGKILLMidTurn(t *testing.T) {
	sleepArgs, _ := json.Marshal(map[string]string{"command": "sleep 30"})
	cases := []struct {
		name    string
		script  []modeltest.Response
		killAt  func(u acp.SessionUpdate) bool
		kinds   []store.Kind // the records on disk at the kill
		replay  func(toolID string) []string
		history []string // role:text of the next request, before the new prompt
	}{
		{
			name:   "during a tool call",
			script: []modeltest.Response{{ToolCalls: []modeltest.ToolCall{{ID: "call_sleep", Name: "run_shell_command", Arguments: string(sleepArgs)}}}},
			killAt: func(u acp.SessionUpdate) bool {
				return u.Kind == acp.UpdateToolCall && u.ToolCall.Status == acp.StatusInProgress
			},
			// The response's usage (estimated: this server reports none)
			// is recorded as soon as the response is complete.
			kinds: []store.Kind{store.KindMeta, store.KindMode, store.KindModel, store.KindUser, store.KindUsage, store.KindToolCalls, store.KindToolCall},
			replay: func(id string) []string {
				return []string{"current_mode_update:yolo", "user_message_chunk:start",
					"tool_call:" + id + ":in_progress", "tool_call_update:" + id + ":failed"}
			},
			history: []string{"user:start", "assistant:", "tool:" + store.InterruptedToolResult},
		},
		{
			name:   "during a model stream",
			script: []modeltest.Response{{Text: "a partial answer that never ends", Hang: true}},
			killAt: func(u acp.SessionUpdate) bool { return u.Kind == acp.UpdateAgentMessageChunk },
			// The response's text is recorded once the response is complete,
			// so an interrupted one is absent, never partial.
			kinds:   []store.Kind{store.KindMeta, store.KindMode, store.KindModel, store.KindUser},
			replay:  func(string) []string { return []string{"current_mode_update:yolo", "user_message_chunk:start"} },
			history: []string{"user:start"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dataDir, cwd := t.TempDir(), t.TempDir()
			hit := make(chan acp.SessionUpdate, 1)
			fc := &acptest.FakeClient{OnSessionUpdate: func(n acp.SessionNotification) {
				if tc.killAt(n.Update) {
					select {
					case hit <- n.Update:
					default:
					}
				}
			}}
			d1 := startCrashDaemon(t, fc, dataDir, tc.script...)
			d1.initialize(t)
			sid, err := d1.cc.NewSession(t.Context(), cwd)
			require.NoError(t, err)
			answered := make(chan error, 1)
			go func() {
				_, err := d1.cc.Prompt(context.WithoutCancel(t.Context()), sid, "start")
				answered <- err
			}()
			var at acp.SessionUpdate
			select {
			case at = <-hit:
			case <-time.After(30 * time.Second):
				t.Fatal("the turn never reached the kill point")
			}
			d1.kill(t)
			select {
			case err := <-answered:
				require.Error(t, err, "the prompt dies with the daemon")
			case <-time.After(10 * time.Second):
				t.Fatal("the prompt was not failed when the daemon died")
			}
			toolID := ""
			if at.ToolCall != nil {
				toolID = at.ToolCall.ToolCallID
			}

			recs := requireWholeRecords(t, dataDir, sid)
			var kinds []store.Kind
			for _, r := range recs {
				kinds = append(kinds, r.Kind)
			}
			assert.Equal(t, tc.kinds, kinds)

			d2 := startCrashDaemon(t, nil, dataDir, modeltest.Response{Text: "resumed"})
			d2.initialize(t)
			var lr acp.LoadSessionResponse
			require.NoError(t, d2.cc.Call(t.Context(), acp.MethodSessionLoad,
				acp.LoadSessionRequest{SessionID: sid, Cwd: cwd, MCPServers: []acp.MCPServer{}}, &lr))
			var got []string
			for _, n := range d2.cc.Updates() {
				if n.Update.Kind == acp.UpdateAvailableCommands {
					continue // announced after the load's answer, not replayed
				}
				got = append(got, updateDesc(n.Update))
			}
			assert.Equal(t, tc.replay(toolID), got)
			for _, e := range mustGlob(t, filepath.Join(dataDir, "sessions", "*.damaged-*")) {
				t.Errorf("load cut a damaged tail: %s", e)
			}

			var list acp.ListSessionsResponse
			require.NoError(t, d2.cc.Call(t.Context(), acp.MethodSessionList, acp.ListSessionsRequest{Cwd: cwd}, &list))
			require.Len(t, list.Sessions, 1)
			assert.Equal(t, "start", list.Sessions[0].Title)

			resp, err := d2.cc.Prompt(t.Context(), sid, "again")
			require.NoError(t, err)
			assert.Equal(t, acp.StopEndTurn, resp.StopReason)
			assert.Equal(t, "resumed", acptest.AgentText(d2.cc.Updates(), sid))
			reqs := d2.model.Requests()
			require.Len(t, reqs, 1)
			var msgs []string
			calls := map[string]bool{}
			for _, m := range reqs[0].Messages {
				if m.Role == "system" {
					continue
				}
				msgs = append(msgs, m.Role+":"+m.Text())
				for _, c := range m.ToolCalls {
					calls[c.ID] = true
				}
				if m.Role == "tool" {
					assert.True(t, calls[m.ToolCallID], "tool message answers an earlier call: %q", m.ToolCallID)
				}
			}
			if toolID != "" {
				assert.True(t, calls[toolID], "the interrupted call %q is in the history", toolID)
			}
			assert.Equal(t, append(append([]string(nil), tc.history...), "user:again"), msgs)
		})
	}
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	require.NoError(t, err)
	return m
}
