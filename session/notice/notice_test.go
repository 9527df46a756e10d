package notice

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/acpd/acpd/acp"
	"github.com/stretchr/testify/require"
)

type sink struct {
	mu  sync.Mutex
	got []acp.Notice
}

func (s *sink) send(_ context.Context, u acp.SessionUpdate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.Kind != acp.UpdateNotice || u.Notice == nil {
		panic("not a notice: " + u.Kind)
	}
	s.got = append(s.got, *u.Notice)
}

func TestEveryKindHasARule(t *testing.T) {
	for k := InstructionFile; k <= ModelRetry; k++ {
		r, ok := ruleOf(k)
		require.True(t, ok, "kind %d", k)
		require.NotEmpty(t, r.title)
		require.Contains(t, []acp.NoticeSeverity{acp.SeverityInfo, acp.SeverityWarning, acp.SeverityError}, r.severity)
	}
	require.Equal(t, acp.SeverityWarning, Severity(AgentFile))
	require.Equal(t, acp.SeverityInfo, Severity(ProviderRetry))
	require.Equal(t, acp.SeverityError, Severity(SandboxFailed))
	for _, k := range []Kind{0, -1, ModelRetry + 1} {
		_, ok := ruleOf(k)
		require.False(t, ok, "kind %d", k)
		require.Empty(t, Title(k))
	}
}

func TestHeldUntilOpenThenSentOnce(t *testing.T) {
	var s sink
	var log bytes.Buffer
	n := New(slog.New(slog.NewTextHandler(&log, nil)), true, s.send)
	ctx := context.Background()
	n.Notify(ctx, AgentFile, "a.md:3: unknown tool")
	require.Empty(t, s.got, "nothing before the client knows the session")
	n.Open(ctx)
	require.Equal(t, []acp.Notice{{Severity: acp.SeverityWarning, Title: "Agent file problem", Description: "a.md:3: unknown tool"}}, s.got)
	n.Notify(ctx, AgentFile, "a.md:3: unknown tool")
	require.Len(t, s.got, 1, "a file problem is told once")
	n.Notify(ctx, ProviderRetry, "429")
	n.Notify(ctx, ProviderRetry, "429")
	require.Len(t, s.got, 3, "retries are told each time")
	require.Empty(t, n.TakeText(), "no agent text when notices are shown")
	require.Contains(t, log.String(), "level=WARN msg=\"Agent file problem\"")
	require.Contains(t, log.String(), "level=INFO msg=\"Model provider busy; retrying\"")
}

func TestWithoutTheCapability(t *testing.T) {
	var s sink
	var log bytes.Buffer
	n := New(slog.New(slog.NewTextHandler(&log, nil)), false, s.send)
	ctx := context.Background()
	n.Open(ctx)
	n.Notify(ctx, CommandFile, "x.toml: bad")
	n.Notify(ctx, MCPServerFailed, "srv: exec: not found")
	require.Empty(t, s.got)
	require.False(t, n.Enabled())
	require.Equal(t, []string{"MCP server failed to start: srv: exec: not found\n\n"}, n.TakeText())
	require.Empty(t, n.TakeText())
	require.True(t, strings.Contains(log.String(), "Command file problem") && strings.Contains(log.String(), "level=ERROR"))
}

func TestNilNotifierIsInert(t *testing.T) {
	var n *Notifier
	n.Notify(context.Background(), LoopWarning, "x")
	n.Open(context.Background())
	require.Nil(t, n.TakeText())
	require.False(t, n.Enabled())
}

func TestUnknownKindIsLoggedNotSent(t *testing.T) {
	var s sink
	var log bytes.Buffer
	n := New(slog.New(slog.NewTextHandler(&log, nil)), true, s.send)
	n.Open(context.Background())
	n.Notify(context.Background(), Kind(999), "x")
	require.Empty(t, s.got)
	require.Contains(t, log.String(), "unknown kind")
}
