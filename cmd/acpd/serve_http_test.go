package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// acpd serve refuses to start without an address or a token, and its
// flags are its own: the stdio daemon does not take them.
func TestServeHTTP_UsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "no address", args: []string{"serve"}, want: "no address to listen on: give --listen HOST:PORT"},
		{name: "no token", args: []string{"serve", "--listen", "127.0.0.1:0"}, want: "create one with `acpd serve --init-token`"},
		{name: "cleartext beyond loopback", args: []string{"serve", "--listen", "0.0.0.0:8123"}, want: "refusing to listen on 0.0.0.0:8123"},
		{name: "a cert without its key", args: []string{"serve", "--listen", "0.0.0.0:8123", "--tls-cert", "/c.pem"}, want: "server.tlsCert is set but server.tlsKey is not"},
		{name: "not a stdio flag", args: []string{"--listen", "127.0.0.1:0"}, want: "acpd: unknown flag: --listen; see 'acpd --help'"},
		{name: "extra argument", args: []string{"serve", "--listen", "127.0.0.1:0", "x"}, want: `acpd serve: unexpected argument "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newSandbox(t).run(t, nil, tt.args...)
			assert.Equal(t, exitUsage, r.code, r.stderr)
			assert.Contains(t, r.stderr, tt.want)
			assert.Empty(t, r.stdout)
		})
	}
}

// --init-token writes a token readable by its owner only, prints it once
// on stdout, and never replaces one.
func TestServeHTTP_InitToken(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	r := sb.run(t, nil, "serve", "--init-token")
	require.Equal(t, exitOK, r.code, r.stderr)
	path := filepath.Join(sb.dir, "state", "acpd", "server.token")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	tok := strings.TrimSpace(string(b))
	assert.Equal(t, tok+"\n", r.stdout)
	assert.GreaterOrEqual(t, len(tok), 40)
	assert.NotContains(t, r.stderr, tok, "printed once, on stdout")
	assert.Contains(t, r.stderr, path)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	r = sb.run(t, nil, "serve", "--init-token")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "remove it first")
	b2, _ := os.ReadFile(path)
	assert.Equal(t, string(b), string(b2), "the token in use is kept")

	other := filepath.Join(sb.dir, "elsewhere", "tok")
	r = sb.run(t, nil, "serve", "--init-token", other)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--token-file "+other)
}
