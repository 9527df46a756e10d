package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
)

// TestServe_TraceLogsTheWire: with --trace the log holds every line as it
// crossed the wire — the client's own ids (an integer and a string), the
// requests' params, the answers and the session/update notifications.
func TestServe_TraceLogsTheWire(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"text":"traced answer"}`+"\n")
	logPath := filepath.Join(e.dir, "acpd.log")
	bin := acpdBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--trace", "--log-file", logPath,
		"--provider", "script", "--model-script", script, "--model", "demo")
	cmd.Env, cmd.Dir = e.env, e.dir
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	rc := acptest.NewRawClient(stdin, stdout)
	defer rc.Stop()

	// waitFor reads until the answer to id arrives.
	waitFor := func(id string) {
		t.Helper()
		for {
			m, err := rc.NextMessage(30 * time.Second)
			require.NoError(t, err)
			if string(m.ID) == id {
				require.Nil(t, m.Error, string(m.Raw))
				return
			}
		}
	}
	require.NoError(t, rc.Send(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}`))
	waitFor("7")
	wsJSON, _ := json.Marshal(e.ws)
	require.NoError(t, rc.Send(`{"jsonrpc":"2.0","id":"new-1","method":"session/new","params":{"cwd":`+string(wsJSON)+`,"mcpServers":[]}}`))
	var sid string
	for sid == "" {
		m, err := rc.NextMessage(30 * time.Second)
		require.NoError(t, err)
		if string(m.ID) == `"new-1"` {
			var res struct{ SessionID string }
			require.NoError(t, json.Unmarshal(m.Result, &res), string(m.Raw))
			sid = res.SessionID
		}
	}
	require.NoError(t, rc.Send(`{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"hi"}]}}`))
	waitFor("9")
	require.NoError(t, rc.CloseStdin())
	require.NoError(t, cmd.Wait())

	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "acpd-in-", "the trace shows the client's ids, not stand-ins")
	type traced struct {
		Msg     string `json:"msg"`
		Message struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
		} `json:"message"`
	}
	var recv, send []traced
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l traced
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		switch l.Msg {
		case "acp recv":
			recv = append(recv, l)
		case "acp send":
			send = append(send, l)
		}
	}
	require.Len(t, recv, 3, "each line the client sent")
	assert.Equal(t, "7", string(recv[0].Message.ID))
	assert.JSONEq(t, `{"protocolVersion":1}`, string(recv[0].Message.Params))
	assert.Equal(t, `"new-1"`, string(recv[1].Message.ID))
	assert.Contains(t, string(recv[1].Message.Params), `"mcpServers":[]`)
	assert.Contains(t, string(recv[2].Message.Params), `"text":"hi"`)

	var answered []string
	updates := 0
	for _, l := range send {
		if l.Message.Method == "session/update" {
			updates++
			assert.Contains(t, string(l.Message.Params), sid)
		}
		if len(l.Message.Result) > 0 {
			answered = append(answered, string(l.Message.ID))
		}
	}
	assert.Equal(t, []string{"7", `"new-1"`, "9"}, answered, "answers carry the client's ids")
	assert.Positive(t, updates, "outgoing session/update notifications are traced")
	assert.True(t, strings.Contains(string(data), "traced answer"), "the streamed text is in the trace")
}
