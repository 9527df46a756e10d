package server

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/config"
)

func TestCheckAddress(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"127.0.0.1:0", "[::1]:8123", "localhost:80", "127.1.2.3:9"} {
		assert.NoError(t, CheckAddress(a, false), a)
	}
	for _, a := range []string{"0.0.0.0:8123", ":8123", "[::]:1", "10.0.0.5:80", "myhost.example:80"} {
		err := CheckAddress(a, false)
		if assert.Error(t, err, a) {
			assert.Contains(t, err.Error(), "without TLS")
		}
		assert.NoError(t, CheckAddress(a, true), a)
	}
	assert.ErrorContains(t, CheckAddress("nope", true), "host:port")
}

func TestHostAllowed(t *testing.T) {
	t.Parallel()
	g := &guard{hosts: listenHosts(config.ServerConfig{Listen: "acpd.internal:8443", AllowedHosts: []string{"acpd.example.com"}})}
	for _, h := range []string{"127.0.0.1:8123", "127.0.0.1", "[::1]:9000", "localhost:9000", "LOCALHOST", "10.1.2.3:443",
		"acpd.internal:8443", "acpd.example.com", "acpd.example.com.:443"} {
		assert.True(t, g.hostAllowed(h), h)
	}
	for _, h := range []string{"", "evil.example", "evil.example:8123", "localhost.evil.example", "acpd.example.com.evil"} {
		assert.False(t, g.hostAllowed(h), h)
	}
}

func TestFailLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := newFailLimiter(3)
	l.now = func() time.Time { return now }
	assert.False(t, l.blocked("a"))
	assert.False(t, l.fail("a"))
	assert.False(t, l.fail("a"))
	assert.True(t, l.fail("a"), "the third failure uses up the budget")
	assert.True(t, l.blocked("a"))
	assert.False(t, l.blocked("b"), "per address")
	now = now.Add(20 * time.Second) // a third of a minute: one failure back
	assert.False(t, l.blocked("a"))
	assert.True(t, l.fail("a"))
}

func TestClientKey(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "192.0.2.7", clientKey("192.0.2.7:5555"))
	assert.Equal(t, "192.0.2.7", clientKey("[::ffff:192.0.2.7]:5555"))
	assert.Equal(t, "2001:db8:1:2::/64", clientKey("[2001:db8:1:2:aaaa::1]:443"), "one host owns its /64")
}

func TestTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := config.Config{Session: config.SessionConfig{DataDir: dir}}
	_, err := LoadToken(cfg, os.Getenv)
	assert.ErrorContains(t, err, "--init-token", "no file: say how to make one")

	path := TokenFile(cfg)
	assert.Equal(t, filepath.Join(dir, "server.token"), path)
	tok, err := WriteTokenFile(path)
	require.NoError(t, err)
	assert.Len(t, tok, 43)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	_, err = WriteTokenFile(path)
	assert.ErrorContains(t, err, "remove it first", "never overwritten")
	got, err := LoadToken(cfg, os.Getenv)
	require.NoError(t, err)
	assert.Equal(t, tok, string(got))

	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("abc\n"), 0o600))
	_, err = LoadToken(config.Config{Server: config.ServerConfig{TokenFile: short}}, os.Getenv)
	assert.ErrorContains(t, err, "fewer than 16")

	env := config.Config{Server: config.ServerConfig{TokenEnv: "T", TokenFile: path}}
	_, err = LoadToken(env, func(string) string { return "" })
	assert.ErrorContains(t, err, "names T, which is empty")
	got, err = LoadToken(env, func(string) string { return " " + strings.Repeat("z", 20) + "\n" })
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("z", 20), string(got), "the variable wins over the file")

	c := newTokenCheck([]byte("secret-secret-secret"))
	assert.True(t, c.ok("secret-secret-secret"))
	assert.False(t, c.ok("secret-secret-secreT"))
	assert.False(t, c.ok(""))
}

// TestLimitListener: at the bound a new connection takes the place of the
// oldest one that has not authenticated; one that has keeps its place, and
// once all have, a new connection is closed at accept. An unauthenticated
// connection is closed at its deadline, an authenticated one is not.
func TestLimitListener(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var noted atomic.Int64 // connections let in: a burst's work (releaser)
	l := &limitListener{Listener: ln, max: 2, preAuth: time.Hour, onAccept: func() { noted.Add(1) }}
	defer l.Close()
	// dial connects and returns the client's end and the accepted one;
	// accepted is nil when the listener closed it.
	dial := func() (client net.Conn, accepted *limitConn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		got := make(chan net.Conn, 1)
		go func() {
			a, err := l.Accept()
			if err == nil {
				got <- a
			}
		}()
		select {
		case a := <-got:
			return c, a.(*limitConn)
		case <-time.After(time.Second):
			return c, nil // closed at accept; Accept waits for the next
		}
	}
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err != nil && !os.IsTimeout(err)
	}

	c1, a1 := dial()
	_, a2 := dial()
	require.NotNil(t, a1)
	require.NotNil(t, a2)
	a2.authenticated()
	c3, a3 := dial() // takes c1's place: the oldest not authenticated
	require.NotNil(t, a3)
	assert.True(t, closed(c1), "the oldest unauthenticated connection made room")
	assert.EqualValues(t, 1, l.evicted.Load())
	assert.Equal(t, 2, l.Open())

	a3.authenticated()
	c4, _ := dial() // every place is a client's with the token
	assert.True(t, closed(c4), "refused at accept")
	assert.EqualValues(t, 1, l.refused.Load())
	assert.False(t, closed(c3), "an authenticated connection is never taken")
	assert.EqualValues(t, 3, noted.Load(), "the refused connection is not noted")

	require.NoError(t, a3.Close())
	_ = a3.Close()
	_ = a1.Close()
	assert.Equal(t, 1, l.Open(), "a second close frees no second place")
	require.NoError(t, a2.Close())
	assert.Zero(t, l.Open())
	assert.Zero(t, l.expired.Load())
}

// TestLimitListenerDeadline: a connection that has not authenticated is
// closed at its deadline, and its place freed; one that has is not.
func TestLimitListenerDeadline(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := &limitListener{Listener: ln, max: 4, preAuth: 300 * time.Millisecond}
	defer l.Close()
	var clients []net.Conn
	var accepted []*limitConn
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		a, err := l.Accept()
		require.NoError(t, err)
		clients, accepted = append(clients, c), append(accepted, a.(*limitConn))
	}
	began := time.Now()
	accepted[1].authenticated()
	_ = clients[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = clients[0].Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, os.IsTimeout(err), "closed, not timed out")
	assert.GreaterOrEqual(t, time.Since(began), 250*time.Millisecond)
	assert.EqualValues(t, 1, l.expired.Load())
	assert.Equal(t, 1, l.Open())
	_ = clients[1].SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err = clients[1].Read(make([]byte, 1))
	require.True(t, os.IsTimeout(err), "the authenticated connection stays open: %v", err)
}
