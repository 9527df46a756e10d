// Package contextmgrtest helps tests recognise and answer the summary
// requests compaction sends to a scripted model server (modeltest).
package contextmgrtest

import (
	"fmt"
	"strings"

	"github.com/acpd/acpd/session/contextmgr"
	"github.com/acpd/acpd/session/model/modeltest"
)

// IsSummaryRequest tells a compaction's summary request from a turn's:
// either the summariser's own conversation (its system prompt first) or
// the session's conversation re-sent with a last user message asking for
// the snapshot.
func IsSummaryRequest(r modeltest.Request) bool {
	if len(r.Messages) == 0 {
		return false
	}
	first, last := r.Messages[0], r.Messages[len(r.Messages)-1]
	prefix := contextmgr.SummaryPrompt[:80]
	return (first.Role == "system" && strings.HasPrefix(first.Text(), prefix)) ||
		(last.Role == "user" && strings.HasPrefix(last.Text(), prefix))
}

// IsInline reports whether a summary request re-sends the session's
// conversation (the cache-sharing path) rather than a rendered one.
func IsInline(r modeltest.Request) bool {
	return IsSummaryRequest(r) && !strings.HasPrefix(r.Messages[0].Text(), contextmgr.SummaryPrompt[:80])
}

// Input is every text a summary request gives the summariser, joined.
func Input(r modeltest.Request) string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Text())
		b.WriteString("\n")
	}
	return b.String()
}

// Snapshot is a state snapshot with every section, each holding text.
func Snapshot(text string) string {
	var b strings.Builder
	b.WriteString("<state_snapshot>\n")
	for _, sec := range contextmgr.SnapshotSections {
		fmt.Fprintf(&b, "<%s>%s</%s>\n", sec, text, sec)
	}
	b.WriteString("</state_snapshot>")
	return b.String()
}

// Summariser answers summary requests with a short state snapshot and
// leaves every other request to the script (modeltest.Server.SetResponder).
func Summariser(r modeltest.Request) (modeltest.Response, bool) {
	if !IsSummaryRequest(r) {
		return modeltest.Response{}, false
	}
	return modeltest.Response{Text: "<analysis>reading the conversation</analysis>\n" + Snapshot("as discussed so far")}, true
}

// SourceFile is a distinct ~24 KB Go-like source file, the unit of the
// long-session cases: file i's lines end "marker-iii-jjjj".
func SourceFile(i int) string {
	var b strings.Builder
	for j := 0; b.Len() < 24<<10; j++ {
		fmt.Fprintf(&b, "func file%03dStep%04d(x int) int { return x*%d + %d } // marker-%03d-%04d\n", i, j, i+j, j*7, i, j)
	}
	return b.String()
}

// Bill is what a session's requests cost as a provider with a prefix cache
// bills them (modeltest.Server.SetPrefixCache): uncached input at full
// price, cached input at a tenth, in full-price-equivalent tokens.
type Bill struct{ Sent, Cached, Bill int }

// BillOf sums the requests the provider accepted.
func BillOf(reqs []modeltest.Request) Bill {
	var b Bill
	for _, r := range reqs {
		if r.Refused {
			continue
		}
		b.Sent += r.Tokens
		b.Cached += r.Cached
	}
	b.Bill = b.Sent - b.Cached + b.Cached/10
	return b
}

// CachedShare is the part of the tokens sent served from the cache.
func (b Bill) CachedShare() float64 {
	if b.Sent == 0 {
		return 0
	}
	return float64(b.Cached) / float64(b.Sent)
}
