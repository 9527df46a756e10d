package session_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/contextmgr"
	"github.com/acpd/acpd/session/contextmgr/contextmgrtest"
	"github.com/acpd/acpd/session/model/anthropic/anthropictest"
)

// anthropicSummariser answers compaction's summary requests (the
// summariser's own system prompt, or the conversation re-sent with the
// snapshot request last) with a state snapshot.
func anthropicSummariser(r anthropictest.Request) (anthropictest.Response, bool) {
	prefix := contextmgr.SummaryPrompt[:80]
	last := r.Messages[len(r.Messages)-1]
	var lastText string
	for _, b := range last.Content {
		if b.Type == "text" {
			lastText = b.Text
		}
	}
	if !strings.HasPrefix(r.SystemText(), prefix) && !(last.Role == "user" && strings.HasPrefix(lastText, prefix)) {
		return anthropictest.Response{}, false
	}
	return anthropictest.Response{Text: "<analysis>reading the conversation</analysis>\n" + contextmgrtest.Snapshot("as discussed so far")}, true
}

// BenchmarkAnthropicLongSessionBill is the cost tests' long session (60
// prompts, each reading and summarising a different 24 KB file, against a
// 48,000-token model) spoken natively to the Anthropic test server, which
// caches only at cache_control breakpoints (20-block look-back, 1,024-token
// minimum) and bills cache writes at 1.25× and reads at 0.1× the input
// price. Every prompt must end end_turn with no request refused, and the
// bill must stay within 0.6 M full-price-equivalent tokens; it reports the
// bill (fpe-tokens) and its parts. A benchmark, not a test: the session
// runs about 130 model requests through the built binary.
//
//	go test -run '^$' -bench AnthropicLongSessionBill -benchtime 1x ./session
func BenchmarkAnthropicLongSessionBill(b *testing.B) {
	const window, prompts = 48000, 60
	for b.Loop() {
		bill := anthropicLongSession(b, window, prompts)
		b.ReportMetric(float64(bill.FullPriceEquivalent), "fpe-tokens")
		b.ReportMetric(float64(bill.Input), "uncached-tokens")
		b.ReportMetric(float64(bill.CacheWrite), "cache-write-tokens")
		b.ReportMetric(float64(bill.CacheRead), "cache-read-tokens")
		b.ReportMetric(float64(bill.Requests), "requests")
		if bill.FullPriceEquivalent > 600_000 {
			b.Fatalf("the session's bill is %d full-price-equivalent tokens, above 600,000", bill.FullPriceEquivalent)
		}
	}
}

func anthropicLongSession(b *testing.B, window, prompts int) anthropictest.Bill {
	b.Helper()
	cwd := b.TempDir()
	srv := anthropictest.NewServer(b)
	srv.SetTokenLimit(window)
	srv.SetResponder(anthropicSummariser)
	files := make([]string, prompts)
	for i := range files {
		files[i] = filepath.Join(cwd, fmt.Sprintf("src_%03d.go", i))
		if err := os.WriteFile(files[i], []byte(contextmgrtest.SourceFile(i)), 0o644); err != nil {
			b.Fatal(err)
		}
		srv.Add(anthropictest.Response{ToolCalls: []anthropictest.ToolCall{anthropicRead(files[i])}},
			anthropictest.Response{Text: fmt.Sprintf("File %d defines generated step functions; nothing unusual.", i)})
	}
	cfg := filepath.Join(b.TempDir(), "acpd.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`[model]
name = "claude-sonnet-4-5"

[modelProviders.anthropic]
baseUrl = %q
models = [{ id = "claude-sonnet-4-5", contextWindow = %d }]
`, srv.URL, window)), 0o644); err != nil {
		b.Fatal(err)
	}
	d := launch(b, cwd, b.TempDir(), []string{"--config", cfg}, []string{"ANTHROPIC_API_KEY=sk-ant-test"}, nil, nil)
	sid := d.session(b)
	for i := range prompts {
		resp, err := d.cc.Prompt(b.Context(), sid, fmt.Sprintf("Read src_%03d.go and summarise it.", i))
		if err != nil || resp.StopReason != acp.StopEndTurn {
			b.Fatalf("prompt %d: %v %v", i, resp, err)
		}
	}
	for i, r := range srv.Requests() {
		if r.Refused || r.Rejected != "" {
			b.Fatalf("request %d was refused: %s (%d tokens)", i, r.Rejected, r.Tokens)
		}
		if os.Getenv("ACPD_BILL_DETAIL") != "" {
			b.Logf("req %3d msgs=%3d tokens=%6d write=%6d read=%6d input=%6d", i, len(r.Messages), r.Tokens, r.CacheWrite, r.CacheRead, r.Input)
		}
	}
	return srv.Bill()
}
