package h2server_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/acpd/acpd/acp/h2server"
)

// seedFrames is a well-formed conversation: SETTINGS, a GET, a POST with
// a body in two DATA frames, a window update, a PING, a reset and a
// header block split over CONTINUATION.
func seedFrames() []byte {
	var b, hb bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	enc := hpack.NewEncoder(&hb)
	block := func(method, path string, extra ...string) []byte {
		hb.Reset()
		for _, f := range [][2]string{{":method", method}, {":scheme", "http"}, {":authority", "x"}, {":path", path}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		for i := 0; i+1 < len(extra); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
		}
		return append([]byte(nil), hb.Bytes()...)
	}
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100})
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("GET", "/"), EndHeaders: true, EndStream: true})
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block("POST", "/echo", "content-length", "6"), EndHeaders: true})
	_ = fr.WriteData(3, false, []byte("abc"))
	_ = fr.WriteWindowUpdate(0, 1000)
	_ = fr.WriteWindowUpdate(3, 1000)
	_ = fr.WriteData(3, true, []byte("def"))
	_ = fr.WritePing(false, [8]byte{1, 2})
	_ = fr.WriteRSTStream(3, http2.ErrCodeCancel)
	bl := block("GET", "/big", "x-a", "1", "x-b", "2")
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: bl[:3], EndStream: true})
	_ = fr.WriteContinuation(5, true, bl[3:])
	_ = fr.WriteGoAway(5, http2.ErrCodeNo, nil)
	return b.Bytes()
}

// FuzzServeConn feeds arbitrary bytes after the preface to a connection:
// the server must neither panic nor hang, and ServeConn returns once the
// client is gone.
func FuzzServeConn(f *testing.F) {
	seed := seedFrames()
	f.Add(seed)
	f.Add(seed[:40])
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0})                         // empty SETTINGS
	f.Add([]byte{0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}) // PING
	f.Add([]byte{0, 0, 4, 8, 0, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff}) // WINDOW_UPDATE on an idle stream
	f.Add([]byte{0, 0, 1, 1, 0, 0, 0, 0, 1, 0xff})                   // HEADERS with a bad block
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 0, 1})                         // CONTINUATION out of place
	f.Fuzz(func(t *testing.T, in []byte) {
		srv := &h2server.Server{WriteTimeout: time.Second, HeaderTimeout: time.Second,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
				_, _ = w.Write(b)
				_, _ = w.Write([]byte("ok"))
			})}
		cc, sc := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.ServeConn(sc, false)
		}()
		go func() { _, _ = io.Copy(io.Discard, cc) }()
		_ = cc.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = cc.Write([]byte(h2server.Preface))
		_, _ = cc.Write(in)
		time.Sleep(time.Millisecond)
		_ = cc.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("ServeConn did not return after the client closed")
		}
	})
}
