package responsestest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model/responses/responsestest"
)

func post(t *testing.T, srv *responsestest.Server, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(srv.BaseURL()+"/responses", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// items returns the output items of each response.output_item.done event.
func items(t *testing.T, body string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type string
			Item map[string]any
		}
		require.NoError(t, json.Unmarshal([]byte(data), &ev))
		if ev.Type == "response.output_item.done" {
			out = append(out, ev.Item)
		}
	}
	return out
}

func TestServer_ChecksReturnedReasoning(t *testing.T) {
	srv := responsestest.NewServer(t,
		responsestest.Response{Reasoning: "plan", Calls: []responsestest.Call{{ID: "call_1", Name: "ls"}}},
	)
	status, body := post(t, srv, `{"model":"m","stream":true,"store":false,"include":["reasoning.encrypted_content"],"input":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "event: response.completed\n")
	out := items(t, body)
	require.Len(t, out, 2)
	rs, _ := json.Marshal(out[0])
	enc := out[0]["encrypted_content"].(string)
	altered := strings.Replace(string(rs), enc, enc[:len(enc)-2]+"xx", 1)
	call := `{"type":"function_call","call_id":"call_1","name":"ls","arguments":"{}"}`
	output := `{"type":"function_call_output","call_id":"call_1","output":"a b"}`
	user := `{"role":"user","content":"hi"}`
	req := func(items ...string) string {
		return `{"model":"m","stream":true,"store":false,"input":[` + strings.Join(items, ",") + `]}`
	}
	for name, tc := range map[string]struct {
		body, want string
	}{
		"reasoning missing":       {req(user, call, output), "Item 'call_1' of type 'function_call' was provided without its required 'reasoning' item: 'rs_"},
		"ciphertext altered":      {req(user, altered, call, output), "could not be verified"},
		"ciphertext dropped":      {req(user, strings.Replace(string(rs), `"encrypted_content":"`+enc+`",`, "", 1), call, output), "not found. Items are not persisted when `store` is set to false"},
		"reasoning left dangling": {req(user, string(rs)), "was provided without its required following item"},
		"output without call":     {req(user, output), "No tool call found for function call output with call_id call_1."},
		"not streaming":           {`{"model":"m","input":[]}`, "stream"},
		"no model":                {`{"stream":true,"input":[]}`, "Missing required parameter: 'model'."},
		"not JSON":                {`{"model":`, "could not parse the JSON body"},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := post(t, srv, tc.body)
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Contains(t, body, tc.want)
			var e struct {
				Error struct{ Message, Type string }
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e), body)
			assert.Equal(t, "invalid_request_error", e.Error.Type)
		})
	}
	// Sent back as issued, the request is served (here: the script is
	// exhausted, which the server says with its own 400).
	status, body = post(t, srv, req(user, string(rs), call, output))
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "script exhausted")
	assert.Equal(t, 1, srv.Served())
}

func TestServer_LaxReasoningAcceptsCallsWithoutTheirItem(t *testing.T) {
	srv := responsestest.NewServer(t,
		responsestest.Response{Reasoning: "plan", Calls: []responsestest.Call{{ID: "call_1", Name: "ls"}}},
		responsestest.Response{Text: "done"},
	)
	srv.SetLaxReasoning(true)
	status, _ := post(t, srv, `{"model":"m","stream":true,"include":["reasoning.encrypted_content"],"input":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, status)
	status, body := post(t, srv, `{"model":"m","stream":true,"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"call_1","name":"ls","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"x"}]}`)
	require.Equal(t, http.StatusOK, status, body)
	// With its fc_ item id the real API links the call to its reasoning,
	// so even lax the item is required.
	srv.Add(responsestest.Response{Text: "unused"})
	status, body = post(t, srv, `{"model":"m","stream":true,"input":[{"type":"function_call","id":"fc_test0001_0","call_id":"call_1","name":"ls","arguments":"{}"}]}`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "required 'reasoning' item")
}

func TestServer_TokenLimitAndErrors(t *testing.T) {
	srv := responsestest.NewServer(t,
		responsestest.Response{Status: 429, ErrorMessage: "slow down", ErrorCode: "rate_limit_exceeded", RetryAfter: "3"},
		responsestest.Response{Text: "x", Fail: true, ErrorCode: "server_error"},
	)
	srv.SetTokenLimit(5)
	status, body := post(t, srv, `{"model":"m","stream":true,"input":[{"role":"user","content":"`+strings.Repeat("a", 100)+`"}]}`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.JSONEq(t, `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`, body)
	srv.SetTokenLimit(0)

	resp, err := http.Post(srv.BaseURL()+"/responses", "application/json", bytes.NewReader([]byte(`{"model":"m","stream":true,"input":[]}`)))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "3", resp.Header.Get("Retry-After"))

	status, body = post(t, srv, `{"model":"m","stream":true,"input":[]}`)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "event: error\n")
	assert.Contains(t, body, "event: response.failed\n")
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	assert.NotEmpty(t, reqs[0].Rejected)
	assert.Empty(t, reqs[2].Rejected)
}

func TestServer_ModelList(t *testing.T) {
	srv := responsestest.NewServer(t)
	srv.SetModels("gpt-5", "gpt-5-codex")
	resp, err := http.Get(srv.BaseURL() + "/models")
	require.NoError(t, err)
	defer resp.Body.Close()
	var list struct {
		Data []struct{ ID string }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	require.Len(t, list.Data, 2)
	assert.Equal(t, "gpt-5-codex", list.Data[1].ID)
}
