package httptransport_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/httptransport"
	"github.com/stretchr/testify/require"
)

// agent is a small real ACP agent behind a real acp.Conn. Prompt text picks
// the behaviour: "echo a b" streams the words, "permission" asks the client
// and reports the outcome, "read PATH" asks the client for a file,
// "flood N" sends N 1 KiB updates, "block" waits for cancel. session/load
// of "old" replays one update; any other id is not found.
type agent struct {
	client  acp.Client
	seq     *atomic.Int64
	prompts *atomic.Int64 // turns finished
}

func (a *agent) Initialize(ctx context.Context, req *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	return &acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersion,
		AgentCapabilities: acp.AgentCapabilities{LoadSession: true},
		AgentInfo:         &acp.Implementation{Name: "wire-test", Version: "0"}}, nil
}
func (a *agent) Authenticate(ctx context.Context, req *acp.AuthenticateRequest) (*acp.Empty, error) {
	return &acp.Empty{}, nil
}
func (a *agent) NewSession(ctx context.Context, req *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	return &acp.NewSessionResponse{SessionID: "s" + strconv.FormatInt(a.seq.Add(1), 10)}, nil
}
func (a *agent) LoadSession(ctx context.Context, req *acp.LoadSessionRequest) (*acp.LoadSessionResponse, error) {
	if req.SessionID != "old" {
		return nil, acp.ErrResourceNotFound(req.SessionID)
	}
	b := acp.TextBlock("replayed")
	if err := a.client.SessionUpdate(ctx, &acp.SessionNotification{SessionID: req.SessionID,
		Update: acp.SessionUpdate{Kind: acp.UpdateUserMessageChunk, Content: &b}}); err != nil {
		return nil, err
	}
	return &acp.LoadSessionResponse{}, nil
}
func (a *agent) ResumeSession(ctx context.Context, req *acp.ResumeSessionRequest) (*acp.LoadSessionResponse, error) {
	return nil, acp.ErrResourceNotFound(req.SessionID)
}
func (a *agent) ListSessions(ctx context.Context, req *acp.ListSessionsRequest) (*acp.ListSessionsResponse, error) {
	return &acp.ListSessionsResponse{}, nil
}
func (a *agent) CloseSession(ctx context.Context, req *acp.SessionIDRequest) (*acp.Empty, error) {
	return &acp.Empty{}, nil
}
func (a *agent) DeleteSession(ctx context.Context, req *acp.SessionIDRequest) (*acp.Empty, error) {
	return &acp.Empty{}, nil
}
func (a *agent) SetSessionMode(ctx context.Context, req *acp.SetSessionModeRequest) (*acp.Empty, error) {
	return &acp.Empty{}, nil
}
func (a *agent) SetSessionConfigOption(ctx context.Context, req *acp.SetSessionConfigOptionRequest) (*acp.SetSessionConfigOptionResponse, error) {
	return &acp.SetSessionConfigOptionResponse{}, nil
}
func (a *agent) Cancel(req *acp.SessionIDRequest) {}

func (a *agent) Prompt(ctx context.Context, req *acp.PromptRequest) (*acp.PromptResponse, error) {
	defer a.prompts.Add(1)
	text := ""
	if len(req.Prompt) > 0 {
		text = req.Prompt[0].Text
	}
	say := func(s string) error {
		b := acp.TextBlock(s)
		return a.client.SessionUpdate(ctx, &acp.SessionNotification{SessionID: req.SessionID,
			Update: acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b}})
	}
	switch {
	case strings.HasPrefix(text, "echo "):
		for _, w := range strings.Fields(strings.TrimPrefix(text, "echo ")) {
			if err := say(w); err != nil {
				return nil, err
			}
		}
	case strings.HasPrefix(text, "flood "):
		n, _ := strconv.Atoi(strings.TrimPrefix(text, "flood "))
		chunk := strings.Repeat("x", 1024)
		for range n {
			if err := say(chunk); err != nil {
				return nil, err
			}
		}
	case text == "permission":
		resp, err := a.client.RequestPermission(ctx, &acp.RequestPermissionRequest{
			SessionID: req.SessionID,
			ToolCall:  acp.ToolCallUpdate{ToolCallID: "t1"},
			Options:   []acp.PermissionOption{{OptionID: "allow", Name: "Allow", Kind: acp.AllowOnce}},
		})
		if err != nil {
			return nil, err
		}
		if err := say("outcome " + resp.Outcome.OptionID); err != nil {
			return nil, err
		}
	case strings.HasPrefix(text, "read "):
		resp, err := a.client.ReadTextFile(ctx, &acp.ReadTextFileRequest{SessionID: req.SessionID, Path: strings.TrimPrefix(text, "read ")})
		if err != nil {
			return nil, err
		}
		if err := say("content " + resp.Content); err != nil {
			return nil, err
		}
	case text == "block":
		<-ctx.Done()
		return &acp.PromptResponse{StopReason: acp.StopCancelled}, nil
	}
	return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
}

// harness is a Handler serving the test agent behind an httptest server.
type harness struct {
	t       testing.TB
	h       *httptransport.Handler
	srv     *httptest.Server
	client  *http.Client
	served  atomic.Int64 // Serve calls returned
	prompts atomic.Int64 // turns finished
}

// newHarness starts a handler; tls selects an HTTP/2 TLS server.
func newHarness(t testing.TB, opts httptransport.Options, tls bool) *harness {
	t.Helper()
	hs := &harness{t: t}
	seq := &atomic.Int64{}
	opts.Serve = func(ctx context.Context, info httptransport.ConnInfo, r io.Reader, w io.Writer) error {
		defer hs.served.Add(1)
		c := acp.NewConn(r, w, acp.Options{ShutdownGrace: 100 * time.Millisecond})
		return c.Serve(ctx, &agent{client: c, seq: seq, prompts: &hs.prompts})
	}
	hs.h = httptransport.NewHandler(opts)
	hs.srv = httptest.NewUnstartedServer(hs.h)
	if tls {
		hs.srv.EnableHTTP2 = true
		hs.srv.StartTLS()
	} else {
		hs.srv.Start()
	}
	hs.client = hs.srv.Client()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, hs.h.Shutdown(ctx))
		hs.srv.Close()
	})
	return hs
}

func (hs *harness) do(method string, hdr map[string]string, body string) *http.Response {
	hs.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, hs.srv.URL+"/acp", rd)
	require.NoError(hs.t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hs.client.Do(req)
	require.NoError(hs.t, err)
	return resp
}

// post sends a JSON-RPC message as the SDK does (Accept: */*).
func (hs *harness) post(conn, sess, body string) *http.Response {
	hs.t.Helper()
	hdr := map[string]string{"Content-Type": "application/json", "Accept": "*/*"}
	if conn != "" {
		hdr[httptransport.HeaderConnectionID] = conn
	}
	if sess != "" {
		hdr[httptransport.HeaderSessionID] = sess
	}
	return hs.do(http.MethodPost, hdr, body)
}

// postOK posts and requires 202.
func (hs *harness) postOK(conn, sess, body string) {
	hs.t.Helper()
	resp := hs.post(conn, sess, body)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(hs.t, http.StatusAccepted, resp.StatusCode, string(b))
}

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`

// initialize opens a connection and returns its id.
func (hs *harness) initialize() string {
	hs.t.Helper()
	resp := hs.post("", "", initBody)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(hs.t, http.StatusOK, resp.StatusCode, string(b))
	id := resp.Header.Get(httptransport.HeaderConnectionID)
	require.NotEmpty(hs.t, id)
	var m map[string]any
	require.NoError(hs.t, json.Unmarshal(b, &m))
	require.EqualValues(hs.t, 0, m["id"])
	require.Contains(hs.t, m, "result")
	return id
}

// sse is an open SSE stream; events are the data payloads, comments are
// kept with their leading ':'.
type sse struct {
	t      testing.TB
	resp   *http.Response
	events chan string
}

func (hs *harness) openSSE(conn, sess string) *sse {
	hs.t.Helper()
	s, status := hs.tryOpenSSE(conn, sess)
	require.Equal(hs.t, http.StatusOK, status)
	return s
}

func (hs *harness) tryOpenSSE(conn, sess string) (*sse, int) {
	hs.t.Helper()
	hdr := map[string]string{"Accept": "text/event-stream", httptransport.HeaderConnectionID: conn}
	if sess != "" {
		hdr[httptransport.HeaderSessionID] = sess
	}
	resp := hs.do(http.MethodGet, hdr, "")
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, resp.StatusCode
	}
	require.Equal(hs.t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(hs.t, "no", resp.Header.Get("X-Accel-Buffering"))
	require.Equal(hs.t, "no-store", resp.Header.Get("Cache-Control"))
	if resp.ProtoMajor == 1 {
		// The server closes an HTTP/1.1 stream's connection when the stream
		// ends: a client must not pool it and send a request on it then.
		require.True(hs.t, resp.Close, "an HTTP/1.1 event stream says Connection: close")
	}
	s := &sse{t: hs.t, resp: resp, events: make(chan string, 1024)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "data: "):
				s.events <- strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, ":"):
				s.events <- line
			}
		}
	}()
	hs.t.Cleanup(func() { resp.Body.Close() })
	return s, http.StatusOK
}

const wait = 20 * time.Second // generous: the machine may be loaded

// next returns the next data event as a map, skipping comments.
func (s *sse) next() map[string]any {
	s.t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case e, ok := <-s.events:
			require.True(s.t, ok, "stream ended")
			if strings.HasPrefix(e, ":") {
				continue
			}
			var m map[string]any
			require.NoError(s.t, json.Unmarshal([]byte(e), &m), e)
			return m
		case <-deadline:
			s.t.Fatal("no event in time")
			return nil
		}
	}
}

// ended waits for the stream to end, discarding what is left.
func (s *sse) ended() {
	s.t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		case <-deadline:
			s.t.Fatal("stream did not end")
		}
	}
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func prompt(id int, sess, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}}`, id, sess, text)
}

func newSession(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, id)
}
