package store

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

// BenchmarkList10k lists from a 10,000-session store: the first page, and
// a walk of every page with the default page size.
func BenchmarkList10k(b *testing.B) {
	dir := b.TempDir()
	seedSessions(b, dir, 10000)
	s, err := Open(dir, Options{})
	require.NoError(b, err)

	b.Run("first_page", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			page, _, err := s.List(ListOptions{})
			if err != nil || len(page) != DefaultPageSize {
				b.Fatalf("list: %d, %v", len(page), err)
			}
		}
	})
	b.Run("full_walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n, cur := 0, ""
			for {
				page, next, err := s.List(ListOptions{Cursor: cur})
				if err != nil {
					b.Fatal(err)
				}
				n += len(page)
				if next == "" {
					break
				}
				cur = next
			}
			if n != 10000 {
				b.Fatalf("walked %d sessions", n)
			}
		}
	})
	b.Run("cwd_filter_walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n, cur := 0, ""
			for {
				page, next, err := s.List(ListOptions{Cwd: "/w/1", Cursor: cur})
				if err != nil {
					b.Fatal(err)
				}
				n += len(page)
				if next == "" {
					break
				}
				cur = next
			}
			if n != 3333 {
				b.Fatalf("walked %d sessions", n)
			}
		}
	})
}

// BenchmarkOpen10kRebuild opens a 10,000-session store with no index, so
// the index is rebuilt from every transcript.
func BenchmarkOpen10kRebuild(b *testing.B) {
	dir := b.TempDir()
	seedSessions(b, dir, 10000)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		_ = removeIndex(dir)
		b.StartTimer()
		if _, err := Open(dir, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad5000 loads a 5,000-record transcript shaped like real turns
// (prompt, reasoning, text, tool calls, frames, results, turn end).
func BenchmarkLoad5000(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	require.NoError(b, err)
	w, err := s.Create(SessionMeta{ID: "big", Cwd: "/w"})
	require.NoError(b, err)
	for i := 1; i < 5000; i++ {
		var rec Record
		switch i % 7 {
		case 0:
			rec = Record{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock(fmt.Sprintf("please change function %d so that it handles the error path", i))}}
		case 1:
			rec = Record{Kind: KindReasoning, Text: "The user wants the error handled; read the file, then edit it."}
		case 2:
			rec = Record{Kind: KindText, Text: "I'll read the file first and then make the change."}
		case 3:
			rec = Record{Kind: KindToolCalls, ToolCalls: []ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: "read_file", Arguments: json.RawMessage(`{"path":"/w/src/main.go","offset":1,"limit":200}`)}}}
		case 4:
			rec = Record{Kind: KindToolCall, Tool: &ToolCallRecord{ToolCallID: fmt.Sprintf("call_%d", i-1), Name: "read_file", Title: "Read /w/src/main.go",
				Kind: acp.KindRead, Status: acp.StatusPending, Locations: []acp.ToolCallLocation{{Path: "/w/src/main.go"}}, RawInput: json.RawMessage(`{"path":"/w/src/main.go"}`)}}
		case 5:
			rec = Record{Kind: KindToolResult, Tool: &ToolCallRecord{ToolCallID: fmt.Sprintf("call_%d", i-2), Name: "read_file", Status: acp.StatusCompleted,
				Content: []acp.ToolCallContent{acp.TextContent("package main\n\nfunc main() {}\n")}, ModelText: "1\tpackage main\n2\t\n3\tfunc main() {}\n"}}
		default:
			rec = Record{Kind: KindTurnEnd, StopReason: acp.StopEndTurn}
		}
		require.NoError(b, w.Append(rec))
	}
	require.NoError(b, w.Close())
	b.ReportAllocs()
	for b.Loop() {
		tr, err := s.Load("big")
		if err != nil || len(tr.Records) != 5000 {
			b.Fatalf("load: %v", err)
		}
	}
}

func removeIndex(dir string) error { return os.Remove(dir + "/index.json") }

// BenchmarkOpenAndList10k is a cold start: open a 10,000-session store with
// a valid index (reconciled against the directory) and list the first page.
func BenchmarkOpenAndList10k(b *testing.B) {
	dir := b.TempDir()
	seedSessions(b, dir, 10000)
	_, err := Open(dir, Options{})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if page, _, err := s.List(ListOptions{}); err != nil || len(page) != DefaultPageSize {
			b.Fatalf("list: %d, %v", len(page), err)
		}
	}
}

// BenchmarkEndTurn10k is the per-turn cost (turn_end record, fsync, index
// rewrite) in a store holding 10,000 sessions.
func BenchmarkEndTurn10k(b *testing.B) {
	dir := b.TempDir()
	seedSessions(b, dir, 10000)
	s, err := Open(dir, Options{})
	require.NoError(b, err)
	w, err := s.Create(SessionMeta{ID: "live", Cwd: "/w"})
	require.NoError(b, err)
	b.Cleanup(func() { w.Close() })
	b.ReportAllocs()
	for b.Loop() {
		if err := w.EndTurn(acp.StopEndTurn, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendToolResult is the record every completed tool call
// writes: its frame's content and the text the model receives.
func BenchmarkAppendToolResult(b *testing.B) {
	st, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := st.Create(SessionMeta{ID: "bench", Cwd: "/w", CreatedAt: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	text := strings.Repeat("    12\tline of text\n", 20)
	rec := Record{Kind: KindToolResult, Tool: &ToolCallRecord{
		ToolCallID: "call_1", Name: "read_file", Kind: acp.KindRead, Status: acp.StatusCompleted,
		Locations: []acp.ToolCallLocation{{Path: "/w/f000_1.txt"}}, Content: []acp.ToolCallContent{acp.TextContent(text)}, ModelText: text,
	}}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
}
