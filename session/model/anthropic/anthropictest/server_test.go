package anthropictest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// post sends body to srv's Messages endpoint and returns the streamed data
// payloads.
func post(t *testing.T, srv *Server, body string) []map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages?beta=true", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, buf.String())
	var evs []map[string]any
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(data), &ev))
			evs = append(evs, ev)
		}
	}
	return evs
}

// TestThinkingSignatureInOneDelta: the signature of a thinking block comes
// in one signature_delta, as the API sends it, so a client that keeps the
// last delta (the official SDKs and Claude Code do) sends back a signature
// the server accepts in the tool loop that follows.
func TestThinkingSignatureInOneDelta(t *testing.T) {
	srv := NewServer(t,
		Response{Thinking: "Reading it.", ToolCalls: []ToolCall{{ID: "toolu_1", Name: "Read", Arguments: `{"file_path":"a"}`}}},
		Response{Thinking: "Done.", Text: "ok"})
	first := `{"model":"m","max_tokens":4096,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},` +
		`"tools":[{"name":"Read","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"read a"}]}`
	sig, deltas := "", 0
	for _, ev := range post(t, srv, first) {
		if d, ok := ev["delta"].(map[string]any); ok && d["type"] == "signature_delta" {
			deltas++
			sig = d["signature"].(string) // kept, not joined
		}
	}
	assert.Equal(t, 1, deltas)
	require.NotEmpty(t, sig)

	thinking, _ := json.Marshal(map[string]any{"type": "thinking", "thinking": "Reading it.", "signature": sig})
	second := `{"model":"m","max_tokens":4096,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},` +
		`"tools":[{"name":"Read","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"read a"},` +
		`{"role":"assistant","content":[` + string(thinking) + `,{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"a"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}]}`
	post(t, srv, second)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Empty(t, reqs[1].Rejected)
}
