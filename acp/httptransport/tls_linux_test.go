package httptransport_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/httptransport"
)

// What the epoll watcher of TLS streams does beyond the portable watcher
// (a goroutine parked in a read, which cannot tell when a record will
// come): answer a KeyUpdate under a live write deadline, and bound what a
// client may send.

// TestTLSStream_RecordsWithoutData: records that end nothing keep the
// stream, which still carries events: an empty application data record,
// half a record (the rest comes later), a TLS 1.3 KeyUpdate asking for the
// server's own. The server answers the KeyUpdate at once, under a write
// deadline of its own: the last write's (WriteTimeout) is long past, and
// an answer that failed would fail every write after it. Application data
// is dropped. A close_notify under the new keys ends the stream.
func TestTLSStream_RecordsWithoutData(t *testing.T) {
	hs := newTLS1Harness(t, httptransport.Options{KeepAlive: noKeepAlive, WriteTimeout: 100 * time.Millisecond})
	conn := hs.initialize()
	cs := hs.openSSE(conn, "")
	hs.postOK(conn, "", newSession(1))
	sid := cs.next()["result"].(map[string]any)["sessionId"].(string)

	s := tlsGET(t, hs, conn, sid)
	if s.rec == nil {
		t.Skip("the test makes AES-GCM records only")
	}
	hs.postOK(conn, sid, prompt(2, sid, "echo first"))
	s.line(`data: {"id":2,`)
	// Past the reader's wait for the rest of a record (50 ms), and past
	// the write deadline of the last write.
	const past = 300 * time.Millisecond

	s.send(s.rec.seal(recData, nil))
	time.Sleep(past)
	require.True(t, held(hs, conn, sid), "an empty record")

	half := s.rec.seal(recData, []byte("dropped"))
	s.send(half[:9])
	time.Sleep(past)
	require.True(t, held(hs, conn, sid), "half a record")
	s.send(half[9:])
	time.Sleep(past)
	require.True(t, held(hs, conn, sid), "application data")

	s.send(s.rec.keyUpdate(true))
	time.Sleep(past)
	require.True(t, held(hs, conn, sid), "a KeyUpdate")
	// Go's client takes the server's KeyUpdate as it reads.
	hs.postOK(conn, sid, prompt(3, sid, "echo second"))
	s.line(`data: {"id":3,`)

	s.send(s.rec.seal(recAlert, closeNotify))
	letGo(t, hs, conn, sid)
	require.NoError(t, s.tc.SetReadDeadline(time.Now().Add(wait)))
	_, err := io.ReadAll(s.br)
	require.NoError(t, err, "the server closed its end")
}

// TestTLSStream_ClientFloods: a client that sends more than a stream has
// room to drop is closed.
func TestTLSStream_ClientFloods(t *testing.T) {
	hs := newTLS1Harness(t, httptransport.Options{KeepAlive: noKeepAlive})
	conn := hs.initialize()
	s := tlsGET(t, hs, conn, "flood")
	chunk := bytes.Repeat([]byte("x"), 4<<10)
	go func() {
		// Until the server closes the connection.
		for range 1024 {
			if _, err := s.tc.Write(chunk); err != nil {
				return
			}
		}
	}()
	letGo(t, hs, conn, "flood")
}
