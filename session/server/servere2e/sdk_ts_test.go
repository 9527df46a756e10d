package servere2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// remoteDir holds the pinned SDK + ws manifest, its lock and remote.mjs.
const remoteDir = "testdata/remote"

// remoteSummary is the JSON line remote.mjs prints.
type remoteSummary struct {
	Fatal      string `json:"fatal"`
	Transport  string `json:"transport"`
	Initialize struct {
		ProtocolVersion int                 `json:"protocolVersion"`
		AgentInfo       *acp.Implementation `json:"agentInfo"`
		LoadSession     bool                `json:"loadSession"`
	} `json:"initialize"`
	Reinitialize struct {
		LoadSession bool `json:"loadSession"`
	} `json:"reinitialize"`
	Sessions struct {
		A string `json:"a"`
		B string `json:"b"`
	} `json:"sessions"`
	Steps []struct {
		Name       string `json:"name"`
		SessionID  string `json:"sessionId"`
		StopReason string `json:"stopReason"`
		Error      *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		ToolCalls int               `json:"toolCalls"`
		Statuses  map[string]string `json:"statuses"`
		Text      string            `json:"text"`
	} `json:"steps"`
	Reads []struct {
		SessionID string `json:"sessionId"`
		Path      string `json:"path"`
	} `json:"reads"`
	Permissions []struct {
		SessionID   string   `json:"sessionId"`
		OptionKinds []string `json:"optionKinds"`
	} `json:"permissions"`
	Replay []struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	} `json:"replay"`
	HTTP []struct {
		Conn              int    `json:"conn"`
		Method            string `json:"method"`
		Status            int    `json:"status"`
		Accept            string `json:"accept"`
		SentConnectionID  bool   `json:"sentConnectionId"`
		SentSessionID     string `json:"sentSessionId"`
		SentCookie        string `json:"sentCookie"`
		SentAuthorization bool   `json:"sentAuthorization"`
		ConnectionID      string `json:"connectionId"`
		ContentType       string `json:"contentType"`
		SetCookie         string `json:"setCookie"`
		AccelBuffering    string `json:"accelBuffering"`
	} `json:"http"`
	WS []struct {
		Conn         int             `json:"conn"`
		Status       int             `json:"status"`
		ConnectionID string          `json:"connectionId"`
		SetCookie    json.RawMessage `json:"setCookie"`
		SentCookie   string          `json:"sentCookie"`
	} `json:"ws"`
	SDKErrors []string `json:"sdkErrors"`
}

// TestRemote_TypeScriptSDK drives a served acpd with the official ACP
// TypeScript SDK 2.4.0's experimental Streamable HTTP client and its
// WebSocket client (npm ws as the constructor), each from its own node
// process on one daemon: initialize, two sessions on one connection with
// a turn on each at once — one runs the editor's fs/read_text_file and a
// shell command behind a permission request the client allows —, a turn
// cancelled while its command runs, then a new connection with the same
// token and cookie store that loads the first session and prompts it
// again. Every agent message of both connections is checked against the
// ACP schema and the protocol's ordering rules.
func TestRemote_TypeScriptSDK(t *testing.T) {
	// CI sets ACPD_REQUIRE_INTEROP: a missing node or npm fails there.
	node, npm := acptest.NodeAndNPM(t, "the remote SDK test")
	clientDir := acptest.InteropClient(t, npm, remoteDir)

	srv := modeltest.NewServer(t)
	workspace := t.TempDir()
	notes := filepath.Join(workspace, "notes.txt")
	require.NoError(t, os.WriteFile(notes, []byte("DISK-TEXT\n"), 0o644))
	for _, tr := range []string{"http", "ws"} {
		a, b := tr+"-A:", tr+"-B:"
		srv.Add(
			// tools: the editor serves the read, the shell call asks.
			modeltest.Response{Match: a, ToolCalls: []modeltest.ToolCall{
				call("read_file", map[string]any{"file_path": notes}), shell("echo " + tr + "-shell-ok"),
			}},
			modeltest.Response{Match: a, Text: tr + " A done"},
			// cancel: ended while the command runs; nothing more is asked.
			modeltest.Response{Match: a, ToolCalls: []modeltest.ToolCall{shell("sleep 30")}},
			// after-reconnect.
			modeltest.Response{Match: a, Text: tr + " A continued"},
			modeltest.Response{Match: b, Text: tr + " B answered"},
		)
	}
	d := serve(t, srv, nil)

	for _, tr := range []string{"http", "ws"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			out, agentLines := acptest.RunInteropScript(t, node, clientDir, "remote.mjs", workspace,
				[]string{"ACPD_REMOTE_TRANSPORT=" + tr}, d.URL, d.TokenFile)
			var sum remoteSummary
			require.NoError(t, json.Unmarshal(out, &sum), "summary from remote.mjs:\n%s", out)
			require.NotEmpty(t, agentLines)
			assertRemoteRun(t, tr, sum, notes, srv)
		})
	}
}

func assertRemoteRun(t *testing.T, tr string, sum remoteSummary, notes string, srv *modeltest.Server) {
	t.Helper()
	assert.Empty(t, sum.SDKErrors, "the SDK rejected messages acpd sent")
	assert.Equal(t, acp.ProtocolVersion, sum.Initialize.ProtocolVersion)
	require.NotNil(t, sum.Initialize.AgentInfo)
	assert.Equal(t, "acpd", sum.Initialize.AgentInfo.Name)
	assert.True(t, sum.Initialize.LoadSession, "agentCapabilities.loadSession")
	assert.True(t, sum.Reinitialize.LoadSession)
	require.NotEmpty(t, sum.Sessions.A)
	require.NotEmpty(t, sum.Sessions.B)
	assert.NotEqual(t, sum.Sessions.A, sum.Sessions.B)

	steps := map[string]int{}
	for i, s := range sum.Steps {
		steps[s.Name] = i
	}
	require.Len(t, sum.Steps, 4, "tools, second-session, cancel, after-reconnect")
	tools := sum.Steps[steps["tools"]]
	require.Nil(t, tools.Error, "tools turn failed")
	assert.Equal(t, "end_turn", tools.StopReason)
	assert.Equal(t, sum.Sessions.A, tools.SessionID)
	assert.Equal(t, 2, tools.ToolCalls)
	for id, st := range tools.Statuses {
		assert.Equal(t, "completed", st, "tool call %s", id)
	}
	assert.Equal(t, tr+" A done", tools.Text)

	second := sum.Steps[steps["second-session"]]
	require.Nil(t, second.Error, "second session's turn failed")
	assert.Equal(t, "end_turn", second.StopReason)
	assert.Equal(t, tr+" B answered", second.Text, "each session's updates reach its own turn only")
	assert.Zero(t, second.ToolCalls)

	cancel := sum.Steps[steps["cancel"]]
	require.Nil(t, cancel.Error, "cancelled turn failed")
	assert.Equal(t, "cancelled", cancel.StopReason)
	require.Equal(t, 1, cancel.ToolCalls)
	for _, st := range cancel.Statuses {
		assert.Equal(t, "failed", st, "the cancelled command")
	}

	after := sum.Steps[steps["after-reconnect"]]
	require.Nil(t, after.Error, "the turn after the reconnect failed")
	assert.Equal(t, "end_turn", after.StopReason)
	assert.Equal(t, tr+" A continued", after.Text)

	// The editor served the read: its buffer, not the disk, reached the model.
	require.Len(t, sum.Reads, 1, "fs/read_text_file requests")
	assert.Equal(t, notes, sum.Reads[0].Path)
	assert.Equal(t, sum.Sessions.A, sum.Reads[0].SessionID)
	// Both shell commands asked; the client allowed them.
	require.Len(t, sum.Permissions, 2, "permission requests (echo, sleep)")
	for _, p := range sum.Permissions {
		assert.Equal(t, sum.Sessions.A, p.SessionID)
		assert.Contains(t, p.OptionKinds, "allow_once")
	}
	var sawBuffer, sawDisk, sawShell, sawHistory bool
	for _, r := range srv.Requests() {
		first := ""
		for _, m := range r.Messages {
			if m.Role == "user" {
				first = m.Text()
				break
			}
		}
		if !strings.Contains(first, tr+"-A:") {
			continue
		}
		for _, m := range r.Messages {
			txt := m.Text()
			sawBuffer = sawBuffer || strings.Contains(txt, "CLIENT-BUFFER "+tr)
			sawDisk = sawDisk || strings.Contains(txt, "DISK-TEXT")
			sawShell = sawShell || strings.Contains(txt, tr+"-shell-ok")
			sawHistory = sawHistory || (strings.Contains(txt, tr+" A done") && strings.Contains(lastUser(r), "carry on"))
		}
	}
	assert.True(t, sawBuffer, "the model saw the editor's buffer")
	assert.False(t, sawDisk, "the model saw the disk text: the read did not go through the editor")
	assert.True(t, sawShell, "the model saw the command's output")
	assert.True(t, sawHistory, "after the reconnect the model saw the session's earlier turns")

	// session/load replayed the conversation to the new connection.
	var replayed []string
	for _, u := range sum.Replay {
		replayed = append(replayed, u.Kind+":"+u.Text)
	}
	joined := strings.Join(replayed, "\n")
	assert.Contains(t, joined, "user_message_chunk:"+tr+"-A: read notes.txt", "replay of the first prompt")
	assert.Contains(t, joined, "agent_message_chunk:"+tr+" A done", "replay of the first answer")

	if tr == "http" {
		assertHTTPWire(t, sum)
	} else {
		assertWSWire(t, sum)
	}
}

func lastUser(r modeltest.Request) string {
	last := ""
	for _, m := range r.Messages {
		if m.Role == "user" {
			last = m.Text()
		}
	}
	return last
}

// assertHTTPWire checks the exchanges of the http client as the RFD
// defines them: initialize 200 with a connection id, every other POST
// 202, SSE streams with their headers, a DELETE per connection, a cookie
// kept across the reconnect.
func assertHTTPWire(t *testing.T, sum remoteSummary) {
	t.Helper()
	ids := map[int]string{}
	var cookie string
	deletes := map[int]int{}
	for _, h := range sum.HTTP {
		assert.True(t, h.SentAuthorization, "%s without the token", h.Method)
		switch {
		case h.Method == "POST" && !h.SentConnectionID:
			assert.Equal(t, 200, h.Status, "initialize")
			assert.NotEmpty(t, h.ConnectionID, "initialize answers Acp-Connection-Id")
			ids[h.Conn] = h.ConnectionID
			if h.Conn == 1 && h.SetCookie != "" {
				cookie = strings.SplitN(h.SetCookie, ";", 2)[0]
			}
		case h.Method == "POST":
			assert.Equal(t, 202, h.Status, "POST of conn %d", h.Conn)
		case h.Method == "GET":
			assert.Equal(t, 200, h.Status, "SSE GET of conn %d session %q", h.Conn, h.SentSessionID)
			assert.Equal(t, "text/event-stream", h.Accept)
			assert.True(t, strings.HasPrefix(h.ContentType, "text/event-stream"), "content type %q", h.ContentType)
			assert.Equal(t, "no", h.AccelBuffering, "X-Accel-Buffering")
		case h.Method == "DELETE":
			assert.Equal(t, 202, h.Status)
			deletes[h.Conn]++
		}
	}
	require.Len(t, ids, 2, "two connections")
	assert.NotEqual(t, ids[1], ids[2], "the reconnect is a new connection")
	assert.Equal(t, map[int]int{1: 1, 2: 1}, deletes, "each connection ended by DELETE")
	// The affinity cookie of connection 1 goes back on connection 2's
	// initialize, as the SDK's reconnect recipe needs.
	require.NotEmpty(t, cookie, "initialize set an affinity cookie")
	for _, h := range sum.HTTP {
		if h.Conn == 2 && h.Method == "POST" && !h.SentConnectionID {
			assert.Contains(t, h.SentCookie, cookie, "reconnect carries the cookie")
		}
	}
}

// assertWSWire: each connection one upgrade, 101 with a connection id.
func assertWSWire(t *testing.T, sum remoteSummary) {
	t.Helper()
	require.Len(t, sum.WS, 2, "two WebSocket connections")
	for _, w := range sum.WS {
		assert.Equal(t, 101, w.Status)
		assert.NotEmpty(t, w.ConnectionID, "the 101 carries Acp-Connection-Id")
	}
	assert.NotEqual(t, sum.WS[0].ConnectionID, sum.WS[1].ConnectionID)
}
