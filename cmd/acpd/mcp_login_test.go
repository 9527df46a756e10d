package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/mcp/oauth/oauthtest"
)

// acpd mcp login signs in from a terminal: it prints the page, the user
// signs in on another machine and pastes the address the browser ended on;
// the token lands 0600 in the data folder. logout forgets it.
func TestMCPLogin_PasteBack(t *testing.T) {
	t.Parallel()
	bin := acpdBinary(t)
	e := newRunEnv(t)
	as := oauthtest.NewAS(t)
	endpoint := as.Protect(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "mcp", "login", endpoint)
	cmd.Env = e.env
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var page string
	var out strings.Builder
	r := bufio.NewReader(stderr)
	for page == "" {
		line, err := r.ReadString('\n')
		require.NoError(t, err, out.String())
		out.WriteString(line)
		if l := strings.TrimSpace(line); strings.HasPrefix(l, as.URL+"/authorize?") {
			page = l
		}
	}
	loc, err := oauthtest.Consent(page)
	require.NoError(t, err)
	_, err = io.WriteString(stdin, loc+"\n")
	require.NoError(t, err)
	rest, _ := io.ReadAll(r)
	require.NoError(t, cmd.Wait(), out.String()+string(rest))
	assert.Contains(t, string(rest), "signed in to "+endpoint)
	assert.Equal(t, 1, as.Counts().Exchanged)

	files, err := filepath.Glob(filepath.Join(e.dir, "state", "acpd", "mcp-oauth", "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	fi, err := os.Stat(files[0])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	o := e.run(t, "", "mcp", "logout", endpoint)
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stderr, "signed out of "+endpoint)
	files, _ = filepath.Glob(filepath.Join(e.dir, "state", "acpd", "mcp-oauth", "*.json"))
	assert.Empty(t, files)

	o = e.run(t, "", "mcp", "login", "docs")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "--mcp-config")
}
