package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/telemetry/telemetrytest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	acptest.RemoveAcpd()
	os.Exit(code)
}

// wait is the generous bound of every wait: the machine may be loaded.
const wait = 60 * time.Second

// daemon is a served acpd started from the built binary.
type daemon struct {
	url, base, token string
	stderr           *acptest.SyncBuffer
	cmd              *exec.Cmd
	stop             func() // SIGINT, then wait for the exit
}

var announceRE = regexp.MustCompile(`acpd: serving ACP on (https?://\S+/acp)`)

// startDaemon runs `acpd serve --listen 127.0.0.1:0` with the [server]
// settings of serverTOML and waits for the address it announces.
func startDaemon(t *testing.T, modelURL, serverTOML string, args []string, env ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	token := "test-token-0123456789abcdef"
	require.NoError(t, os.WriteFile(tokFile, []byte(token+"\n"), 0o600))
	cfg := filepath.Join(dir, "acpd.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[server]\n"+serverTOML), 0o600))
	cmd := exec.Command(acptest.Acpd(t), "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--token-file", tokFile,
		"--data-dir", filepath.Join(dir, "data"), "--base-url", modelURL, "--model", "m", "--approval-mode", "yolo")
	cmd.Args = append(cmd.Args, args...)
	cmd.Env = append(append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "OPENAI_API_KEY=k"), env...)
	d := &daemon{token: token, stderr: &acptest.SyncBuffer{}, cmd: cmd}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	require.NoError(t, cmd.Start())
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			_, _ = d.stderr.Write([]byte(line + "\n"))
			if m := announceRE.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	var once sync.Once
	d.stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(wait):
				_ = cmd.Process.Kill()
				<-done
			}
			_ = pw.Close()
		})
	}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("acpd stderr:\n%s", d.stderr.String())
		}
	})
	select {
	case d.url = <-found:
	case <-time.After(wait):
		t.Fatalf("acpd announced no address; stderr:\n%s", d.stderr.String())
	}
	d.base = strings.TrimSuffix(d.url, "/acp")
	return d
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and the certificate.
func selfSigned(t *testing.T) (cert, key string, der []byte) {
	c := acptest.WriteCert(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	return c.CertFile, c.KeyFile, c.Leaf.Raw
}

// h2c is a client speaking HTTP/2 with prior knowledge: one TCP connection
// carries every stream of the legitimate client, as an editor's would.
func h2c() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

// h1 is a fresh HTTP/1.1 client that keeps no connections.
func h1() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: wait}
}

// acpClient is an ACP connection over Streamable HTTP.
type acpClient struct {
	t      *testing.T
	d      *daemon
	hc     *http.Client
	connID string
	nextID atomic.Int64
	msgs   chan json.RawMessage // everything read from every stream
	ctx    context.Context
}

func connect(t *testing.T, d *daemon, hc *http.Client) *acpClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := &acpClient{t: t, d: d, hc: hc, msgs: make(chan json.RawMessage, 1024), ctx: ctx}
	resp := c.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	c.connID = resp.Header.Get("Acp-Connection-Id")
	require.NotEmpty(t, c.connID)
	c.stream("")
	return c
}

func (c *acpClient) request(method string, body io.Reader, sessionID string) *http.Request {
	req, err := http.NewRequestWithContext(c.ctx, method, c.d.url, body)
	require.NoError(c.t, err)
	req.Header.Set("Authorization", "Bearer "+c.d.token)
	if c.connID != "" {
		req.Header.Set("Acp-Connection-Id", c.connID)
	}
	if sessionID != "" {
		req.Header.Set("Acp-Session-Id", sessionID)
	}
	return req
}

func (c *acpClient) post(sessionID, msg string) *http.Response {
	req := c.request(http.MethodPost, strings.NewReader(msg), sessionID)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	require.NoError(c.t, err)
	return resp
}

// call POSTs a request and waits for its reply on the streams.
func (c *acpClient) call(sessionID, method string, params any) json.RawMessage {
	c.t.Helper()
	id := c.nextID.Add(1)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	resp := c.post(sessionID, string(b))
	resp.Body.Close()
	require.Equal(c.t, http.StatusAccepted, resp.StatusCode, method)
	return c.await(func(m map[string]json.RawMessage) bool { return string(m["id"]) == fmt.Sprint(id) })
}

// await returns the first message read that match accepts.
func (c *acpClient) await(match func(map[string]json.RawMessage) bool) json.RawMessage {
	c.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case raw := <-c.msgs:
			var m map[string]json.RawMessage
			if json.Unmarshal(raw, &m) == nil && match(m) {
				return raw
			}
		case <-timeout:
			c.t.Fatal("no matching message within the wait")
		}
	}
}

// stream opens the connection's SSE stream ("") or a session's and feeds
// its messages to msgs.
func (c *acpClient) stream(sessionID string) {
	c.t.Helper()
	req := c.request(http.MethodGet, nil, sessionID)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(req)
	require.NoError(c.t, err)
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				select {
				case c.msgs <- json.RawMessage(data):
				case <-c.ctx.Done():
					return
				}
			}
		}
	}()
}

// status sends a request built by mk and returns its status.
func status(t *testing.T, hc *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

func newReq(t *testing.T, method, url, token string, body io.Reader) *http.Request {
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

const initMsg = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`

// TestServeRefusals drives a served daemon through the built binary: while
// a legitimate connection's turn runs, each attack of the list is refused as
// specified, and the turn then ends as if nothing had happened.
func TestServeRefusals(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 1)
	ms := modeltest.NewServer(t)
	ms.SetResponder(func(modeltest.Request) (modeltest.Response, bool) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-gate // the turn stays in its model request until the attacks are over
		return modeltest.Response{Text: "all done"}, true
	})
	var gateOnce sync.Once
	openGate := func() { gateOnce.Do(func() { close(gate) }) }
	t.Cleanup(openGate)
	collector := telemetrytest.NewCollector(t)
	d := startDaemon(t, ms.BaseURL(), `maxTcpConnections = 16
headerTimeout = "3s"
authFailuresPerMinute = 8
maxMessageBytes = 1048576
maxSessionsPerConnection = 2
`, nil, "ACPD_TELEMETRY=true", "ACPD_TELEMETRY_PROTOCOL=http", "ACPD_TELEMETRY_ENDPOINT="+collector.URL())

	// The legitimate client: a session and a running turn.
	a := connect(t, d, h2c())
	var ns struct {
		Result struct{ SessionID string }
	}
	require.NoError(t, json.Unmarshal(a.call("", "session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}), &ns))
	sid := ns.Result.SessionID
	require.NotEmpty(t, sid)
	a.stream(sid)
	promptID := a.nextID.Add(1)
	resp := a.post(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"hi"}]}}`, promptID, sid))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	select {
	case <-started:
	case <-time.After(wait):
		t.Fatal("the turn never reached the model")
	}

	t.Run("second connection cannot reach the session", func(t *testing.T) {
		b := connect(t, d, h1())
		// Its own sessions, up to the bound.
		for range 2 {
			var r struct{ Result struct{ SessionID string } }
			require.NoError(t, json.Unmarshal(b.call("", "session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}), &r))
			require.NotEmpty(t, r.Result.SessionID)
		}
		var over struct {
			Error struct {
				Code    int
				Message string
				Data    map[string]any
			}
		}
		require.NoError(t, json.Unmarshal(b.call("", "session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}), &over))
		assert.Equal(t, -32603, over.Error.Code)
		assert.Equal(t, "session_limit", over.Error.Data["errorKind"], over.Error.Message)
		// Its session stream and a prompt for the session: 409, which the
		// SDK takes as that session failing, not the connection.
		req := b.request(http.MethodGet, nil, sid)
		req.Header.Set("Accept", "text/event-stream")
		code, _ := status(t, b.hc, req)
		assert.Equal(t, http.StatusConflict, code)
		req = b.request(http.MethodPost, strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"steal"}]}}`, sid)), sid)
		req.Header.Set("Content-Type", "application/json")
		code, _ = status(t, b.hc, req)
		assert.Equal(t, http.StatusConflict, code)

		// Over WebSocket there is no per-session request to refuse: the
		// agent answers, naming the session (TestServeSessionAccess has
		// every method).
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.url, "http"), &websocket.DialOptions{
			HTTPHeader: http.Header{"Authorization": {"Bearer " + d.token}}})
		require.NoError(t, err)
		defer ws.CloseNow()
		send := func(msg string) map[string]any {
			require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte(msg)))
			for {
				_, data, err := ws.Read(ctx)
				require.NoError(t, err)
				var m map[string]any
				require.NoError(t, json.Unmarshal(data, &m))
				if _, isReply := m["id"]; isReply && m["method"] == nil {
					return m
				}
			}
		}
		send(initMsg)
		r := send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"steal"}]}}`, sid))
		e := r["error"].(map[string]any)
		assert.EqualValues(t, -32603, e["code"])
		assert.Contains(t, e["message"], "session "+sid+" is live on another connection")
		r = send(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":%q,"cwd":%q,"mcpServers":[]}}`, sid, t.TempDir()))
		e = r["error"].(map[string]any)
		assert.EqualValues(t, -32603, e["code"])
		assert.Contains(t, e["message"], "session "+sid+" is live on another connection")
	})

	t.Run("host and origin", func(t *testing.T) {
		req := newReq(t, http.MethodPost, d.url, d.token, strings.NewReader(initMsg))
		req.Host = "rebound.attacker.example"
		code, _ := status(t, h1(), req)
		assert.Equal(t, http.StatusMisdirectedRequest, code)
		for _, mk := range []func() *http.Request{
			func() *http.Request { return newReq(t, http.MethodPost, d.url, d.token, strings.NewReader(initMsg)) },
			func() *http.Request {
				r := newReq(t, http.MethodGet, d.url, d.token, nil)
				r.Header.Set("Accept", "text/event-stream")
				r.Header.Set("Acp-Connection-Id", a.connID)
				return r
			},
			func() *http.Request { // the WebSocket upgrade
				r := newReq(t, http.MethodGet, d.url, d.token, nil)
				r.Header.Set("Connection", "Upgrade")
				r.Header.Set("Upgrade", "websocket")
				r.Header.Set("Sec-WebSocket-Version", "13")
				r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
				return r
			},
		} {
			req := mk()
			req.Header.Set("Origin", "https://evil.example")
			code, _ := status(t, h1(), req)
			assert.Equal(t, http.StatusForbidden, code, req.Method)
		}
	})

	t.Run("100 MB body", func(t *testing.T) {
		// A declared length past the bound is refused before the body is
		// read (a client library would see the reset of its upload, so the
		// request is written by hand).
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(d.base, "http://"), wait)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(wait))
		_, err = fmt.Fprintf(c, "POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", d.token, 100<<20)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "declared length")
		// Without a declared length the body is cut at the bound.
		req := newReq(t, http.MethodPost, d.url, d.token, io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"`), io.LimitReader(zeros{}, 100<<20)))
		req.ContentLength = -1
		code, _ := status(t, h1(), req)
		assert.Equal(t, http.StatusRequestEntityTooLarge, code, "chunked")
	})

	t.Run("100 MB body over HTTP/2", func(t *testing.T) {
		// The same bound over HTTP/2: refused with 413, declared or not,
		// the rest of the upload discarded.
		hc := h2c()
		hc.Timeout = wait
		req := newReq(t, http.MethodPost, d.url, d.token, io.LimitReader(zeros{}, 100<<20))
		req.ContentLength = 100 << 20
		resp, err := hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 2, resp.ProtoMajor)
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "declared length")
		req = newReq(t, http.MethodPost, d.url, d.token, io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"`), io.LimitReader(zeros{}, 100<<20)))
		req.ContentLength = -1
		resp, err = hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "undeclared length")
	})

	t.Run("headers one byte a second", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(d.base, "http://"), wait)
		require.NoError(t, err)
		defer c.Close()
		began := time.Now()
		// 400 bytes at one a second is almost seven minutes of headers.
		// The client is never idle for more than a second, so only a
		// bound on the whole header read (3 s here) stops it.
		head := "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + strings.Repeat("a", 400)
		closed := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, c); close(closed) }()
		sent := make(chan int, 1)
		go func() {
			n := 0
			defer func() { sent <- n }()
			for ; n < len(head); n++ {
				if _, err := c.Write([]byte{head[n]}); err != nil {
					return
				}
				select {
				case <-closed:
					return
				case <-time.After(time.Second):
				}
			}
		}()
		// Meanwhile the legitimate connection is served as ever.
		answered := 0
		deadline := time.After(wait)
	loop:
		for {
			select {
			case <-closed:
				break loop
			case <-deadline:
				t.Fatal("the slow client was never disconnected")
			case <-time.After(time.Second):
			}
			raw := a.call("", "session/list", map[string]any{})
			var r struct {
				Result *struct{ Sessions []struct{ SessionID string } }
			}
			require.NoError(t, json.Unmarshal(raw, &r))
			require.NotNil(t, r.Result, "the legitimate connection's session/list during the attack: %s", raw)
			assert.NotEmpty(t, r.Result.Sessions, string(raw))
			answered++
		}
		took := time.Since(began)
		n := <-sent
		assert.Less(t, n, len(head), "disconnected before its headers were complete")
		assert.GreaterOrEqual(t, n, 2, "it was cut off while it kept sending, not for being idle")
		assert.GreaterOrEqual(t, took, 2900*time.Millisecond, "not before the header timeout")
		assert.Less(t, took, 30*time.Second, "at the header timeout, not at the end of its headers")
		assert.Positive(t, answered, "the legitimate connection was answered while the attack ran")
	})

	t.Run("credentials", func(t *testing.T) {
		code, body := status(t, h1(), newReq(t, http.MethodPost, d.url, "", strings.NewReader(initMsg)))
		assert.Equal(t, http.StatusUnauthorized, code)
		assert.Equal(t, "unauthorized\n", body, "no detail")
		code, body = status(t, h1(), newReq(t, http.MethodPost, d.url, d.token+"x", strings.NewReader(initMsg)))
		assert.Equal(t, http.StatusUnauthorized, code)
		assert.Equal(t, "unauthorized\n", body, "no detail")
		for _, q := range []string{"?token=", "?access_token="} {
			code, _ = status(t, h1(), newReq(t, http.MethodPost, d.url+q+d.token, d.token, strings.NewReader(initMsg)))
			assert.Equal(t, http.StatusBadRequest, code, "a token in the URL is refused, even with the header: %s", q)
		}
		assert.NotContains(t, d.stderr.String(), d.token, "the token is never logged")
	})

	t.Run("2000 connection attempts", func(t *testing.T) {
		var wg sync.WaitGroup
		var accepted, refused atomic.Int64
		work := make(chan int)
		for range 32 {
			wg.Go(func() {
				for range work {
					c, err := net.DialTimeout("tcp", strings.TrimPrefix(d.base, "http://"), wait)
					if err != nil {
						refused.Add(1)
						continue
					}
					_ = c.SetDeadline(time.Now().Add(wait))
					_, _ = io.WriteString(c, "POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "+fmt.Sprint(len(initMsg))+"\r\nConnection: close\r\n\r\n"+initMsg)
					resp, err := http.ReadResponse(bufio.NewReader(c), nil)
					switch {
					case err != nil:
						refused.Add(1) // closed at accept: over the limit
					case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusTooManyRequests:
						refused.Add(1)
					default:
						accepted.Add(1)
					}
					c.Close()
				}
			})
		}
		for i := range 2000 {
			work <- i
		}
		close(work)
		wg.Wait()
		assert.Zero(t, accepted.Load())
		assert.EqualValues(t, 2000, refused.Load())
		// The address has used up its failures: a new connection from it
		// is refused even with the right token…
		code, _ := status(t, h1(), newReq(t, http.MethodPost, d.url, d.token, strings.NewReader(initMsg)))
		assert.Equal(t, http.StatusTooManyRequests, code)
	})

	// …while the connection already served goes on: its turn ends normally.
	openGate()
	var done struct {
		Result struct{ StopReason string }
	}
	raw := a.await(func(m map[string]json.RawMessage) bool { return string(m["id"]) == fmt.Sprint(promptID) })
	require.NoError(t, json.Unmarshal(raw, &done), string(raw))
	assert.Equal(t, "end_turn", done.Result.StopReason, string(raw))
	code, _ := status(t, a.hc, a.request(http.MethodDelete, nil, ""))
	assert.Equal(t, http.StatusAccepted, code)

	// The turn's spans carry the connection it came in on (exported at exit).
	d.stop()
	turns := collector.SpansNamed("invoke_agent acpd")
	require.Len(t, turns, 1)
	assert.Equal(t, a.connID, telemetrytest.Attrs(turns[0].Attributes)["acpd.connection.id"])
	chats := collector.SpansNamed("chat m")
	require.NotEmpty(t, chats)
	assert.Equal(t, a.connID, telemetrytest.Attrs(chats[0].Attributes)["acpd.connection.id"])
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestServeRefusesCleartextBeyondLoopback: a non-loopback address without
// TLS never starts.
func TestServeRefusesCleartextBeyondLoopback(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tok, []byte("test-token-0123456789abcdef"), 0o600))
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8123"} {
		cmd := exec.Command(acptest.Acpd(t), "serve", "--listen", addr, "--token-file", tok, "--data-dir", filepath.Join(dir, "data"))
		cmd.Env = append(os.Environ(), "HOME="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, addr)
		assert.Equal(t, 2, ee.ExitCode(), addr)
		assert.Contains(t, stderr.String(), "without TLS", addr)
		assert.Contains(t, stderr.String(), "--tls-cert", addr)
		assert.NotContains(t, stderr.String(), "serving ACP", addr)
	}
}

// TestServeTLS: with a certificate acpd serves HTTP/2 over TLS, and the
// health check answers with and without the token.
func TestServeTLS(t *testing.T) {
	cert, key, der := selfSigned(t)
	d := startDaemon(t, "http://127.0.0.1:1/v1", "", []string{"--tls-cert", cert, "--tls-key", key})
	require.True(t, strings.HasPrefix(d.url, "https://127.0.0.1:"), d.url)
	pool := x509.NewCertPool()
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool.AddCert(leaf)
	hc := &http.Client{Timeout: wait, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}

	resp, err := hc.Get(d.base + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode, "no credentials: only up")
	assert.Equal(t, 2, resp.ProtoMajor, "HTTP/2 over TLS")

	code, body := status(t, hc, newReq(t, http.MethodGet, d.base+"/healthz", d.token, nil))
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"status":"ok"`)
	code, _ = status(t, hc, newReq(t, http.MethodPost, d.url, d.token, strings.NewReader(initMsg)))
	assert.Equal(t, http.StatusOK, code)
}
