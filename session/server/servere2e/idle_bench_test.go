package servere2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/idletest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// BenchmarkServe_IdleSessions measures what 1,000 idle sessions cost a
// served daemon as the operating system sees it: the growth of the built
// binary's anonymous resident memory (RssAnon) over 1,000 session/new in
// one git workspace (idletest.Workspace), 50 on each of 20 connections,
// each waited for until its commands are announced. Over Streamable HTTP
// every session has its SSE stream open, as the SDK's client keeps one:
// "http" speaks HTTP/2 (h2c, one TCP connection per ACP connection, as the
// RFD asks), "http1" HTTP/1.1 as the SDK's Node client does (a TCP
// connection per stream: 1,020 of them, hence maxTcpConnections),
// "http1-tls" the same over TLS with a test certificate, as that client
// speaks to a daemon listening beyond loopback (over https it keeps to
// HTTP/1.1 too). Over WebSocket everything rides the connection's socket.
// "http-tls" and "websocket-tls" are HTTP/2 (ALPN h2) and WebSocket over
// the same TLS listener: one TLS connection per ACP connection, where
// "http1-tls" pays one per session. The baseline is
// read once the connections are open with one warm-up session each, so
// what a connection costs is not charged to its sessions. RSS is read 1 s
// after the last session is ready (anonKB/session-1s: what the runtime's
// scavenger returned alone), once the daemon has been quiet for
// idletest.Settled, past the 2 s of quiet after which the daemon hands a
// burst's garbage back (anonKB/session: what it holds from then on), and
// after 10 s (anonKB/session-10s: idleness must not grow it). Target: ≤ 32 KB
// a session on every transport.
func BenchmarkServe_IdleSessions(b *testing.B) {
	const conns, perConn = 20, 50
	ws := idletest.Workspace(b)
	srv := modeltest.NewServer(b) // never asked: no turn runs
	cfg := filepath.Join(b.TempDir(), "config.toml")
	require.NoError(b, os.WriteFile(cfg, []byte("[server]\nmaxConnections = 64\nmaxTcpConnections = 2048\n"), 0o600))
	cert, key, roots := selfSigned(b)
	for _, transport := range []string{"http", "http1", "http1-tls", "http-tls", "websocket", "websocket-tls"} {
		b.Run(transport, func(b *testing.B) {
			flags := []string{"--config", cfg, "--log-level", "error"}
			if strings.HasSuffix(transport, "-tls") {
				flags = append(flags, "--tls-cert", cert, "--tls-key", key)
			}
			var at1s, settled, at10s float64
			for b.Loop() {
				b.StopTimer()
				d := serve(b, srv, nil, flags...)
				cs := make([]*idleClient, conns)
				for i := range cs {
					cs[i] = dialIdle(b, d, transport, roots)
					cs[i].newSession(ws) // warm-up
				}
				g := idletest.Start(b, d.cmd.Process.Pid)
				b.StartTimer()
				for _, c := range cs {
					for range perConn {
						c.newSession(ws)
					}
				}
				b.StopTimer()
				g.Burst()
				n := conns * perConn
				at1s = g.After(b, time.Second, n)
				settled = g.After(b, idletest.Settled, n)
				at10s = g.After(b, 10*time.Second, n)
				for _, c := range cs {
					c.close()
				}
				d.stop()
				b.StartTimer()
			}
			b.ReportMetric(at1s, "anonKB/session-1s")
			b.ReportMetric(settled, "anonKB/session")
			b.ReportMetric(at10s, "anonKB/session-10s")
		})
	}
}

// h2cClient speaks HTTP/2 with prior knowledge over plain TCP, as a
// client of a loopback daemon may. One per ACP connection: each has a TCP
// connection of its own, as separate editors would.
func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

// idleClient is one connection of the benchmark. Requests go out one at a
// time; a reader takes every agent line as it comes, so no stream of the
// daemon is ever held up by the client.
type idleClient struct {
	tb   testing.TB
	conn remoteConn
	hc   *http.Client
	seq  int

	mu        sync.Mutex
	replies   map[string]chan reply    // by request id
	announced map[string]chan struct{} // by session id: commands announced
	done      chan struct{}
	err       error
}

type reply struct {
	Result json.RawMessage
	Error  json.RawMessage
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool trusting the certificate.
func selfSigned(tb testing.TB) (cert, key string, roots *x509.CertPool) {
	c := acptest.WriteCert(tb, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	return c.CertFile, c.KeyFile, c.Pool()
}

// tlsClient trusts roots and speaks HTTP/2 (h2) or HTTP/1.1 only.
func tlsClient(roots *x509.CertPool, h2 bool) *http.Client {
	var p http.Protocols
	if h2 {
		p.SetHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	return &http.Client{Transport: &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{RootCAs: roots}}}
}

func dialIdle(tb testing.TB, d *served, transport string, roots *x509.CertPool) *idleClient {
	tb.Helper()
	var hc *http.Client
	switch transport {
	case "http":
		hc = h2cClient()
	case "http1":
		// The SDK's Node client: HTTP/1.1, one TCP connection per open
		// stream.
		hc = &http.Client{Transport: &http.Transport{}}
		transport = "http"
	case "http1-tls":
		hc = tlsClient(roots, false)
		transport = "http"
	case "http-tls":
		// HTTP/2 by ALPN: every stream of the connection on one TLS
		// connection.
		hc = tlsClient(roots, true)
		transport = "http"
	case "websocket-tls":
		// The upgrade is an HTTP/1.1 request.
		hc = tlsClient(roots, false)
		transport = "websocket"
	}
	c := &idleClient{tb: tb, conn: dial(tb, d, transport, hc), hc: hc,
		replies: map[string]chan reply{}, announced: map[string]chan struct{}{}, done: make(chan struct{})}
	go c.read()
	c.call("initialize", map[string]any{"protocolVersion": 1})
	return c
}

func (c *idleClient) read() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.conn.Reader(), 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			return
		}
		var m struct {
			ID     json.RawMessage
			Method string
			Params struct {
				SessionID string
				Update    struct {
					SessionUpdate string
				}
			}
			Result json.RawMessage
			Error  json.RawMessage
		}
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		switch {
		case m.Method == "" && len(m.ID) > 0:
			c.mu.Lock()
			ch := c.replies[string(m.ID)]
			delete(c.replies, string(m.ID))
			c.mu.Unlock()
			if ch != nil {
				ch <- reply{m.Result, m.Error}
			}
		case m.Method == "session/update" && m.Params.Update.SessionUpdate == "available_commands_update":
			close(c.announce(m.Params.SessionID))
		}
	}
}

// announce is the channel closed once sid's commands are announced.
func (c *idleClient) announce(sid string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.announced[sid]
	if ch == nil {
		ch = make(chan struct{})
		c.announced[sid] = ch
	}
	return ch
}

func (c *idleClient) call(method string, params any) json.RawMessage {
	c.tb.Helper()
	c.seq++
	id := fmt.Sprint(c.seq)
	ch := make(chan reply, 1)
	c.mu.Lock()
	c.replies[id] = ch
	c.mu.Unlock()
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.seq, "method": method, "params": params})
	require.NoError(c.tb, err)
	_, err = c.conn.Write(append(line, '\n'))
	require.NoError(c.tb, err, "%s", method)
	var r reply
	c.wait(method, func() <-chan struct{} {
		got := make(chan struct{})
		go func() { r = <-ch; close(got) }()
		return got
	}())
	require.Nil(c.tb, r.Error, "%s answered %s", method, r.Error)
	return r.Result
}

// wait waits for ch, failing when the connection ends first or after a
// minute.
func (c *idleClient) wait(what string, ch <-chan struct{}) {
	c.tb.Helper()
	select {
	case <-ch:
	case <-c.done:
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		c.tb.Fatalf("%s: the connection ended: %v", what, err)
	case <-time.After(time.Minute):
		c.tb.Fatalf("%s: nothing within a minute", what)
	}
}

// newSession opens a session in cwd and waits until its commands are
// announced: its stream is open and its start-up work done.
func (c *idleClient) newSession(cwd string) string {
	c.tb.Helper()
	var r struct{ SessionID string }
	require.NoError(c.tb, json.Unmarshal(c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}), &r))
	c.wait("commands of "+r.SessionID, c.announce(r.SessionID))
	return r.SessionID
}

func (c *idleClient) close() {
	err := c.conn.Close()
	if err != nil && !errors.Is(err, context.Canceled) && !bytes.Contains([]byte(err.Error()), []byte("closed")) {
		c.tb.Logf("closing a connection: %v", err)
	}
	<-c.done
	if c.hc != nil {
		c.hc.CloseIdleConnections()
	}
}
