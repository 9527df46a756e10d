package geminitest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model/gemini/geminitest"
)

func post(t *testing.T, srv *geminitest.Server, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(srv.BaseURL()+"/models/gemini-3-pro:streamGenerateContent?alt=sse", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestServer_StreamShapeAndSignatures(t *testing.T) {
	srv := geminitest.NewServer(t,
		geminitest.Response{Thought: "think", Calls: []geminitest.Call{{ID: "a1", Name: "ls", Arguments: `{"p":"."}`}, {ID: "a2", Name: "ls"}}},
	)
	status, body := post(t, srv, `{"contents":[{"role":"user","parts":[{"text":"list"}]}]}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.True(t, strings.HasSuffix(body, "\r\n\r\n"), "CRLF framing")
	var sig string
	for _, ev := range strings.Split(strings.TrimSpace(body), "\r\n\r\n") {
		var ch struct {
			Candidates []struct {
				Content struct {
					Parts []map[string]any
				}
			}
			UsageMetadata struct{ PromptTokenCount int }
		}
		require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &ch))
		assert.Positive(t, ch.UsageMetadata.PromptTokenCount)
		for _, p := range ch.Candidates[0].Content.Parts {
			if s, ok := p["thoughtSignature"].(string); ok {
				sig = s
			}
		}
	}
	require.NotEmpty(t, sig)
	call := func(sig string) string {
		s := ""
		if sig != "" {
			s = `,"thoughtSignature":"` + sig + `"`
		}
		return `{"role":"model","parts":[{"functionCall":{"id":"a1","name":"ls","args":{"p":"."}}` + s + `},{"functionCall":{"id":"a2","name":"ls","args":{}}}]}`
	}
	user := `{"role":"user","parts":[{"text":"list"}]}`
	both := `{"role":"user","parts":[{"functionResponse":{"id":"a1","name":"ls","response":{"output":"x"}}},{"functionResponse":{"id":"a2","name":"ls","response":{"output":"y"}}}]}`
	one := `{"role":"user","parts":[{"functionResponse":{"id":"a1","name":"ls","response":{"output":"x"}}}]}`
	req := func(cs ...string) string { return `{"contents":[` + strings.Join(cs, ",") + `]}` }
	for name, tc := range map[string]struct{ body, want string }{
		"missing":        {req(user, call(""), both), "Function call is missing a thought_signature in functionCall parts"},
		"altered":        {req(user, call(sig[:len(sig)-4]+"AAA="), both), "Corrupted thought signature."},
		"responses lost": {req(user, call(sig), one), "the number of function response parts is equal to the number of function call parts"},
		"empty parts":    {req(user, `{"role":"model","parts":[]}`), "must not be empty"},
		"bad role":       {req(`{"role":"assistant","parts":[{"text":"x"}]}`), "valid role"},
		"no contents":    {`{}`, "contents is not specified"},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := post(t, srv, tc.body)
			assert.Equal(t, http.StatusBadRequest, status)
			var e struct {
				Error struct {
					Code    int
					Message string
					Status  string
				}
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e), body)
			assert.Equal(t, 400, e.Error.Code)
			assert.Equal(t, "INVALID_ARGUMENT", e.Error.Status)
			assert.Contains(t, e.Error.Message, tc.want)
		})
	}
	// Signed as issued, or with the documented skip value: served (the
	// script is exhausted, which the server reports itself).
	for _, s := range []string{sig, geminitest.SkipSignature} {
		_, body := post(t, srv, req(user, call(s), both))
		assert.Contains(t, body, "script exhausted")
	}
	// An older turn (before the last user text) is not checked.
	_, body = post(t, srv, req(user, call(""), both, `{"role":"user","parts":[{"text":"again"}]}`))
	assert.Contains(t, body, "script exhausted")
}

func TestServer_TokenLimit(t *testing.T) {
	srv := geminitest.NewServer(t, geminitest.Response{Text: "x"})
	srv.SetTokenLimit(10)
	status, body := post(t, srv, `{"contents":[{"role":"user","parts":[{"text":"`+strings.Repeat("word ", 40)+`"}]}]}`)
	assert.Equal(t, http.StatusBadRequest, status)
	n := srv.Requests()[0].Tokens
	assert.JSONEq(t, `{"error":{"code":400,"message":"The input token count (`+itoa(n)+`) exceeds the maximum number of tokens allowed (10).","status":"INVALID_ARGUMENT"}}`, body)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestServer_ModelList(t *testing.T) {
	srv := geminitest.NewServer(t)
	srv.SetModels("gemini-2.5-pro")
	resp, err := http.Get(srv.BaseURL() + "/models")
	require.NoError(t, err)
	defer resp.Body.Close()
	var list struct {
		Models []struct{ Name string }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	require.Len(t, list.Models, 1)
	assert.Equal(t, "models/gemini-2.5-pro", list.Models[0].Name)
}
