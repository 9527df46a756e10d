package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/contextmgr/contextmgrtest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// The other row of the cost side-by-side: qwen-code 0.24.4 playing the
// long session of acpd's own bill test (TestE2E_LongSessionStaysInsideTheWindow
// in package session) against the same scripted model: 60 prompts, each
// reading a different 24 KB file, a 48,000-token window, the same
// simulated prefix cache and the same bill (uncached + a tenth of cached).
// qwen-code is told the window through its own setting. It is a
// measurement first; the assertion is the claim the docs make with it,
// that the session costs qwen-code more than acpd's bound of 0.5 M.
func TestQwenCode_LongSessionBill(t *testing.T) {
	t.Parallel()
	const window, prompts = 48000, 60
	srv := modeltest.NewServer(t)
	srv.SetTokenLimit(window)
	srv.SetPrefixCache(true)
	a := qwenAgentWith(t, srv, map[string]any{"maxToolCallsPerTurn": 0})
	files := make([]string, prompts)
	for i := range files {
		files[i] = filepath.Join(a.ws, fmt.Sprintf("src_%03d.go", i))
		require.NoError(t, os.WriteFile(files[i], []byte(contextmgrtest.SourceFile(i)), 0o644))
	}
	var mu sync.Mutex
	summaries, calls := 0, 0
	srv.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		mu.Lock()
		defer mu.Unlock()
		if isQwenSummaryRequest(r) {
			summaries++
			return modeltest.Response{Text: "<analysis>reading the conversation</analysis>\n" + contextmgrtest.Snapshot("as discussed so far")}, true
		}
		if len(r.Tools) == 0 || len(r.Messages) == 0 {
			return modeltest.Response{Text: "ok"}, true // a side request
		}
		last := r.Messages[len(r.Messages)-1]
		if n, ok := promptedFile(last); ok {
			calls++
			return modeltest.Response{ToolCalls: []modeltest.ToolCall{{ID: "call_" + strconv.Itoa(calls), Name: "read_file",
				Arguments: fmt.Sprintf(`{"file_path":%q}`, files[n])}}, WholeArguments: true}, true
		}
		return modeltest.Response{Text: "The file defines generated step functions; nothing unusual."}, true
	})

	g := startEditor(t, a, a.cmd)
	sid := g.newSession(a.ws)
	for i := range prompts {
		stop, rpcErr := g.prompt(sid, fmt.Sprintf("Read src_%03d.go and summarise it.", i))
		require.Nil(t, rpcErr, "prompt %d; stderr:\n%s", i, g.stderr.String())
		require.Equal(t, acp.StopEndTurn, stop, "prompt %d", i)
	}
	reqs := srv.Requests()
	refused := 0
	for _, r := range reqs {
		if r.Refused {
			refused++
		}
	}
	b := contextmgrtest.BillOf(reqs)
	t.Logf("qwen-code 0.24.4: %d requests (%d refused as too long), %d summaries, %d reads; %d prompt tokens sent, %.1f%% from the prefix cache; bill %d full-price-equivalent tokens",
		len(reqs), refused, summaries, calls, b.Sent, 100*b.CachedShare(), b.Bill)
	assert.GreaterOrEqual(t, calls, prompts, "every prompt read its file")
	assert.Greater(t, b.Bill, 500_000, "qwen-code's bill for the session against acpd's bound")
}

var promptRE = regexp.MustCompile(`Read src_(\d{3})\.go and summarise it\.`)

// promptedFile is the file a turn's first request asks for: its last
// message is the user's prompt (qwen-code may put context before it in the
// same message).
func promptedFile(m modeltest.Message) (int, bool) {
	if m.Role != "user" {
		return 0, false
	}
	sm := promptRE.FindStringSubmatch(m.Text())
	if sm == nil {
		return 0, false
	}
	n, err := strconv.Atoi(sm[1])
	return n, err == nil
}

// isQwenSummaryRequest tells qwen-code's compression request: its own
// summariser prompt as the system message, or the conversation re-sent
// with a last user message asking for the snapshot.
func isQwenSummaryRequest(r modeltest.Request) bool {
	if len(r.Messages) == 0 {
		return false
	}
	last := r.Messages[len(r.Messages)-1]
	return last.Role == "user" && strings.Contains(last.Text(), "<state_snapshot>")
}
