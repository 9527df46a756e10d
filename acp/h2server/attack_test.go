package h2server_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
