package h2server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/acpd/acpd/acp/h2server"
)

// TestBodyReadEndsOnConnectionClose: a handler waiting for more of a
// request's body gets an error when the connection goes away, instead of
// waiting for ever (its goroutine and request leaked).
func TestBodyReadEndsOnConnectionClose(t *testing.T) {
	readErr := make(chan error, 1)
	srv := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	})}
	c := dial(t, srv)
	c.request(1, "POST", "/", false)
	require.NoError(t, c.fr.WriteData(1, false, []byte("part of a body")))
	time.Sleep(50 * time.Millisecond) // the handler is in Read
	require.NoError(t, c.nc.Close())
	select {
	case err := <-readErr:
		require.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's body read outlived the connection")
	}
}

// TestShutdownClientNotReading: a client that stopped reading (the
// server's reader is stuck writing it a PING acknowledgement) does not
// hold Shutdown past its context for the write timeout.
func TestShutdownClientNotReading(t *testing.T) {
	srv := &h2server.Server{WriteTimeout: 20 * time.Second, Handler: http.NotFoundHandler()}
	c := dialWith(t, srv, func(sc *net.TCPConn) { _ = sc.SetWriteBuffer(4096) })
	_ = c.nc.(*net.TCPConn).SetReadBuffer(4096)
	// PINGs until the client's own writes block: the server has stopped
	// reading, stuck in a write.
	for {
		_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
		if err := c.fr.WritePing(false, [8]byte{}); err != nil {
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := srv.Shutdown(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second, "Shutdown waited on a stuck write")
}

// TestHalfClosedLocalIdle: a stream whose response is complete while its
// client never ends the request body does not keep the connection from
// its idle timeout: a client with no credentials, answered 401, would
// otherwise hold a connection (and its slot under the daemon's connection
// bound) for ever, with a request it never finishes.
func TestHalfClosedLocalIdle(t *testing.T) {
	srv := &h2server.Server{IdleTimeout: 300 * time.Millisecond,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
		})}
	c := dial(t, srv)
	c.request(1, "POST", "/", false)
	c.until(func(f http2.Frame) bool { h, ok := f.(*http2.MetaHeadersFrame); return ok && h.StreamEnded() })
	g := c.until(func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
	require.Equal(t, http2.ErrCodeNo, g.ErrCode)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection outlived its idle timeout")
	}
}
