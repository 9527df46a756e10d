package loopdetect

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type tier int

const (
	tierA  tier = iota // AddAndCheck
	tierAO             // CheckAlwaysOnSafeties
	tierH              // AddAndCheckHeuristicLoops
)

type harness struct {
	d    *Detector
	recs []Record
	tier tier
}

func newHarness(c Cap, tr tier) *harness {
	h := &harness{tier: tr}
	h.d = New(Config{Cap: c, OnRecord: func(r Record) { h.recs = append(h.recs, r) }})
	return h
}

func (h *harness) send(ev Event) bool {
	switch h.tier {
	case tierAO:
		return h.d.CheckAlwaysOnSafeties(ev)
	case tierH:
		return h.d.AddAndCheckHeuristicLoops(ev)
	}
	return h.d.AddAndCheck(ev)
}

func (h *harness) sendAll(evs ...Event) []bool {
	out := make([]bool, len(evs))
	for i, ev := range evs {
		out[i] = h.send(ev)
	}
	return out
}

// loops lists the loop types recorded so far, in order.
func (h *harness) loops() []LoopType {
	var out []LoopType
	for _, r := range h.recs {
		if r.Kind == RecordLoopDetected {
			out = append(out, r.LoopType)
		}
	}
	return out
}

func (h *harness) count(lt LoopType) int {
	n := 0
	for _, l := range h.loops() {
		if l == lt {
			n++
		}
	}
	return n
}

// tc builds T(name, {k: v, ...}).
func tc(name string, kv ...any) Event {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return Event{Kind: EventToolCallRequest, ToolName: name, Args: m}
}

func tcJSON(name, raw string) Event {
	return Event{Kind: EventToolCallRequest, ToolName: name, ArgsJSON: []byte(raw)}
}

func content(s string) Event { return Event{Kind: EventContent, Text: s} }

func thought(subject, desc string) Event {
	return Event{Kind: EventThought, Subject: subject, Description: desc}
}

func repeat(ev Event, n int) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = ev
	}
	return out
}

func diverse(prefix string, n int) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = tc("any_tool", prefix, i)
	}
	return out
}

func allFalse(t *testing.T, got []bool, msg ...any) {
	t.Helper()
	for i, g := range got {
		require.False(t, g, "call %d %v", i+1, msg)
	}
}

func shell(cmd string) Event {
	return tc("run_shell_command", "command", cmd, "description", "inspect")
}

const repeated = "This is a unique sentence, id=1. This is a unique "

func softCap10() Cap { return Cap{Max: 10} }

func TestDetector_Vectors(t *testing.T) {
	same := tc("testTool", "param", "value")
	inspections := []string{
		"git status --short", "git status --short && git diff --stat", "git diff --name-only HEAD",
		"git status --porcelain=v1", "git diff --stat HEAD", "git -C . status --short",
		"git --no-pager diff --stat", "git ls-files --modified",
	}
	shells := func(cmds []string) []Event {
		out := make([]Event, len(cmds))
		for i, c := range cmds {
			out[i] = shell(c)
		}
		return out
	}
	prime := tc("write_file", "path", "prime.txt", "content", "")
	read := func(i int) Event { return tc("read_file", "path", fmt.Sprintf("file_%d", i)) }

	tests := []struct {
		name string
		cap  Cap
		tier tier
		run  func(t *testing.T, h *harness)
	}{
		// Consecutive identical.
		{"01 four identical", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(repeat(same, 4)...))
			assert.Empty(t, h.recs)
		}},
		{"02 fifth identical fires", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(repeat(same, 4)...))
			assert.True(t, h.send(same))
			assert.Equal(t, []LoopType{LoopConsecutiveIdenticalToolCalls}, h.loops())
			assert.Equal(t, LoopConsecutiveIdenticalToolCalls, h.d.LastLoopType())
		}},
		{"03 latched and logged once", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			h.sendAll(repeat(same, 5)...)
			assert.True(t, h.send(same))
			assert.Len(t, h.loops(), 1)
		}},
		{"04 e1 e2 e3 three times", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			e := []Event{tc("testTool", "param", "value1"), tc("testTool", "param", "value2"), tc("anotherTool", "param", "value1")}
			for range 3 {
				allFalse(t, h.sendAll(e...))
			}
		}},
		{"05 user cancel does not break the run", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(repeat(same, 4)...))
			assert.False(t, h.send(Event{Kind: EventUserCancelled}))
			assert.True(t, h.send(same))
		}},
		{"06 retry resets the streak", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(repeat(same, 4)...))
			assert.False(t, h.send(Event{Kind: EventRetry}))
			allFalse(t, h.sendAll(repeat(same, 4)...))
			assert.Empty(t, h.recs)
		}},
		{"07 consecutive count", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			h.sendAll(repeat(same, 4)...)
			assert.Equal(t, 4, h.d.ConsecutiveToolCallCount())
			assert.True(t, h.send(same))
			assert.Equal(t, 5, h.d.ConsecutiveToolCallCount())
		}},
		{"08 stuck_tool five times", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			got := h.sendAll(repeat(tc("stuck_tool", "p", "same"), 5)...)
			allFalse(t, got[:4])
			assert.True(t, got[4])
			assert.Equal(t, LoopConsecutiveIdenticalToolCalls, h.d.LastLoopType())
		}},
		{"09 reordered args are identical", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			evs := []Event{tcJSON("stuck_tool", `{"a":1,"b":2}`), tcJSON("stuck_tool", `{"b":2,"a":1}`)}
			for i := range 4 {
				require.False(t, h.send(evs[i%2]))
			}
			assert.True(t, h.send(evs[0]))
			assert.Equal(t, LoopConsecutiveIdenticalToolCalls, h.d.LastLoopType())
		}},
		{"10 disabled: seven identical", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			h.d.DisableForSession()
			allFalse(t, h.sendAll(repeat(same, 7)...))
			assert.Empty(t, h.loops())
		}},
		{"11 disabled is logged once per call", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			h.d.DisableForSession()
			require.Equal(t, []Record{{Kind: RecordDetectionDisabled}}, h.recs)
			allFalse(t, h.sendAll(repeat(same, 5)...))
			assert.Len(t, h.recs, 1)
		}},

		// Shell stagnation.
		{"12 eight inspections fire", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			got := h.sendAll(shells(inspections)...)
			allFalse(t, got[:7])
			assert.True(t, got[7])
			assert.Equal(t, LoopShellCommandStagnation, h.d.LastLoopType())
		}},
		{"13 a read resets the streak", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(shells(inspections[:7])...))
			assert.False(t, h.send(tc("read_file", "absolute_path", "/repo/README.md")))
			allFalse(t, h.sendAll(shells(inspections[1:])...))
		}},
		{"14 retry resets the streak", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(shells(inspections[:7])...))
			h.send(Event{Kind: EventRetry})
			allFalse(t, h.sendAll(shells(inspections[:7])...))
		}},
		{"15 disabled", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			h.d.DisableForSession()
			allFalse(t, h.sendAll(shells(append(inspections[:7:7], "git ls-files --others"))...))
			assert.Zero(t, h.count(LoopShellCommandStagnation))
		}},
		{"16 chains that commit are progress", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			for i := range 8 {
				require.False(t, h.send(shell(fmt.Sprintf("git add file-%d.txt && git status --short && git commit -m progress-%d", i, i))))
			}
		}},
		{"17 chains that run tests are progress", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			for i := range 8 {
				require.False(t, h.send(shell(fmt.Sprintf("git status --short && npm test -- --runInBand=%d", i))))
			}
		}},
		{"18 plain commands", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			for i := range 10 {
				require.False(t, h.send(shell(fmt.Sprintf("npm test -- --runInBand=%d", i))))
			}
		}},
		{"19 newline-joined pairs", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			firsts := []string{"git diff --stat", "git diff --cached", "git diff HEAD", "git ls-files",
				"git status", "git diff --stat HEAD~1", "git -C . diff", "git diff --name-only HEAD"}
			for i, f := range firsts {
				got := h.send(shell(f + "\ngit status --short"))
				require.Equal(t, i == 7, got, "call %d", i+1)
			}
		}},
		{"20 file diffs reset", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			cmds := []string{"git status --short", "git diff --stat"}
			for _, f := range "abcdef" {
				cmds = append(cmds, fmt.Sprintf("git diff -- src/%c.ts", f))
			}
			allFalse(t, h.sendAll(shells(cmds)...))
		}},
		{"21 file diffs without -- reset", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			cmds := []string{"git status --short", "git diff --stat"}
			for _, f := range "abcdef" {
				cmds = append(cmds, fmt.Sprintf("git diff src/%c.ts", f))
			}
			allFalse(t, h.sendAll(shells(cmds)...))
		}},
		{"22 revisions and case count as inspection", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			got := h.sendAll(shells([]string{"GIT STATUS", "git diff HEAD~2", "git diff abc1234", "git diff main..feature",
				"git -C /x ls-files", "git diff --cached", "git diff @^", "git status"})...)
			allFalse(t, got[:7])
			assert.True(t, got[7])
		}},
		{"23 git log resets the streak", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(shells(inspections[:7])...))
			assert.False(t, h.send(shell("git log --oneline")))
			allFalse(t, h.sendAll(shells(inspections[:7])...))
		}},

		// Content chanting.
		{"24 random deltas", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			rng := rand.New(rand.NewPCG(24, 24))
			const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			for range 1000 {
				var b [10]byte
				for i := range b {
					b[i] = alnum[rng.IntN(len(alnum))]
				}
				require.False(t, h.send(content(string(b[:]))))
			}
		}},
		{"25 ten repeats fire", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			got := h.sendAll(repeat(content(repeated), 10)...)
			allFalse(t, got[:9])
			assert.True(t, got[9])
			assert.Equal(t, []LoopType{LoopChantingIdenticalSentences}, h.loops())
		}},
		{"26 repeats spread by a fixed filler", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			rng := rand.New(rand.NewPCG(26, 26))
			var b strings.Builder
			for range 500 {
				b.WriteByte(byte('a' + rng.IntN(26)))
			}
			filler := b.String()
			for range 10 {
				allFalse(t, h.sendAll(content(repeated), content(filler)))
			}
		}},
		{"27 inside a fence", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			evs := append([]Event{content("```\n")}, repeat(content(repeated), 10)...)
			allFalse(t, h.sendAll(append(evs, content("\n```"))...))
		}},
		{"28 a fence opens mid-stream", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(repeat(content(repeated), 8)...))
			assert.False(t, h.send(content("```javascript\n")))
			allFalse(t, h.sendAll(repeat(content(repeated), 10)...))
		}},
		{"29 fence opened with prose", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(append([]Event{content("Here is some code:\n```\n")}, repeat(content(repeated), 15)...)...))
		}},
		{"30 fences opened and closed", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			evs := []Event{content("Normal text "), content("```\n")}
			evs = append(evs, repeat(content(repeated), 5)...)
			allFalse(t, h.sendAll(append(evs, content("```\n"), content("```python\n"))...))
		}},
		{"31 after a closed block repeats count", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(content("```"), content("\nsome code\n"), content("```")))
			got := h.sendAll(repeat(content(repeated), 10)...)
			allFalse(t, got[:9])
			assert.True(t, got[9])
		}},
		{"32 blocks in single deltas", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(content("```\ncode1\n```"), content("\nsome text\n"), content("```\ncode2\n```")))
		}},
		{"33 repetitive code", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			evs := append([]Event{content("```\n")}, repeat(content("for (let i = 0; i < 10; i++) { console.log(i); }"), 20)...)
			allFalse(t, h.sendAll(append(evs, content("\n```"))...))
		}},
		{"34 a fence splits the repeats", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			evs := append(repeat(content(repeated), 9), content("```"))
			allFalse(t, h.sendAll(append(evs, repeat(content(repeated), 10)...)...))
			assert.Empty(t, h.loops())
		}},
		{"35 structure markers split the repeats", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			for _, m := range []string{"| Column 1 | Column 2 |", "* List item", "## Heading", "> Quote text"} {
				h.d.Reset()
				evs := append(repeat(content(repeated), 9), content(m))
				allFalse(t, h.sendAll(append(evs, repeat(content(repeated), 9)...)...), m)
			}
			assert.Empty(t, h.loops())
		}},
		{"36-38 list, table and heading markers", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			markers := []string{"\n* Bullet item", "\n- Dash item", "\n+ Plus item", "\n1. Numbered item", "\n42. Another numbered item",
				"\n| Column 1 | Column 2 |", "\n|---|---|", "\n|++|++|", "\n+---+---+"}
			for n := 1; n <= 6; n++ {
				markers = append(markers, "\n"+strings.Repeat("#", n)+" Heading")
			}
			other := "Another sentence that keeps on repeating, id=2. An"
			require.Len(t, other, 50)
			for _, m := range markers {
				h.d.Reset()
				evs := append(repeat(content(repeated), 9), content(m))
				allFalse(t, h.sendAll(append(evs, repeat(content(other), 9)...)...), m)
			}
			assert.Empty(t, h.loops())
		}},
		{"39 empty content", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			assert.False(t, h.send(content("")))
		}},
		{"40 dividers", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(repeat(content(strings.Repeat("-", 50)), 15)...))
			allFalse(t, h.sendAll(repeat(content(strings.Repeat("╭─", 25)), 15)...))
		}},
		{"41 a tool call resets content", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(repeat(content("Some content."), 9)...))
			assert.False(t, h.send(tc("testTool", "param", "value")))
			assert.False(t, h.send(content("Fresh content.")))
		}},
		{"42 unknown events", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(Event{Kind: EventKind(99)}, Event{Kind: EventKind(99)}))
		}},
		{"43 short-period chant fires on the 2nd delta", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			for _, unit := range []string{"ABCDE", "01234", "SELEC"} {
				h.d.Reset()
				s := strings.Repeat(unit, 10)
				assert.False(t, h.send(content(s)), unit)
				assert.True(t, h.send(content(s)), unit)
			}
		}},
		{"44 list items vs plain lines", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(repeat(content("- "+repeated+"\n"), 20)...))
			h.d.Reset()
			got := h.sendAll(repeat(content(repeated+"\n"), 10)...)
			assert.True(t, got[9])
		}},
		{"45 horizontal rules", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			for _, r := range []string{"=", "-", "*", "_", "+", "─", "━"} {
				allFalse(t, h.sendAll(repeat(content(strings.Repeat(r, 50)), 20)...), r)
			}
		}},
		{"Decision 3: Reset clears an unbalanced fence", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			assert.False(t, h.send(content("```")))
			h.d.Reset()
			got := h.sendAll(repeat(content(repeated), 10)...)
			assert.True(t, got[9])
		}},

		// Repetitive thoughts.
		{"46 three identical thoughts", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			got := h.sendAll(repeat(thought("Plan", "Inspect the migration script."), 3)...)
			allFalse(t, got[:2])
			assert.True(t, got[2])
			assert.Equal(t, []LoopType{LoopRepetitiveThoughts}, h.loops())
		}},
		{"47 varied thoughts", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(thought("Plan", "schema"), thought("Analysis", "risks"), thought("Plan", "alternatives"), thought("Next", "fix")))
			assert.Empty(t, h.recs)
		}},
		{"48 revisits are not repeats", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(thought("Plan", "schema"), thought("Analysis", "migration"), thought("Analysis", "indexes"),
				thought("Plan", "schema"), thought("Analysis", "rollout"), thought("Plan", "schema")))
		}},
		{"49 tool calls clear thoughts", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(thought("Plan", "schema"), tc("read_file", "path", "a.sql"), thought("Plan", "schema"),
				tc("read_file", "path", "b.sql"), thought("Plan", "schema")))
		}},
		{"50 content is not a thought", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			h.sendAll(repeat(content("I should check the config, maybe it helps."), 5)...)
			assert.Zero(t, h.count(LoopRepetitiveThoughts))
		}},
		{"51 trimmed and lower-cased", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			got := h.sendAll(thought(" Plan ", "X"), thought("plan", "x "), thought("PLAN", "x"))
			allFalse(t, got[:2])
			assert.True(t, got[2])
		}},

		// Read-file loop.
		{"52 eight reads after a write", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			require.False(t, h.send(prime))
			for i := range 7 {
				require.False(t, h.send(read(i)))
			}
			assert.True(t, h.send(read(7)))
			assert.Equal(t, 1, h.count(LoopReadFileLoop))
			assert.Equal(t, 1, h.count(LoopActionStagnation))
			assert.Equal(t, LoopActionStagnation, h.d.LastLoopType())
		}},
		{"53 cold start is exploration", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			for i := range 20 {
				name := "read_file"
				if i%2 == 1 {
					name = "list_directory"
				}
				require.False(t, h.send(tc(name, "path", fmt.Sprintf("p%d", i))))
			}
		}},
		{"54 seven reads, a write, a read", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			for i := range 7 {
				require.False(t, h.send(read(i)))
			}
			require.False(t, h.send(tc("write_file", "path", "x", "content", "y")))
			assert.True(t, h.send(read(7)))
			assert.Equal(t, LoopReadFileLoop, h.d.LastLoopType())
		}},
		{"55 read-like names and prefixes", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			require.False(t, h.send(prime))
			names := []string{"read_many_files", "list_directory", "read_resource", "read_file", "list_projects", "read_file", "read_many_files", "list_directory"}
			for i, n := range names {
				got := h.send(tc(n, "path", fmt.Sprintf("p%d", i)))
				require.Equal(t, i == len(names)-1, got, "call %d %s", i, n)
			}
			assert.Equal(t, LoopReadFileLoop, h.d.LastLoopType())
		}},
		{"56 lookalike names", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			require.False(t, h.send(prime))
			names := []string{"review", "concat_chunks", "viewport_set", "listener_bind"}
			for i := range 6 {
				require.False(t, h.send(tc(names[i%4], "i", i)))
			}
		}},
		{"57 mixed work", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			require.False(t, h.send(prime))
			allFalse(t, h.sendAll(read(1), tc("write_file", "path", "w"), read(2), tc("execute", "cmd", "x"), read(3), read(4)))
		}},

		// Action stagnation.
		{"58 eight same-name calls", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			for i := range 7 {
				require.False(t, h.send(tc("search_code", "query", fmt.Sprintf("term_%d", i))))
			}
			assert.True(t, h.send(tc("search_code", "query", "term_7")))
			assert.Equal(t, LoopActionStagnation, h.d.LastLoopType())
		}},
		{"59 a different tool breaks the streak", DefaultCap(), tierA, func(t *testing.T, h *harness) {
			for i := range 11 {
				ev := tc("search_code", "query", fmt.Sprintf("term_%d", i))
				if i == 5 {
					ev = tc("write_file", "path", "x")
				}
				require.False(t, h.send(ev))
			}
		}},

		// Turn cap (soft 10, adaptive, hard 100).
		{"60 ten diverse", softCap10(), tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(diverse("d", 10)...))
		}},
		{"61 ninety-nine diverse", softCap10(), tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(diverse("d", 99)...))
			assert.Equal(t, LoopType(""), h.d.LastLoopType())
		}},
		{"62 stuck past the soft cap", softCap10(), tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(diverse("d", 10)...))
			stuck := tc("any_tool", "stuck", true)
			call := 10
			for i := 0; ; i++ {
				ev := stuck
				if i%2 == 1 {
					ev = tc("any_tool", "filler", i)
				}
				call++
				if h.send(ev) {
					break
				}
				require.Less(t, call, 30)
			}
			assert.Equal(t, 21, call)
			assert.Equal(t, LoopTurnToolCallCap, h.d.LastLoopType())
		}},
		{"63 round trips with Finished", softCap10(), tierAO, func(t *testing.T, h *harness) {
			same := tc("any_tool", "same", true)
			call := 0
			for r := 0; r < 5; r++ {
				for _, ev := range []Event{same, tc("any_tool", "d", 2*r), same, tc("any_tool", "d", 2*r+1)} {
					call++
					if h.send(ev) {
						assert.Equal(t, 11, call)
						return
					}
				}
				h.send(Event{Kind: EventFinished})
			}
			t.Fatal("cap never fired")
		}},
		{"64 reordered variants count as one key", softCap10(), tierAO, func(t *testing.T, h *harness) {
			variants := []string{
				`{"a":1,"b":2,"c":3,"nested":{"x":1,"y":2}}`, `{"c":3,"b":2,"a":1,"nested":{"y":2,"x":1}}`,
				`{"nested":{"x":1,"y":2},"a":1,"c":3,"b":2}`, `{"b":2,"nested":{"y":2,"x":1},"c":3,"a":1}`,
				`{"a":1,"nested":{"x":1,"y":2},"b":2,"c":3}`, `{"c":3,"nested":{"y":2,"x":1},"a":1,"b":2}`,
			}
			call := 0
			for i, v := range variants {
				call++
				if h.send(tcJSON("any_tool", v)) {
					break
				}
				if i < len(variants)-1 {
					call++
					require.False(t, h.send(tc("any_tool", "filler", i)))
				}
			}
			assert.Equal(t, 11, call)
			assert.Equal(t, LoopTurnToolCallCap, h.d.LastLoopType())
		}},
		{"65 the backstop", softCap10(), tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(diverse("d", 100)...))
			assert.True(t, h.send(tc("any_tool", "d", 100)))
		}},
		{"66 stuck from the start", softCap10(), tierAO, func(t *testing.T, h *harness) {
			call := 0
			for i := 0; ; i++ {
				ev := tc("any_tool", "stuck", true)
				if i%2 == 1 {
					ev = tc("any_tool", "distinct", i)
				}
				call++
				if h.send(ev) {
					break
				}
			}
			assert.Equal(t, 11, call)
			assert.Equal(t, []LoopType{LoopTurnToolCallCap}, h.loops())
		}},
		{"67 default cap lets 101 diverse through", DefaultCap(), tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(diverse("d", 101)...))
		}},
		{"68 no cap", Cap{Max: 0}, tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(diverse("d", 150)...))
		}},
		{"69 disabled for the session", softCap10(), tierAO, func(t *testing.T, h *harness) {
			h.d.DisableForSession()
			allFalse(t, h.sendAll(diverse("d", 110)...))
		}},
		{"70 retry rolls back to floor 0", softCap10(), tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(diverse("pre", 6)...))
			h.send(Event{Kind: EventRetry})
			allFalse(t, h.sendAll(diverse("d", 100)...))
			assert.True(t, h.send(tc("any_tool", "d", 100)))
			assert.Len(t, h.loops(), 1)
		}},
		{"71 retry clears the stuck signal", Cap{Max: 20}, tierAO, func(t *testing.T, h *harness) {
			for i := range 6 {
				require.False(t, h.send(tc("any_tool", "stuck", true)))
				require.False(t, h.send(tc("any_tool", "d", i)))
			}
			h.send(Event{Kind: EventRetry})
			allFalse(t, h.sendAll(diverse("after", 25)...))
			assert.Empty(t, h.recs)
		}},
		{"72 retry keeps finished calls", softCap10(), tierAO, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(diverse("a", 6)...))
			h.send(Event{Kind: EventFinished})
			allFalse(t, h.sendAll(diverse("b", 4)...))
			h.send(Event{Kind: EventRetry})
			assert.Equal(t, 6, h.d.CapTotal())
			allFalse(t, h.sendAll(diverse("c", 94)...))
			assert.True(t, h.send(tc("any_tool", "c", 94)))
		}},
		{"73 rounds of fifteen", softCap10(), tierAO, func(t *testing.T, h *harness) {
			call := 0
			for r := 0; r < 10; r++ {
				for i := range 15 {
					call++
					if h.send(tc("any_tool", "r", r, "i", i)) {
						assert.Equal(t, 101, call)
						assert.Equal(t, 6, r)  // round 7
						assert.Equal(t, 10, i) // call 11
						return
					}
				}
				h.send(Event{Kind: EventFinished})
			}
			t.Fatal("cap never fired")
		}},
		{"74 explicit cap 2", Cap{Max: 2, Explicit: true}, tierAO, func(t *testing.T, h *harness) {
			got := h.sendAll(diverse("d", 3)...)
			assert.Equal(t, []bool{false, false, true}, got)
			assert.Equal(t, LoopTurnToolCallCap, h.d.LastLoopType())
		}},
		{"75 default cap 2", Cap{Max: 2}, tierAO, func(t *testing.T, h *harness) {
			got := h.sendAll(diverse("d", 21)...)
			allFalse(t, got[:20])
			assert.True(t, got[20])
		}},

		// Global duplicate (heuristic tier only).
		{"77 five repeats", DefaultCap(), tierH, func(t *testing.T, h *harness) {
			allFalse(t, h.sendAll(repeat(tc("stuck_tool", "param", "same"), 5)...))
		}},
		{"78 interleaved sixth repeat", DefaultCap(), tierH, func(t *testing.T, h *harness) {
			stuck := tc("stuck_tool", "param", "same")
			for i := range 5 {
				require.False(t, h.send(stuck))
				require.False(t, h.send(tc(fmt.Sprintf("other_%c", 'a'+i), "i", i)))
			}
			assert.True(t, h.send(stuck))
			assert.Equal(t, LoopGlobalToolCallDuplicate, h.d.LastLoopType())
		}},
		{"79 different args", DefaultCap(), tierH, func(t *testing.T, h *harness) {
			for i := range 6 {
				require.False(t, h.send(tc("stuck_tool", "param", i)))
			}
		}},
		{"80 six consecutive", DefaultCap(), tierH, func(t *testing.T, h *harness) {
			got := h.sendAll(repeat(same, 6)...)
			allFalse(t, got[:5])
			assert.True(t, got[5])
			assert.Equal(t, LoopGlobalToolCallDuplicate, h.d.LastLoopType())
		}},
		{"81 retry clears duplicates", DefaultCap(), tierH, func(t *testing.T, h *harness) {
			stuck := tc("stuck_tool", "param", "same")
			allFalse(t, h.sendAll(repeat(stuck, 3)...))
			h.send(Event{Kind: EventRetry})
			allFalse(t, h.sendAll(repeat(stuck, 3)...))
		}},

		// Alternating (heuristic tier only).
		{"82 ABABAB", DefaultCap(), tierH, func(t *testing.T, h *harness) {
			a, b := tc("tool_a", "param", "a"), tc("tool_b", "param", "b")
			allFalse(t, h.sendAll(a, b, a, b, a))
			assert.True(t, h.send(b))
			assert.Equal(t, LoopAlternatingToolCallPattern, h.d.LastLoopType())
		}},
		{"83 alternating names, varying args", DefaultCap(), tierH, func(t *testing.T, h *harness) {
			for i := range 5 {
				allFalse(t, h.sendAll(tc("tool_a", "param", i), tc("tool_b", "param", i)))
			}
		}},
		{"84 AAAAAA is not alternating", DefaultCap(), tierH, func(t *testing.T, h *harness) {
			got := h.sendAll(repeat(tc("tool_a", "param", "a"), 6)...)
			assert.True(t, got[5])
			assert.Zero(t, h.count(LoopAlternatingToolCallPattern))
			assert.Equal(t, LoopGlobalToolCallDuplicate, h.d.LastLoopType())
		}},
		{"85 a break restarts the window", DefaultCap(), tierH, func(t *testing.T, h *harness) {
			a, b, c := tc("tool_a", "param", "a"), tc("tool_b", "param", "b"), tc("tool_c", "param", "c")
			allFalse(t, h.sendAll(a, b, a, b, c, a, b, a, b, a))
			assert.True(t, h.send(b))
			assert.Equal(t, LoopAlternatingToolCallPattern, h.d.LastLoopType())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, newHarness(tt.cap, tt.tier))
		})
	}
}

// Vector 76.
func TestShouldHaltOnTurnToolCallCap(t *testing.T) {
	tests := []struct {
		total, maxRepeat int
		cap              Cap
		want             bool
	}{
		{100, 0, Cap{Max: 100, Explicit: false}, false},
		{101, 5, Cap{Max: 100, Explicit: false}, false},
		{101, 6, Cap{Max: 100, Explicit: false}, true},
		{1000, 1, Cap{Max: 100, Explicit: false}, false},
		{1001, 1, Cap{Max: 100, Explicit: false}, true},
		{101, 1, Cap{Max: 100, Explicit: true}, true},
		{3, 1, Cap{Max: 2, Explicit: true}, true},
		{5000, 99, Cap{Max: 0, Explicit: true}, false}, // +Infinity
		{2, 1, Cap{Max: 1, Explicit: false}, false},
		{11, 1, Cap{Max: 1, Explicit: false}, true},
		// Decision 4: zero and negative caps disable, explicit or not.
		{150, 99, Cap{Max: 0, Explicit: false}, false},
		{120, 99, Cap{Max: -1, Explicit: true}, false},
		{math.MaxInt, 0, Cap{Max: math.MaxInt, Explicit: false}, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d_%d_%+v", tt.total, tt.maxRepeat, tt.cap), func(t *testing.T) {
			assert.Equal(t, tt.want, ShouldHaltOnTurnToolCallCap(tt.total, tt.maxRepeat, tt.cap))
		})
	}
}

// The daemon's per-batch use (vectors 91, 93, 94, 95): observe every key of
// a model response, add the batch size, then check once.
func TestCapTracker_BatchMode(t *testing.T) {
	tests := []struct {
		name    string
		cap     Cap
		batches [][]string // keys per batch
		halts   []bool     // after each batch
	}{
		{"91 explicit 3: a batch of 2 crosses", Cap{Max: 3, Explicit: true}, [][]string{{"a", "b"}, {"c", "d"}}, []bool{false, true}},
		{"93 adaptive: 101 distinct in one batch", DefaultCap(), [][]string{distinctKeys("a", 101)}, []bool{false}},
		{"94 adaptive: the backstop", DefaultCap(), batchesOf(10, 100, [][]string{{"last"}}), append(make([]bool, 10), true)},
		{"95 adaptive: stuck key, then past the soft cap", DefaultCap(),
			[][]string{append(distinctKeys("a", 24), "x", "x", "x", "x", "x", "x"), distinctKeys("b", 70), {"y"}},
			[]bool{false, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewCapTracker(tt.cap)
			for i, b := range tt.batches {
				for _, k := range b {
					tr.ObserveKey(k)
				}
				tr.AddCalls(len(b))
				assert.Equal(t, tt.halts[i], tr.ShouldHalt(), "batch %d total %d max %d", i, tr.Total(), tr.MaxKeyRepeat())
			}
		})
	}
}

func distinctKeys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// batchesOf returns n batches of size distinct keys each, then tail.
func batchesOf(n, size int, tail [][]string) [][]string {
	var out [][]string
	for i := range n {
		out = append(out, distinctKeys(fmt.Sprintf("b%d-", i), size))
	}
	return append(out, tail...)
}

func TestCapTracker_FinishedRetryReset(t *testing.T) {
	tr := NewCapTracker(Cap{Max: 10})
	for range 3 {
		tr.ObserveKey("a")
	}
	tr.AddCalls(3)
	tr.Finished()
	assert.Equal(t, 4, tr.ObserveKey("a"))
	tr.AddCalls(1)
	tr.Retry()
	assert.Equal(t, 3, tr.Total())
	assert.Equal(t, 0, tr.MaxKeyRepeat())
	assert.Equal(t, 1, tr.ObserveKey("a"))
	tr.Reset()
	assert.Equal(t, 0, tr.Total())
	tr.Retry()
	assert.Equal(t, 0, tr.Total(), "Reset clears the floor too")
}
