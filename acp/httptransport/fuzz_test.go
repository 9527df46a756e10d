package httptransport_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpd/acpd/acp/httptransport"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// FuzzRequest feeds arbitrary POST and DELETE requests (body, content
// type, connection and session headers) to a handler serving a real
// acp.Conn. The handler must answer every one with a defined status and
// never panic (a recovered panic is logged, and the log is checked).
func FuzzRequest(f *testing.F) {
	for _, s := range []string{initBody, newSession(1), prompt(2, "s1", "echo a"), `[1,2]`, `{"id":`, `null`, `"x"`, `{}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"initialize"}`, `{"jsonrpc":"2.0","id":1,"method":7,"params":{"sessionId":3}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`, "\xff\xfe", ` {"method":"session/cancel","params":{"sessionId":"s1"}} `} {
		f.Add(uint8(0), "application/json", uint8(1), "s1", s)
	}
	f.Add(uint8(1), "application/json", uint8(1), "", "")
	f.Add(uint8(0), "text/plain; x=", uint8(2), "", initBody)

	logs := &lockedBuf{}
	hs := newHarness(f, httptransport.Options{
		Logger:          slog.New(slog.NewTextHandler(logs, nil)),
		MaxMessageBytes: 1 << 16,
		IdleTimeout:     200 * time.Millisecond,
	}, false)
	conn := hs.initialize()
	allowed := map[int]bool{200: true, 202: true, 400: true, 404: true, 409: true, 413: true, 504: true, 415: true, 501: true, 503: true}
	f.Fuzz(func(t *testing.T, method uint8, ctype string, connSel uint8, sess, body string) {
		m := http.MethodPost
		if method%4 == 1 {
			m = http.MethodDelete
		}
		r := httptest.NewRequest(m, "/acp", strings.NewReader(body))
		r.Header.Set("Content-Type", ctype)
		switch connSel % 3 {
		case 1:
			r.Header.Set(httptransport.HeaderConnectionID, conn)
		case 2:
			r.Header.Set(httptransport.HeaderConnectionID, sess)
		}
		if sess != "" {
			r.Header.Set(httptransport.HeaderSessionID, sess)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		r = r.WithContext(ctx)
		rec := httptest.NewRecorder()
		hs.h.ServeHTTP(rec, r)
		if ctx.Err() != nil {
			t.Fatalf("request hung: %s %q conn=%d sess=%q", m, body, connSel%3, sess)
		}
		if !allowed[rec.Code] {
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		if l := logs.String(); strings.Contains(l, "panic") {
			t.Fatalf("handler panicked: %s", l)
		}
		if m == http.MethodDelete && rec.Code == http.StatusAccepted {
			r := httptest.NewRequest(http.MethodPost, "/acp", strings.NewReader(initBody))
			r.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			hs.h.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Fatalf("re-initialize: %d", rec.Code)
			}
			conn = rec.Header().Get(httptransport.HeaderConnectionID)
		}
	})
}
