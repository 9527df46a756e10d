package h2server_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/acpd/acpd/acp/h2server"
)

// client is a raw HTTP/2 client on one connection to a Server.
type client struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	henc *hpack.Encoder
	hbuf bytes.Buffer
	done chan struct{}
}

// waitClosed fails the test unless the server ends the connection
// within 5 s; why says what should have ended it.
func (c *client) waitClosed(why string) {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.t.Fatal(why)
	}
}

// dial starts srv on one end of a loopback TCP connection and returns a
// client on the other, past the preface and the SETTINGS exchange, with
// the client's settings.
func dial(t *testing.T, srv *h2server.Server, settings ...http2.Setting) *client {
	t.Helper()
	return dialWith(t, srv, nil, settings...)
}

// dialWith is dial with a hook on the server's end of the connection.
func dialWith(t *testing.T, srv *h2server.Server, hook func(*net.TCPConn), settings ...http2.Setting) *client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc, err := ln.Accept()
		if err != nil {
			return
		}
		if hook != nil {
			hook(sc.(*net.TCPConn))
		}
		srv.ServeConn(sc, false)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	c := &client{t: t, nc: nc, fr: http2.NewFramer(nc, nc), done: done}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	t.Cleanup(func() {
		_ = nc.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("ServeConn did not return after the client closed")
		}
	})
	_, err = nc.Write([]byte(h2server.Preface))
	require.NoError(t, err)
	require.NoError(t, c.fr.WriteSettings(settings...))
	// The server's SETTINGS, its connection WINDOW_UPDATE and the ACK of
	// ours, in some order.
	var sawSettings, sawAck bool
	for !sawSettings || !sawAck {
		f := c.read()
		if sf, ok := f.(*http2.SettingsFrame); ok {
			if sf.IsAck() {
				sawAck = true
			} else {
				sawSettings = true
				require.NoError(t, c.fr.WriteSettingsAck())
			}
		}
	}
	return c
}

func (c *client) read() http2.Frame {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := c.fr.ReadFrame()
	require.NoError(c.t, err)
	return f
}

// request opens stream id with a request for path.
func (c *client) request(id uint32, method, path string, end bool) {
	c.t.Helper()
	c.hbuf.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "http"}, {":authority", "localhost"}, {":path", path}} {
		require.NoError(c.t, c.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
	}
	require.NoError(c.t, c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true, EndStream: end}))
}

// until reads frames until one satisfies ok, and returns it.
func (c *client) until(ok func(http2.Frame) bool) http2.Frame {
	c.t.Helper()
	for {
		if f := c.read(); ok(f) {
			return f
		}
	}
}

func isRST(id uint32, code http2.ErrCode) func(http2.Frame) bool {
	return func(f http2.Frame) bool {
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == id && r.ErrCode == code
	}
}

// TestFlowControl_Send: a response goes out no faster than the client's
// windows allow, the stream's (SETTINGS_INITIAL_WINDOW_SIZE, then
// WINDOW_UPDATE) and the connection's.
func TestFlowControl_Send(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 100)
	srv := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
	})}
	c := dial(t, srv, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	c.request(1, "GET", "/", true)
	got := 0
	for got < 10 {
		if d, ok := c.read().(*http2.DataFrame); ok {
			got += len(d.Data())
		}
	}
	require.Equal(t, 10, got, "no more than the window")
	// Nothing more comes until the window opens.
	_ = c.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := c.fr.ReadFrame()
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "a frame beyond the window: %v", err)
	// A fresh framer: the timed-out one may hold a partial read.
	c.fr = http2.NewFramer(c.nc, c.nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	require.NoError(t, c.fr.WriteWindowUpdate(1, 90))
	var ended bool
	for !ended {
		if d, ok := c.read().(*http2.DataFrame); ok {
			got += len(d.Data())
			ended = d.StreamEnded()
		}
	}
	require.Equal(t, 100, got)
}

// TestFlowControl_WindowNeverOpens: a client that never opens its window
// loses the stream after WriteTimeout, and the handler's write fails.
func TestFlowControl_WindowNeverOpens(t *testing.T) {
	werr := make(chan error, 1)
	srv := &h2server.Server{WriteTimeout: 300 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello"))
		werr <- http.NewResponseController(w).Flush()
	})}
	c := dial(t, srv, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	c.request(1, "GET", "/", true)
	c.until(isRST(1, http2.ErrCodeCancel))
	require.Error(t, <-werr)
}

// TestFlowControl_Receive: a request body beyond the stream's window is a
// stream error; what the handler reads is given back with WINDOW_UPDATE.
func TestFlowControl_Receive(t *testing.T) {
	read := make(chan []byte, 1)
	srv := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/read" {
			b, _ := io.ReadAll(r.Body)
			read <- b
			return
		}
		<-r.Context().Done() // never reads
	})}
	c := dial(t, srv)
	c.request(1, "POST", "/read", false)
	require.NoError(t, c.fr.WriteData(1, false, bytes.Repeat([]byte("a"), 16384)))
	for back := uint32(0); back < 16384; {
		f := c.until(func(f http2.Frame) bool {
			w, ok := f.(*http2.WindowUpdateFrame)
			return ok && w.StreamID == 1
		})
		back += f.(*http2.WindowUpdateFrame).Increment
	}
	require.NoError(t, c.fr.WriteData(1, true, []byte("b")))
	require.Len(t, <-read, 16385)

	// 256 KiB is the stream window.
	c.request(3, "POST", "/hold", false)
	chunk := bytes.Repeat([]byte("c"), 16384)
	for range 16 {
		require.NoError(t, c.fr.WriteData(3, false, chunk))
	}
	require.NoError(t, c.fr.WriteData(3, false, []byte("over")))
	c.until(isRST(3, http2.ErrCodeFlowControl))
}

// TestConcurrencyBound: streams beyond SETTINGS_MAX_CONCURRENT_STREAMS are
// refused; a stream the client resets still counts until its handler
// returns; a client that keeps opening streams over the bound (the rapid
// reset attack) loses the connection, and the handlers running never
// pass the bound.
func TestConcurrencyBound(t *testing.T) {
	var running, most atomic.Int32
	release := make(chan struct{})
	srv := &h2server.Server{MaxConcurrentStreams: 2, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
	})}
	c := dial(t, srv)
	c.request(1, "GET", "/", true)
	c.request(3, "GET", "/", true)
	c.request(5, "GET", "/", true)
	c.until(isRST(5, http2.ErrCodeRefusedStream))
	// Reset stream 1: its handler still runs, so stream 7 is refused too.
	require.NoError(t, c.fr.WriteRSTStream(1, http2.ErrCodeCancel))
	c.request(7, "GET", "/", true)
	c.until(isRST(7, http2.ErrCodeRefusedStream))

	id := uint32(9)
	var goAway *http2.GoAwayFrame
	for goAway == nil {
		c.request(id, "GET", "/", true)
		_ = c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		id += 2
		_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := c.fr.ReadFrame()
		require.NoError(t, err)
		goAway, _ = f.(*http2.GoAwayFrame)
		require.Less(t, id, uint32(1000), "no GOAWAY for a flood of refused streams")
	}
	require.Equal(t, http2.ErrCodeEnhanceYourCalm, goAway.ErrCode)
	close(release)
	require.LessOrEqual(t, most.Load(), int32(2))
}

// TestTakeStream: a handler takes its stream and returns; the stream stays
// open and carries what is sent later; the client's reset ends it and
// calls gone.
func TestTakeStream(t *testing.T) {
	taken := make(chan *h2server.Stream, 1)
	gone := make(chan struct{})
	srv := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		st := w.(interface {
			TakeStream(func()) *h2server.Stream
		}).TakeStream(func() { close(gone) })
		taken <- st
	})}
	c := dial(t, srv)
	c.request(1, "GET", "/events", true)
	h := c.until(func(f http2.Frame) bool { _, ok := f.(*http2.MetaHeadersFrame); return ok }).(*http2.MetaHeadersFrame)
	require.Equal(t, "200", h.PseudoValue("status"))
	require.False(t, h.StreamEnded())
	st := <-taken
	require.NotNil(t, st)
	time.Sleep(50 * time.Millisecond) // the handler has returned
	require.NoError(t, st.Send([]byte("data: 1\n\n"), time.Now().Add(time.Second)))
	d := c.until(func(f http2.Frame) bool { _, ok := f.(*http2.DataFrame); return ok }).(*http2.DataFrame)
	require.Equal(t, "data: 1\n\n", string(d.Data()))
	require.NoError(t, c.fr.WriteRSTStream(1, http2.ErrCodeCancel))
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("gone was not called after the client's reset")
	}
	require.Error(t, st.Send([]byte("late"), time.Now().Add(time.Second)))
}

// TestShutdown: GOAWAY goes to every connection; a connection with a
// taken stream open ends once Shutdown's context is done.
func TestShutdown(t *testing.T) {
	srv := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(interface {
			TakeStream(func()) *h2server.Stream
		}).TakeStream(func() {})
	})}
	c := dial(t, srv)
	c.request(1, "GET", "/", true)
	c.until(func(f http2.Frame) bool { _, ok := f.(*http2.MetaHeadersFrame); return ok })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- srv.Shutdown(ctx) }()
	g := c.until(func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
	require.Equal(t, http2.ErrCodeNo, g.ErrCode)
	require.EqualValues(t, 1, g.LastStreamID)
	require.ErrorIs(t, <-errc, context.DeadlineExceeded)
	c.waitClosed("the connection outlived Shutdown")
}

// TestMalformedRequests: connection-specific headers, a bad path, CONNECT
// and extended CONNECT never reach the handler.
func TestMalformedRequests(t *testing.T) {
	var reached atomic.Int32
	srv := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) })}
	c := dial(t, srv)
	send := func(id uint32, fields ...[2]string) {
		c.hbuf.Reset()
		for _, f := range fields {
			require.NoError(t, c.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
		}
		require.NoError(t, c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true, EndStream: true}))
	}
	base := [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "localhost"}}
	send(1, append(base, [2]string{":path", "/"}, [2]string{"connection", "keep-alive"})...)
	c.until(isRST(1, http2.ErrCodeProtocol))
	send(3, append(base, [2]string{":path", "/"}, [2]string{"te", "gzip"})...)
	c.until(isRST(3, http2.ErrCodeProtocol))
	send(5, append(base, [2]string{":path", "no-slash"})...)
	c.until(isRST(5, http2.ErrCodeProtocol))
	send(7, [2]string{":method", "CONNECT"}, [2]string{":authority", "example.com:443"})
	h := c.until(func(f http2.Frame) bool { _, ok := f.(*http2.MetaHeadersFrame); return ok }).(*http2.MetaHeadersFrame)
	require.Equal(t, "405", h.PseudoValue("status"))
	send(9, [2]string{":method", "CONNECT"}, [2]string{":protocol", "websocket"}, [2]string{":scheme", "http"}, [2]string{":path", "/"}, [2]string{":authority", "localhost"})
	c.until(isRST(9, http2.ErrCodeProtocol))
	require.Zero(t, reached.Load())
}

// TestPingFlood: PINGs are answered as they are read; a client that sends
// them without reading the answers stops being read, so nothing queues,
// and loses the connection after WriteTimeout.
func TestPingFlood(t *testing.T) {
	srv := &h2server.Server{WriteTimeout: 500 * time.Millisecond, Handler: http.NotFoundHandler()}
	// Small socket buffers: the answers have nowhere to go soon.
	c := dialWith(t, srv, func(sc *net.TCPConn) { _ = sc.SetWriteBuffer(4096) })
	require.NoError(t, c.nc.(*net.TCPConn).SetReadBuffer(4096))
	var batch bytes.Buffer
	fr := http2.NewFramer(&batch, nil)
	for range 1000 {
		require.NoError(t, fr.WritePing(false, [8]byte{1}))
	}
	stop := time.Now().Add(60 * time.Second)
	var err error
	for err == nil && time.Now().Before(stop) {
		_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, err = c.nc.Write(batch.Bytes())
	}
	require.Error(t, err, "the server kept reading PINGs it could not answer")
	c.waitClosed("the connection of a client that never reads was not closed")
}

// TestRequestContext: a handler's request context ends when the client
// resets its stream, and when the connection closes.
func TestRequestContext(t *testing.T) {
	ended := make(chan string, 2)
	srv := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		ended <- r.URL.Path
	})}
	c := dial(t, srv)
	c.request(1, "GET", "/reset", true)
	c.request(3, "GET", "/close", true)
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, c.fr.WriteRSTStream(1, http2.ErrCodeCancel))
	select {
	case p := <-ended:
		require.Equal(t, "/reset", p)
	case <-time.After(5 * time.Second):
		t.Fatal("the reset did not end the request's context")
	}
	require.NoError(t, c.nc.Close())
	select {
	case p := <-ended:
		require.Equal(t, "/close", p)
	case <-time.After(5 * time.Second):
		t.Fatal("the connection's close did not end the request's context")
	}
}
