package server

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session/heaprelease"
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

// TestAcceptNotesBurst: a connection the listener lets in counts towards a
// burst of set-ups, so the heap it left is returned once accepts go quiet
// (heaprelease); a refused one does not.
func TestAcceptNotesBurst(t *testing.T) {
	s, err := New(Options{Config: config.ServerConfig{Listen: "127.0.0.1:0", MaxTCPConnections: 1},
		Token: []byte(strings.Repeat("k", MinTokenLen))})
	require.NoError(t, err)
	require.NoError(t, s.Listen())
	defer s.ln.Close()
	noted := 0
	note := s.limit.onAccept
	require.NotNil(t, note)
	s.limit.onAccept = func() { noted++; note() }
	before := heaprelease.Released()
	dial := func() {
		d, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
	}
	dial()
	c, err := s.ln.Accept()
	require.NoError(t, err)
	assert.Equal(t, 1, noted)
	// Past MaxTCPConnections the next is refused (closed in Accept, which
	// then waits for another).
	dial()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := s.ln.Accept()
		assert.NoError(t, err)
		accepted <- c
	}()
	require.Eventually(t, func() bool { return s.limit.refused.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, c.Close())
	dial()
	(<-accepted).Close()
	assert.Equal(t, 2, noted, "the refused connection is not noted")
	require.Eventually(t, func() bool { return heaprelease.Released() > before },
		heaprelease.Quiet+heaprelease.MinInterval+20*time.Second, 50*time.Millisecond, "the accepts' burst released")
}
