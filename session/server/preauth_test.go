package server_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model/modeltest"
)

// preAuthPhase is one way an unauthenticated client holds a connection.
type preAuthPhase struct {
	name string
	tls  bool
	// open does the phase's part on a fresh connection, which stays in
	// the phase from there on.
	open func(t *testing.T, c net.Conn)
	// atAnswer: the phase ends with a refusal, which closes the
	// connection; otherwise the header timeout does (or a newer
	// connection takes its place).
	atAnswer bool
}

// TestServePreAuthDeadlines: 256 unauthenticated sockets, as many as
// server.maxTcpConnections, in each phase before authentication — slow
// headers, a declared body never sent, a TLS handshake never finished, an
// idle keep-alive after a refused WebSocket upgrade, an HTTP/2 connection
// with no request — are all closed within their deadline (at the refusal,
// or server.headerTimeout after their accept), while a client with the
// token opens its session, its streams (new connections, which take the
// place of the oldest unauthenticated ones) and completes a turn. Before,
// the body and the upgrade's keep-alive held their connections for minutes
// and every other phase kept the client with the token out until the
// header timeout.
func TestServePreAuthDeadlines(t *testing.T) {
	const sockets = 256
	const headerTimeout = 4 * time.Second
	// What a loaded machine may add to a deadline; past the deadlines the
	// attacks used to hold their connections for minutes.
	const slack = 3 * time.Second
	phases := []preAuthPhase{
		{name: "slow headers", open: func(t *testing.T, c net.Conn) {
			_, err := io.WriteString(c, "POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
			require.NoError(t, err)
			go func() { // a header byte every half second, never the end
				for {
					time.Sleep(500 * time.Millisecond)
					if _, err := io.WriteString(c, "X"); err != nil {
						return
					}
				}
			}()
		}},
		{name: "unread body", atAnswer: true, open: func(t *testing.T, c net.Conn) {
			_, err := io.WriteString(c, "POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n")
			require.NoError(t, err)
		}},
		{name: "half-open TLS", tls: true, open: func(t *testing.T, c net.Conn) {
			// A TLS record header announcing a ClientHello, and no more.
			_, err := c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01})
			require.NoError(t, err)
		}},
		{name: "idle WebSocket upgrade", atAnswer: true, open: func(t *testing.T, c net.Conn) {
			_, err := io.WriteString(c, "GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
				"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
			require.NoError(t, err)
		}},
		{name: "idle HTTP/2", open: func(t *testing.T, c net.Conn) {
			// The preface and an empty SETTINGS frame: a connection that
			// opens no stream.
			_, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
			require.NoError(t, err)
		}},
	}
	cert, key, der := selfSigned(t)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	for _, ph := range phases {
		t.Run(ph.name, func(t *testing.T) {
			ms := modeltest.NewServer(t, modeltest.Response{Text: "all done"})
			var args []string
			hc := &http.Client{Timeout: wait, Transport: &http.Transport{MaxConnsPerHost: 4}}
			if ph.tls {
				args = []string{"--tls-cert", cert, "--tls-key", key}
				// HTTP/1.1, as the SDK's Node client over https: every
				// stream a TLS connection of its own.
				hc.Transport = &http.Transport{MaxConnsPerHost: 4, TLSClientConfig: &tls.Config{RootCAs: roots}}
			}
			d := startDaemon(t, ms.BaseURL(), fmt.Sprintf("maxTcpConnections = %d\nheaderTimeout = %q\n", sockets, headerTimeout), args)
			addr := strings.TrimPrefix(strings.TrimPrefix(d.base, "http://"), "https://")

			// The client with the token connects first, as an editor would
			// before the attack: its later requests come from an address
			// whose failures the attack used up, and a live connection's
			// requests with the right token go through.
			a := connect(t, d, hc)

			var wg sync.WaitGroup
			held := make([]time.Duration, sockets)
			answers := make([]string, sockets)
			for i := range sockets {
				c, err := net.DialTimeout("tcp", addr, wait)
				require.NoError(t, err)
				t.Cleanup(func() { c.Close() })
				began := time.Now()
				ph.open(t, c)
				wg.Go(func() {
					_ = c.SetReadDeadline(time.Now().Add(wait))
					b, _ := io.ReadAll(c) // until the daemon closes it
					held[i] = time.Since(began)
					answers[i], _, _ = strings.Cut(string(b), "\r\n")
				})
			}

			// Meanwhile the client with the token runs a turn, on new
			// connections.
			var ns struct{ Result struct{ SessionID string } }
			require.NoError(t, json.Unmarshal(a.call("", "session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}), &ns))
			sid := ns.Result.SessionID
			require.NotEmpty(t, sid)
			a.stream(sid)
			var done struct{ Result struct{ StopReason string } }
			raw := a.call(sid, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "hi"}}})
			require.NoError(t, json.Unmarshal(raw, &done), string(raw))
			assert.Equal(t, "end_turn", done.Result.StopReason, string(raw))

			wg.Wait()
			limit := headerTimeout + slack
			if ph.atAnswer {
				limit = slack
			}
			var longest time.Duration
			for _, h := range held {
				longest = max(longest, h)
			}
			assert.Less(t, longest, limit, "every unauthenticated socket closed within its deadline")
			if ph.atAnswer {
				for _, ans := range answers {
					// 429 once the address has used up its failures.
					require.Contains(t, []string{"HTTP/1.1 401 Unauthorized", "HTTP/1.1 429 Too Many Requests"}, ans, "refused, then closed")
				}
			}
			t.Logf("%d sockets, the longest held %v", sockets, longest.Round(time.Millisecond))
			if !ph.atAnswer {
				assert.Contains(t, d.stderr.String(), "unauthenticated connection closed",
					"the client with the token came while the attack held every place, and took the oldest")
			}
		})
	}
}
