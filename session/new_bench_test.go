package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/instructions/gittest"
	"github.com/acpd/acpd/session/store"
)

// seedGitRepo makes a git repository of n committed files (100 folders of
// n/100 files) with an AGENTS.md at its root and returns its path.
func seedGitRepo(b *testing.B, n int) string {
	b.Helper()
	gittest.Require(b)
	dir := b.TempDir()
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%100))
		require.NoError(b, os.MkdirAll(sub, 0o755))
		require.NoError(b, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.go", i)), []byte("package p\n"), 0o644))
	}
	require.NoError(b, os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte("# Rules\n\nRun the tests.\n"), 0o644))
	gittest.Seed(b, dir)
	return dir
}

// BenchmarkNewSession_GitRepo10k sends session/new through a real acp.Conn
// over an in-memory pipe, with a durable store, for a workspace that is a
// git repository of 10,000 files; it times the request up to its response.
// Each iteration then lets the background gathering (environment,
// instruction files, commands) finish and closes the session, untimed.
func BenchmarkNewSession_GitRepo10k(b *testing.B) {
	repo := seedGitRepo(b, 10000)
	b.Setenv("XDG_CONFIG_HOME", b.TempDir())
	benchNewSession(b, repo, func(*Options) {})
}

// BenchmarkNewSession_GitRepo10kBare is the same with the environment block
// and the instruction files turned off.
func BenchmarkNewSession_GitRepo10kBare(b *testing.B) {
	repo := seedGitRepo(b, 10000)
	b.Setenv("XDG_CONFIG_HOME", b.TempDir())
	benchNewSession(b, repo, func(o *Options) { o.NoEnvironment, o.NoInstructions = true, true })
}

func benchNewSession(b *testing.B, repo string, set func(*Options)) {
	st, err := store.Open(b.TempDir(), store.Options{})
	require.NoError(b, err)
	opts := Options{Provider: &scriptProvider{}, Model: "m", Store: st}
	set(&opts)

	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	conn := acp.NewConn(agentIn, agentOut, acp.Options{})
	m := NewManager(conn, opts)
	served := make(chan error, 1)
	go func() { served <- conn.Serve(context.Background(), m) }()
	b.Cleanup(func() {
		m.Close()
		_ = clientOut.Close()
		<-served
		_ = agentOut.Close()
	})
	br := bufio.NewReaderSize(clientIn, 1<<20)
	seq := 0
	call := func(method string, params any) []byte {
		seq++
		line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": seq, "method": method, "params": params})
		require.NoError(b, err)
		_, err = clientOut.Write(append(line, '\n'))
		require.NoError(b, err)
		want := fmt.Appendf(nil, `"id":%d,`, seq)
		for {
			l, err := br.ReadBytes('\n')
			require.NoError(b, err)
			if bytes.Contains(l, want) && !bytes.Contains(l, []byte(`"method"`)) {
				require.NotContains(b, string(l), `"error"`)
				return l
			}
		}
	}
	call(acp.MethodInitialize, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersion})
	req := acp.NewSessionRequest{Cwd: filepath.Join(repo, "pkg07"), MCPServers: []acp.MCPServer{}}
	b.ReportAllocs()
	for b.Loop() {
		resp := call(acp.MethodSessionNew, req)
		var err error
		b.StopTimer()
		var r struct {
			Result acp.NewSessionResponse `json:"result"`
		}
		require.NoError(b, json.Unmarshal(resp, &r))
		// The gathering that session/new started after its answer runs to
		// its end outside the timed part, so one iteration's git commands
		// never overlap the next one's session/new.
		for !bytes.Contains(resp, []byte(`"available_commands_update"`)) {
			resp, err = br.ReadBytes('\n')
			require.NoError(b, err)
		}
		if sess := m.session(r.Result.SessionID); sess != nil {
			sess.startPrep()
			<-sess.prep.done
		}
		call(acp.MethodSessionClose, &acp.SessionIDRequest{SessionID: r.Result.SessionID})
		b.StartTimer()
	}
}
