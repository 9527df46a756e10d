package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools"
)

func badServer(name string, args ...string) acp.MCPServer {
	return acp.MCPServer{Name: name, Command: badServerBin, Args: args}
}

// A server that breaks the protocol or dies mid-call gives that call a
// clean error naming the server and why, is restarted, and the next call
// works.
func TestStdio_BrokenServerOutput(t *testing.T) {
	t.Parallel()
	for tool, why := range map[string]string{
		"badjson":    "invalid JSON",
		"notjsonrpc": `sent "starting up...", not a JSON-RPC message`,
		"huge":       "longer than 16 MiB",
		"die":        "exit status 7",
	} {
		t.Run(tool, func(t *testing.T) {
			t.Parallel()
			opts, _ := testOptions(t)
			opts.StopTimeout = 200 * time.Millisecond
			set, errs := Connect(t.Context(), []acp.MCPServer{badServer("bad")}, opts)
			require.Empty(t, errs)
			t.Cleanup(func() { _ = set.Close() })
			res := run(t, t.Context(), findTool(t, set, "mcp__bad__"+tool), `{}`)
			require.Error(t, res.Err)
			assert.Equal(t, ErrTypeExecution, res.ErrType)
			assert.Contains(t, res.LLMContent, `mcp server "bad" stopped during the call (`)
			assert.Contains(t, res.LLMContent, why)
			assert.Contains(t, res.LLMContent, "it was restarted, call the tool again")
			res = run(t, t.Context(), findTool(t, set, "mcp__bad__ok"), `{}`)
			require.NoError(t, res.Err, res.LLMContent)
			assert.Equal(t, "fine", res.LLMContent)
		})
	}
}

// A server that never answers holds the call only as long as the caller's
// context; the server is told the call was cancelled and keeps working.
func TestStdio_NeverAnswers(t *testing.T) {
	t.Parallel()
	opts, logs := testOptions(t)
	set, errs := Connect(t.Context(), []acp.MCPServer{badServer("mute")}, opts)
	require.Empty(t, errs)
	t.Cleanup(func() { _ = set.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res := run(t, ctx, findTool(t, set, "mcp__mute__mute"), `{}`)
	assert.Less(t, time.Since(start), 2*time.Second)
	require.ErrorIs(t, res.Err, context.DeadlineExceeded)
	assert.Equal(t, ErrTypeTimeout, res.ErrType)
	assert.Eventually(t, func() bool {
		return strings.Contains(logs.String(), `badserver: cancelled {\"reason\":\"context deadline exceeded\",\"requestId\":3}`)
	}, 5*time.Second, 10*time.Millisecond, "notifications/cancelled names the request: %s", logs)
	res = run(t, t.Context(), findTool(t, set, "mcp__mute__ok"), `{}`)
	require.NoError(t, res.Err)
	assert.True(t, set.Status()[0].Connected)
}

func TestStdio_InitializeNeverAnswered(t *testing.T) {
	t.Parallel()
	opts, _ := testOptions(t)
	opts.ConnectTimeout = 300 * time.Millisecond
	opts.StopTimeout = 100 * time.Millisecond
	set, errs := Connect(t.Context(), []acp.MCPServer{badServer("mute", "-mute-initialize")}, opts)
	require.NotNil(t, set)
	defer set.Close()
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), `mcp server "mute": connect: no answer within 300ms`)
}

// The server's own requests are answered: ping, roots/list with no roots,
// and -32601 for what acpd does not offer (sampling).
func TestStdio_ServerRequestsAnswered(t *testing.T) {
	t.Parallel()
	set, errs := connect(t, badServer("asker"))
	require.Empty(t, errs)
	res := run(t, t.Context(), findTool(t, set, "mcp__asker__ask"), `{}`)
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "ping {}")
	assert.Contains(t, res.LLMContent, `roots/list {"roots":[]}`)
	assert.Contains(t, res.LLMContent, `sampling/createMessage error {"code":`)
	assert.Contains(t, res.LLMContent, `does not support CreateMessage`, "acpd offers no sampling")
}

// The SDK's streamable HTTP server in each of its modes (SSE answers, JSON
// answers, stateless) works with the client, and a cancelled call stops
// the server's handler.
func TestHTTP_SDKServerModes(t *testing.T) {
	t.Parallel()
	for name, hopts := range map[string]*sdk.StreamableHTTPOptions{
		"sse":       nil,
		"json":      {JSONResponse: true},
		"stateless": {Stateless: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stopped := make(chan struct{}, 1)
			s := sdk.NewServer(&sdk.Implementation{Name: "modes", Version: "1"}, nil)
			s.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"}},"required":["s"]}`)},
				func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					var in struct{ S string }
					_ = json.Unmarshal(req.Params.Arguments, &in)
					return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "got " + in.S}}}, nil
				})
			s.AddTool(&sdk.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					select {
					case <-ctx.Done():
						stopped <- struct{}{}
						return nil, ctx.Err()
					case <-time.After(10 * time.Second):
						return nil, errors.New("not cancelled")
					}
				})
			ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, hopts))
			t.Cleanup(ts.Close)
			set, errs := connect(t, acp.MCPServer{Type: "http", Name: "m", URL: ts.URL})
			require.Empty(t, errs)
			for i := range 3 {
				res := run(t, t.Context(), findTool(t, set, "mcp__m__echo"), fmt.Sprintf(`{"s":"x%d"}`, i))
				require.NoError(t, res.Err, res.LLMContent)
				assert.Equal(t, fmt.Sprintf("got x%d", i), res.LLMContent)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan tools.Result, 1)
			go func() { done <- run(t, ctx, findTool(t, set, "mcp__m__block"), `{}`) }()
			time.Sleep(100 * time.Millisecond)
			cancel()
			select {
			case res := <-done:
				require.ErrorIs(t, res.Err, context.Canceled)
			case <-time.After(2 * time.Second):
				require.FailNow(t, "the cancelled call did not return")
			}
			if name == "stateless" {
				// Without a session the SDK server cannot route
				// notifications/cancelled to the call, and it does not stop a
				// handler when the request's connection closes.
				return
			}
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				require.FailNow(t, "the server's handler was not stopped")
			}
		})
	}
}

// rawHTTPServer is a hand-written streamable HTTP MCP server: it records
// every request and misbehaves in tools/call as the tool says.
type rawHTTPServer struct {
	mu       sync.Mutex
	requests []recorded
	replies  chan []byte // the client's answers to the server's requests
}

type recorded struct {
	method, rpcMethod, session, version, accept string
}

func (h *rawHTTPServer) log() []recorded {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]recorded(nil), h.requests...)
}

func (h *rawHTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	h.mu.Lock()
	h.requests = append(h.requests, recorded{r.Method, m.Method, r.Header.Get("Mcp-Session-Id"), r.Header.Get("MCP-Protocol-Version"), r.Header.Get("Accept")})
	h.mu.Unlock()
	switch r.Method {
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodGet:
		// No stream of the server's own.
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if m.Method == "" {
		h.replies <- body
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	answer := func(result string) string {
		return `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`
	}
	w.Header().Set("Mcp-Session-Id", "sess-1")
	switch m.Method {
	case "initialize":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"0"}}`))
		return
	case "tools/list":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer(`{"tools":[{"name":"sse","inputSchema":{"type":"object"}},{"name":"cut","inputSchema":{"type":"object"}},{"name":"badjson","inputSchema":{"type":"object"}},{"name":"busy","inputSchema":{"type":"object"}},{"name":"plain","inputSchema":{"type":"object"}}]}`))
		return
	}
	var p struct{ Name string }
	_ = json.Unmarshal(m.Params, &p)
	flusher := w.(http.Flusher)
	switch p.Name {
	case "sse":
		// A keep-alive comment, a ping of the server's own, a multi-line
		// data field, then the answer.
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": keep-alive\n\nid: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"p1\",\"method\":\"ping\"}\n\n")
		flusher.Flush()
		reply := <-h.replies
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":"+string(m.ID)+",\"result\":{\"content\":[{\"type\":\"text\",\"text\":"+
			strconvQuote("ping answered: "+string(bytes.TrimSpace(reply)))+"}]}}\n\n")
	case "cut":
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":"+string(m.ID)+",\"res")
	case "badjson":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`)
	case "busy":
		w.WriteHeader(http.StatusServiceUnavailable)
	case "plain":
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello")
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Against a hand-written HTTP server: the session id and protocol version
// headers are sent where MCP says, the server's ping inside an SSE answer
// is answered, and Close deletes the session. A cut stream, bad JSON, a
// 503 and a wrong content type are each a clean error of that call,
// naming the server and what went wrong, and the next call works: the SDK
// takes a broken answer for a broken connection, so the server is
// reconnected (once), and a 503 or a wrong type costs only the call.
func TestHTTP_HandwrittenServer(t *testing.T) {
	t.Parallel()
	h := &rawHTTPServer{replies: make(chan []byte, 1)}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	opts, _ := testOptions(t)
	set, errs := Connect(t.Context(), []acp.MCPServer{{Type: "http", Name: "raw", URL: ts.URL}}, opts)
	require.Empty(t, errs)

	res := run(t, t.Context(), findTool(t, set, "mcp__raw__sse"), `{}`)
	require.NoError(t, res.Err, res.LLMContent)
	assert.Equal(t, `ping answered: {"jsonrpc":"2.0","id":"p1","result":{}}`, res.LLMContent)

	require.NoError(t, set.Close())
	log := h.log()
	require.GreaterOrEqual(t, len(log), 4)
	assert.Equal(t, recorded{"POST", "initialize", "", "", "application/json, text/event-stream"}, log[0], "no session or version before initialize")
	assert.Contains(t, log, recorded{"POST", "notifications/initialized", "sess-1", "2025-06-18", "application/json, text/event-stream"})
	assert.Contains(t, log, recorded{"GET", "", "sess-1", "2025-06-18", "text/event-stream"}, "the stream of the server's own messages is asked for (and refused with 405)")
	for _, r := range log[1:] {
		assert.Equal(t, "sess-1", r.session, "%+v", r)
		assert.Equal(t, "2025-06-18", r.version, "%+v", r)
	}
	assert.Equal(t, "DELETE", log[len(log)-1].method, "Close ends the session")

	for tool, why := range map[string]string{
		"cut":     "unexpected EOF",
		"badjson": "unexpected EOF",
		"busy":    "Service Unavailable",
		"plain":   "text/plain",
	} {
		t.Run(tool, func(t *testing.T) {
			t.Parallel()
			h := &rawHTTPServer{replies: make(chan []byte, 1)}
			ts := httptest.NewServer(h)
			t.Cleanup(ts.Close)
			set, errs := Connect(t.Context(), []acp.MCPServer{{Type: "http", Name: "raw", URL: ts.URL}}, opts)
			require.Empty(t, errs)
			t.Cleanup(func() { _ = set.Close() })
			done := make(chan tools.Result, 1)
			go func() { done <- run(t, t.Context(), findTool(t, set, "mcp__raw__"+tool), `{}`) }()
			select {
			case res := <-done:
				require.Error(t, res.Err)
				assert.Contains(t, res.LLMContent, `mcp server "raw"`)
				assert.Contains(t, res.LLMContent, why)
				t.Log(res.LLMContent)
			case <-time.After(10 * time.Second):
				require.FailNow(t, "the call did not end")
			}
			res := run(t, t.Context(), findTool(t, set, "mcp__raw__sse"), `{}`)
			require.NoError(t, res.Err, "the next call works: %s", res.LLMContent)
		})
	}
}
