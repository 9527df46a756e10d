package contextmgr

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acpd/acpd/session/model"
)

// longHistory is n messages of a long session: prompts, answers, and
// read_file calls with 2 KB results, ending with calls in flight.
func longHistory(n int) []model.Message {
	h := make([]model.Message, 0, n)
	result := strings.Repeat("line of a source file\n", 100)
	for i := 0; len(h) < n; i++ {
		switch i % 4 {
		case 0:
			h = append(h, model.Message{Role: model.RoleUser, Content: fmt.Sprintf("prompt %d: read the next file and summarise it", i)})
		case 1, 2:
			id := fmt.Sprintf("call_%d", i)
			args, _ := json.Marshal(map[string]string{"file_path": fmt.Sprintf("/src/file_%d.go", i)})
			h = append(h, model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: id, Name: "read_file", Arguments: args}}},
				model.Message{Role: model.RoleTool, ToolCallID: id, Name: "read_file", Content: result})
		case 3:
			h = append(h, model.Message{Role: model.RoleAssistant, Content: "The file defines a few functions."})
		}
	}
	return h[:n]
}

// BenchmarkPlan_20000Messages plans a compaction (stubs, the summary's cut,
// the drop fallback) over a 20,000-message history. Target ≤ 2 ms.
func BenchmarkPlan_20000Messages(b *testing.B) {
	h := longHistory(20_000)
	cur := len(h) - 1
	for h[cur].Role != model.RoleUser {
		cur--
	}
	in := Input{History: h, Cur: cur, Used: total(h) + 2000, Th: ComputeThresholds(1_000_000, 0.85)}
	b.ReportAllocs()
	for b.Loop() {
		p := NewPlan(in)
		p.Stub()
		if !p.Summarisable() {
			b.Fatal("nothing to summarise")
		}
		if _, _, err := p.Drop(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAccounting is the accounting before one request: a message was
// appended, the size of the request is asked, the request is sent and the
// provider's count observed. The cost must not depend on the history's
// length (100 vs 10,000 messages).
func BenchmarkAccounting(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("%dMessages", n), func(b *testing.B) {
			const room = 1 << 16
			h := append(make([]model.Message, 0, n+room), longHistory(n)...)
			var a Accounting
			a.SetOverhead(500)
			a.Sync(h)
			msg := model.Message{Role: model.RoleTool, ToolCallID: "call_x", Name: "read_file", Content: strings.Repeat("x", 2048)}
			b.ReportAllocs()
			for b.Loop() {
				if len(h) == cap(h) { // the history's room is used up: start again, off the clock
					b.StopTimer()
					h = h[:n]
					a = Accounting{}
					a.SetOverhead(500)
					a.Sync(h)
					b.StartTimer()
				}
				h = append(h, msg)
				a.Sync(h)
				used := a.Used()
				a.Sent()
				a.Observe(used + 10)
			}
		})
	}
}
