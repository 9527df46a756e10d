package servere2e

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// TestRemote_DroppedConnection: a client that vanishes in the middle of a
// turn — its streams or socket cut, no DELETE, no close frame — loses
// nothing. The daemon sees the connection gone (over HTTP when its
// connection stream stays closed for the drop grace, over WebSocket at
// once), cancels the turn and stops its command, and a new connection loads
// the session well before the 10-minute idle timeout, gets the
// conversation replayed with the cancelled command in it, and continues it.
// "http1-tls" is HTTP/1.1 over TLS, as the SDK's Node client speaks to a
// daemon beyond loopback: every stream a TLS connection of its own, whose
// client's close the daemon must see through the TLS connection.
func TestRemote_DroppedConnection(t *testing.T) {
	transports := []string{"http", "websocket", "http1-tls"}
	srv := modeltest.NewServer(t)
	for i, tr := range transports {
		key := "DROP-" + tr + ":"
		srv.Add(
			modeltest.Response{Match: key, ToolCalls: []modeltest.ToolCall{shell(fmt.Sprintf("sleep %d", 9713+i))}},
			modeltest.Response{Match: key, Text: tr + " continued"},
		)
	}
	d := serve(t, srv, nil, "--approval-mode", "yolo")
	cert, key, roots := selfSigned(t)
	dTLS := serve(t, srv, nil, "--approval-mode", "yolo", "--tls-cert", cert, "--tls-key", key)
	for i, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			d := d
			if tr == "http1-tls" {
				d = dTLS
			}
			ctx := ctxFor(t, 3*time.Minute)
			ws := t.TempDir()
			sleepArg := fmt.Sprint(9713 + i)

			conn, drop := dialDroppable(t, d, tr, roots)
			a := acptest.NewClientConn(t, nil, conn.Reader(), conn)
			_, err := a.InitializeWith(ctx, acp.ClientCapabilities{})
			require.NoError(t, err)
			sid, err := a.NewSession(ctx, ws)
			require.NoError(t, err)
			turn := make(chan error, 1)
			go func() {
				_, err := a.Prompt(ctx, sid, "DROP-"+tr+": run the long command")
				turn <- err
			}()
			var callID string
			require.Eventually(t, func() bool {
				for _, n := range a.Updates() {
					// Without a permission to ask, the call is announced running.
					if u := n.Update.ToolCall; u != nil && u.Status == acp.StatusInProgress {
						callID = u.ToolCallID
					}
					if u := n.Update.ToolCallUpdate; u != nil && u.Status == acp.StatusInProgress {
						callID = u.ToolCallID
					}
				}
				return callID != "" && sleepRunning(sleepArg)
			}, time.Minute, 20*time.Millisecond, "the command never started")

			dropped := time.Now()
			drop()
			require.Error(t, <-turn, "the vanished client never got an answer")

			// A new connection loads the session as soon as the old one has
			// let go of it.
			bc, _ := dialDroppable(t, d, tr, roots)
			t.Cleanup(func() { _ = bc.Close() })
			b := acptest.NewClientConn(t, nil, bc.Reader(), bc)
			_, err = b.InitializeWith(ctx, acp.ClientCapabilities{})
			require.NoError(t, err)
			retries := 0
			for {
				err = b.Call(ctx, acp.MethodSessionLoad, acp.LoadSessionRequest{SessionID: sid, Cwd: ws, MCPServers: []acp.MCPServer{}}, nil)
				var e *acp.Error
				// Refused while the old connection holds the session: the
				// load answers so, or its session stream is 409.
				held := errors.As(err, &e) && (strings.Contains(e.Message, "live on another connection") || strings.Contains(e.Message, "409"))
				if !held || time.Since(dropped) > time.Minute {
					break
				}
				retries++
				time.Sleep(200 * time.Millisecond)
			}
			require.NoError(t, err, "session/load after the drop")
			took := time.Since(dropped)
			t.Logf("%s: loaded %s after the drop (%d refused loads)", tr, took.Round(time.Millisecond), retries)
			assert.Less(t, took, 40*time.Second, "the dropped connection held the session")
			assert.Eventually(t, func() bool { return !sleepRunning(sleepArg) }, 15*time.Second, 50*time.Millisecond,
				"the dropped turn's command still runs")

			// The replay has the cancelled command.
			var status acp.ToolCallStatus
			for _, n := range b.Updates() {
				if u := n.Update.ToolCallUpdate; n.SessionID == sid && u != nil && u.ToolCallID == callID && u.Status != "" {
					status = u.Status
				}
			}
			assert.Equal(t, acp.StatusFailed, status, "the replayed command")

			resp, err := b.Prompt(ctx, sid, "carry on")
			require.NoError(t, err)
			assert.Equal(t, acp.StopEndTurn, resp.StopReason)
			var text strings.Builder
			for _, n := range b.Updates() {
				if n.SessionID == sid && n.Update.Kind == acp.UpdateAgentMessageChunk && n.Update.Content != nil {
					text.WriteString(n.Update.Content.Text)
				}
			}
			assert.Contains(t, text.String(), tr+" continued")

			reason := "websocket closed"
			if tr != "websocket" {
				reason = "connection stream closed and not reopened"
			}
			assert.Contains(t, d.stderr.String(), reason)
		})
	}
}

// dialDroppable opens a connection over transport and returns it with the
// function that drops it.
func dialDroppable(t *testing.T, d *served, transport string, roots *x509.CertPool) (remoteConn, func()) {
	t.Helper()
	switch transport {
	case "websocket":
		ws, _, err := acptest.DialWS(t.Context(), d.URL, d.Header())
		require.NoError(t, err)
		return ws, ws.Drop
	case "http1-tls":
		hs := acptest.DialHTTP(d.URL, d.Header(), tlsClient(roots, false))
		return hs, hs.Drop
	}
	hs := acptest.DialHTTP(d.URL, d.Header(), nil)
	return hs, hs.Drop
}

// sleepRunning reports whether a process `sleep arg` runs on the machine.
func sleepRunning(arg string) bool {
	want := []byte("sleep\x00" + arg + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Equal(b, want) {
			return true
		}
	}
	return false
}
