package model_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/sse"
)

// readText is a minimal protocol: every data event is text.
func readText(body io.Reader, emit func(model.Event) bool) error {
	r := sse.NewReader(body)
	defer r.Release()
	for {
		_, data, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := model.Emit(emit, model.Event{Kind: model.EventText, Text: string(data)}); err != nil {
			return err
		}
	}
}

// An endpoint that streams small events without end: the answer stops at
// the body's bound with a clear error, which is not retried.
func TestStreamer_AnswerBound(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		ev := []byte("data: " + strings.Repeat("t", 100) + "\n\n")
		for range 1 << 20 {
			if _, err := w.Write(ev); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	s := model.NewStreamer(model.HTTPOptions{Name: "p", MaxRetries: 3, MaxResponseBytes: 1 << 20})
	var got int
	var final error
	s.Stream(t.Context(), model.Call{URL: srv.URL, Body: func() io.Reader { return bytes.NewReader(nil) }, Read: readText},
		func(ev model.Event, err error) bool {
			if err != nil {
				final = err
				return false
			}
			got += len(ev.Text)
			return true
		})
	var tl *model.ResponseTooLargeError
	require.ErrorAs(t, final, &tl)
	assert.Contains(t, final.Error(), "p: the model server's answer passed 1 MiB")
	assert.Less(t, got, 1<<20)
	assert.Equal(t, int32(1), hits.Load(), "not retried")
}

// One event over the bound is not retried either, and names the provider.
func TestStreamer_EventBoundNotRetried(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: "))
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		for range (sse.MaxEventBytes >> 16) + 8 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	s := model.NewStreamer(model.HTTPOptions{Name: "gemini", MaxRetries: 3})
	var final error
	s.Stream(t.Context(), model.Call{URL: srv.URL, Body: func() io.Reader { return bytes.NewReader(nil) }, Read: readText},
		func(_ model.Event, err error) bool { final = err; return err == nil })
	var tl *sse.TooLargeError
	require.ErrorAs(t, final, &tl)
	assert.Contains(t, final.Error(), "gemini: the model server sent a stream event over 16 MiB")
	assert.Equal(t, int32(1), hits.Load(), "not retried")
}
