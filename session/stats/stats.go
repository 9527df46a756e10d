// Package stats reads session transcripts and describes every prompt turn
// the way the adaptive cap's design document did for three turns: tool
// calls, distinct (tool, args) keys, the highest repeat of one key, the
// longest same-name streak, the outcome (with the loop type and the cap
// rule that fired) and the duration. It can also replay the daemon's loop
// guard — package loopdetect's own CapTracker.RecordBatch, batch by batch
// as the daemon counts — over each recorded turn under other settings and
// report the turns whose outcome would change. `acpd stats` is its
// command-line face.
//
// It reads through store.Scanner: read-only, no locks, safe while daemons
// write the same files.
package stats

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/usage"
)

// Settings are the guard settings a what-if replay runs with.
type Settings struct {
	Cap               loopdetect.Cap `json:"cap"`
	SkipLoopDetection bool           `json:"skipLoopDetection"`
}

// Options select the turns and the replay.
type Options struct {
	// DataDir is session.dataDir (transcripts are in DataDir/sessions).
	DataDir string
	// Sessions keeps only these session ids (none: every session).
	Sessions []string
	// Since keeps turns that started at or after it (zero: all).
	Since time.Time
	// Cwd keeps sessions whose working directory is Cwd or inside it.
	Cwd string
	// Agent keeps the turns of this agent (Turn.AgentName: "acpd" for
	// acpd's own prompt turns, a subagent's name, or the name `acpd guard`
	// recorded for the agent it watched).
	Agent string
	// WhatIf, when set, replays every turn under these settings.
	WhatIf *Settings
	// Workers read sessions in parallel; 0 means GOMAXPROCS.
	Workers int
}

// Turn is one prompt turn of one session.
type Turn struct {
	Session string `json:"session"`
	Turn    int    `json:"turn"` // 1-based, in the session's order
	// A subagent run is a turn of its own, linked to the prompt turn it ran
	// in (Turn): Run is its 1-based number within that turn (0 for the
	// prompt turn itself) and ParentToolCallID the agent call that started
	// it. Agent is the agent that ran the turn when it is not acpd's own
	// prompt loop: a subagent's name, or the agent `acpd guard` watched (its
	// agentInfo name), whose own session id is AgentSession.
	Run              int       `json:"run,omitempty"`
	Agent            string    `json:"agent,omitempty"`
	AgentSession     string    `json:"agentSession,omitempty"`
	ParentToolCallID string    `json:"parentToolCallId,omitempty"`
	Cwd              string    `json:"cwd"`
	Start            time.Time `json:"start"`
	// Duration is from the prompt record to the turn_end record (0 for a
	// turn that never ended).
	Duration time.Duration `json:"-"`
	// ToolCalls counts the calls the daemon's guard counted: every call the
	// model asked for, less provider replays answered as duplicates.
	ToolCalls    int `json:"toolCalls"`
	DistinctKeys int `json:"distinctKeys"`
	// MaxRepeat is the highest count of one (tool, args) repeat key, and
	// MaxRepeatTool that key's tool.
	MaxRepeat     int    `json:"maxRepeat"`
	MaxRepeatTool string `json:"maxRepeatTool,omitempty"`
	// MaxNameStreak is the longest run of consecutive calls to one tool.
	MaxNameStreak int    `json:"maxNameStreak"`
	StreakTool    string `json:"streakTool,omitempty"`
	// Outcome is the stop reason (end_turn, cancelled, max_tokens, refusal,
	// …), "loop" for a loop stop, "error" for another error, "incomplete"
	// for a turn without a turn_end record (running, or acpd died).
	Outcome   string `json:"outcome"`
	LoopType  string `json:"loopType,omitempty"`
	CapReason string `json:"capReason,omitempty"`
	// WhatIf is set when a replay changes the outcome.
	WhatIf *Change `json:"whatIf,omitempty"`

	// Usage is the tokens of every model request made for the turn, as
	// the provider reported them (or acpd estimated them, counted in
	// Usage.Estimated): its own, its compactions' summaries and its
	// subagents' runs, the last two also apart.
	Usage     usage.Tokens  `json:"usage"`
	Summaries *usage.Tokens `json:"summaryUsage,omitempty"`
	Subagents *usage.Tokens `json:"subagentUsage,omitempty"`
	// Cost is the turn's cost at the prices configured when it ran; nil
	// when none were.
	Cost *Cost `json:"cost,omitempty"`
}

// Cost is an amount in a currency.
type Cost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// addUsage adds one usage record; sub: a subagent run's, counted as the
// turn's subagents'. A record without token counts only reports the
// context window's fill (after a compaction) and is no request.
func (t *Turn) addUsage(u *store.Usage, sub bool) {
	if u.PromptTokens == 0 && u.CompletionTokens == 0 && !u.Estimated {
		return
	}
	mu := model.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		CachedTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens}
	t.Usage.Add(mu, u.Estimated)
	var part **usage.Tokens
	switch {
	case sub || usage.Origin(u.Origin) == usage.Subagent:
		part = &t.Subagents
	case usage.Origin(u.Origin) == usage.Summary:
		part = &t.Summaries
	}
	if part != nil {
		if *part == nil {
			*part = &usage.Tokens{}
		}
		(*part).Add(mu, u.Estimated)
	}
	if u.Currency != "" {
		if t.Cost == nil {
			t.Cost = &Cost{Currency: u.Currency}
		}
		if t.Cost.Currency == u.Currency {
			t.Cost.Amount += u.Cost
		}
	}
}

// call is one recorded call.
type call struct{ key, name string }

// turnCalls are the calls of the turn being read, flat, with the end of
// each batch (model response) in ends; the reader reuses them turn after
// turn.
type turnCalls struct {
	calls []call
	ids   []uint64 // hashes of the calls' toolCallIds
	ends  []int
}

func (tc *turnCalls) reset() {
	tc.calls, tc.ids, tc.ends = tc.calls[:0], tc.ids[:0], tc.ends[:0]
}

// dropReplays removes the calls answered as provider replays, which the
// guard never counted; a batch left empty stays, as the guard saw it.
func (tc *turnCalls) dropReplays(dups map[uint64]bool) {
	if len(dups) == 0 {
		return
	}
	n, start := 0, 0
	for bi, end := range tc.ends {
		for i := start; i < end; i++ {
			if !dups[tc.ids[i]] {
				tc.calls[n], tc.ids[n] = tc.calls[i], tc.ids[i]
				n++
			}
		}
		start = end
		tc.ends[bi] = n
	}
	tc.calls, tc.ids = tc.calls[:n], tc.ids[:n]
}

// Label names the turn in a session: "3", or "3.1" for the first subagent
// run of turn 3.
func (t *Turn) Label() string {
	if t.Run == 0 {
		return strconv.Itoa(t.Turn)
	}
	return strconv.Itoa(t.Turn) + "." + strconv.Itoa(t.Run)
}

// AgentName is the agent that ran the turn: Agent, or "acpd" for acpd's
// own prompt turns.
func (t *Turn) AgentName() string {
	if t.Agent == "" {
		return "acpd"
	}
	return t.Agent
}

// OutcomeText is the outcome with the loop type and cap reason:
// "end_turn", "turn_tool_call_cap/stuck", "global_tool_call_duplicate".
func (t *Turn) OutcomeText() string {
	if t.Outcome != "loop" {
		return t.Outcome
	}
	if t.CapReason != "" {
		return t.LoopType + "/" + t.CapReason
	}
	return t.LoopType
}

// stoppedByGuard reports whether the turn ended in a stop the per-batch
// guard decides (the cap or the global duplicate), which a replay can
// reproduce; the other loop stops happen while a batch runs.
func (t *Turn) stoppedByGuard() bool {
	return t.Outcome == "loop" && (t.LoopType == string(loopdetect.LoopTurnToolCallCap) ||
		t.LoopType == string(loopdetect.LoopGlobalToolCallDuplicate))
}

// Change is how a replay's outcome differs from the recorded one.
type Change struct {
	// Stops is true when the replay stops the turn, false when it lets a
	// recorded stop through.
	Stops     bool   `json:"stops"`
	LoopType  string `json:"loopType,omitempty"`
	CapReason string `json:"capReason,omitempty"`
	// AtCall is the turn's counted total when the replay stops (its batch
	// included), or for a stop let through, the recorded stop's total.
	AtCall int `json:"atCall"`
	// Why says what the replay saw.
	Why string `json:"why"`
}

// Outcome is the replay's outcome in OutcomeText's form.
func (c *Change) Outcome() string {
	if !c.Stops {
		return "continues"
	}
	if c.CapReason != "" {
		return c.LoopType + "/" + c.CapReason
	}
	return c.LoopType
}

// Summary describes all selected turns.
type Summary struct {
	Sessions  int `json:"sessions"`
	Turns     int `json:"turns"`
	ToolCalls int `json:"toolCalls"`
	// Calls-per-turn percentiles (nearest rank) and maximum.
	P50 int `json:"p50"`
	P90 int `json:"p90"`
	P99 int `json:"p99"`
	Max int `json:"max"`
	// TurnsPast100 counts turns with more than 100 counted calls.
	TurnsPast100 int `json:"turnsPast100"`
	// Outcomes counts turns by OutcomeText.
	Outcomes map[string]int `json:"outcomes"`
	// MaxRepeatEndTurn is the distribution of MaxRepeat over the turns that
	// ended normally (end_turn): max repeat -> turns.
	MaxRepeatEndTurn map[int]int `json:"maxRepeatEndTurn"`
	// WhatIf summarises a replay.
	WhatIf *WhatIfSummary `json:"whatIf,omitempty"`
	// Usage, Summaries and Subagents add up the turns'; CachedShare is the
	// part of the input tokens served from the provider's prompt cache.
	Usage       usage.Tokens `json:"usage"`
	Summaries   usage.Tokens `json:"summaryUsage"`
	Subagents   usage.Tokens `json:"subagentUsage"`
	CachedShare float64      `json:"cachedShare"`
	// Costs adds up the turns' costs by currency (empty without prices).
	Costs map[string]float64 `json:"costs,omitempty"`
	// Skipped counts transcript lines that could not be read (torn or damaged).
	Skipped int `json:"skippedLines"`
}

// WhatIfSummary counts the turns a replay changes.
type WhatIfSummary struct {
	Settings     Settings `json:"settings"`
	Changed      int      `json:"changed"`
	WouldStop    int      `json:"wouldStop"`    // turns the replay stops that did not stop so
	WouldNotStop int      `json:"wouldNotStop"` // recorded stops the replay lets through
}

// Report is what Collect returns: the turns (oldest first) and a summary.
// The turns point into per-session blocks, so a large history is held once.
type Report struct {
	Turns   []*Turn `json:"turns"`
	Summary Summary `json:"summary"`
	// loose is each session's usage recorded outside a turn (a /compress
	// summary), counted in the summary only.
	loose []Turn
}

// Collect reads the transcripts in opts.DataDir and describes their turns.
func Collect(opts Options) (*Report, error) {
	// A data folder that does not exist is most likely a mistyped
	// --data-dir or ACPD_DATA_DIR: say so rather than report zero turns.
	// (A data folder without a sessions folder is a daemon that has not
	// recorded a session yet: zero turns, no error.)
	if fi, err := os.Stat(opts.DataDir); err != nil {
		return nil, fmt.Errorf("session.dataDir: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("session.dataDir: %s is not a folder", opts.DataDir)
	}
	// acpd's own transcripts, then those `acpd guard` keeps for the agents
	// it watched (store.GuardDir): one list, each id with its folder.
	ids, err := store.SessionIDs(opts.DataDir)
	if err != nil {
		return nil, err
	}
	dirs := make([]string, len(ids))
	for i := range dirs {
		dirs[i] = opts.DataDir
	}
	guardDir := filepath.Join(opts.DataDir, store.GuardDir)
	gids, err := store.SessionIDs(guardDir)
	if err != nil {
		return nil, err
	}
	for _, id := range gids {
		ids = append(ids, id)
		dirs = append(dirs, guardDir)
	}
	if len(opts.Sessions) > 0 {
		want := map[string]bool{}
		for _, s := range opts.Sessions {
			if err := store.ValidateID(s); err != nil {
				return nil, fmt.Errorf("--session: %w", err)
			}
			want[s] = true
		}
		n := 0
		for i, id := range ids {
			if want[id] {
				ids[n], dirs[n] = id, dirs[i]
				n++
			}
		}
		ids, dirs = ids[:n], dirs[:n]
		// A session asked for by id that is not there is a mistake
		// (a typo, another data folder), not an empty answer.
		for _, s := range opts.Sessions {
			if !slices.Contains(ids, s) {
				return nil, fmt.Errorf("--session: no session %q in %s", s, opts.DataDir)
			}
		}
	}
	cwd := ""
	if opts.Cwd != "" {
		abs, err := filepath.Abs(opts.Cwd)
		if err != nil {
			return nil, fmt.Errorf("--cwd: %w", err)
		}
		cwd = filepath.Clean(abs)
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	type result struct {
		turns   []Turn
		loose   Turn // usage recorded outside any turn (/compress)
		skipped int
		err     error
	}
	results := make([]result, len(ids))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, max(len(ids), 1)) {
		wg.Go(func() {
			r := newReader(opts.WhatIf)
			for i := range next {
				turns, loose, skipped, err := r.session(dirs[i], ids[i])
				if (cwd != "" && !within(loose.Cwd, cwd)) || (!opts.Since.IsZero() && loose.Start.Before(opts.Since)) ||
					(opts.Agent != "" && loose.AgentName() != opts.Agent) {
					loose = Turn{}
				}
				if opts.Agent != "" {
					turns = slices.DeleteFunc(turns, func(t Turn) bool { return t.AgentName() != opts.Agent })
				}
				if cwd != "" {
					turns = slices.DeleteFunc(turns, func(t Turn) bool { return !within(t.Cwd, cwd) })
				}
				if !opts.Since.IsZero() {
					turns = slices.DeleteFunc(turns, func(t Turn) bool { return t.Start.Before(opts.Since) })
				}
				results[i] = result{turns, loose, skipped, err}
			}
		})
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()

	rep := &Report{}
	n := 0
	for _, r := range results {
		n += len(r.turns)
	}
	rep.Turns = make([]*Turn, 0, n)
	sessions := 0
	for i := range results {
		r := &results[i]
		if r.err != nil {
			if errors.Is(r.err, store.ErrNotFound) {
				continue // deleted while we read
			}
			return nil, fmt.Errorf("session %s: %w", ids[i], r.err)
		}
		rep.Summary.Skipped += r.skipped
		rep.loose = append(rep.loose, r.loose)
		if len(r.turns) > 0 {
			sessions++
		}
		for j := range r.turns {
			rep.Turns = append(rep.Turns, &r.turns[j])
		}
	}
	slices.SortStableFunc(rep.Turns, func(a, b *Turn) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Session, b.Session); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Turn, b.Turn); c != 0 {
			return c
		}
		return cmp.Compare(a.Run, b.Run)
	})
	rep.Summary.Sessions = sessions
	rep.summarise(opts.WhatIf)
	return rep, nil
}

// within reports whether dir is root or inside it.
func within(dir, root string) bool {
	dir = filepath.Clean(dir)
	if dir == root || root == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(dir, root+string(filepath.Separator))
}

func (rep *Report) summarise(whatIf *Settings) {
	s := &rep.Summary
	s.Turns = len(rep.Turns)
	s.Outcomes = map[string]int{}
	s.MaxRepeatEndTurn = map[int]int{}
	if whatIf != nil {
		s.WhatIf = &WhatIfSummary{Settings: *whatIf}
	}
	calls := make([]int, 0, len(rep.Turns))
	for _, t := range rep.Turns {
		calls = append(calls, t.ToolCalls)
		s.ToolCalls += t.ToolCalls
		if t.ToolCalls > 100 {
			s.TurnsPast100++
		}
		s.Outcomes[t.OutcomeText()]++
		if t.Outcome == "end_turn" {
			s.MaxRepeatEndTurn[t.MaxRepeat]++
		}
		if t.Run == 0 {
			// A run's usage is in its prompt turn's already.
			s.addUsage(t)
		}
		if t.WhatIf != nil {
			s.WhatIf.Changed++
			if t.WhatIf.Stops {
				s.WhatIf.WouldStop++
			} else {
				s.WhatIf.WouldNotStop++
			}
		}
	}
	for i := range rep.loose {
		t := &rep.loose[i]
		s.addUsage(t)
	}
	if s.Usage.Input > 0 {
		s.CachedShare = float64(s.Usage.Cached) / float64(s.Usage.Input)
	}
	slices.Sort(calls)
	s.P50, s.P90, s.P99 = percentile(calls, 50), percentile(calls, 90), percentile(calls, 99)
	if len(calls) > 0 {
		s.Max = calls[len(calls)-1]
	}
}

// addUsage adds a turn's usage to the summary.
func (s *Summary) addUsage(t *Turn) {
	s.Usage = s.Usage.Plus(t.Usage)
	if t.Summaries != nil {
		s.Summaries = s.Summaries.Plus(*t.Summaries)
	}
	if t.Subagents != nil {
		s.Subagents = s.Subagents.Plus(*t.Subagents)
	}
	if c := t.Cost; c != nil {
		if s.Costs == nil {
			s.Costs = map[string]float64{}
		}
		s.Costs[c.Currency] += c.Amount
	}
}

// percentile is the nearest-rank percentile of sorted values (0 for none).
func percentile(sorted []int, p int) int {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 × n)
	return sorted[max(rank, 1)-1]
}

// reader turns one session's records into turns; one per worker.
type reader struct {
	sc     *store.Scanner
	whatIf *Settings
	rec    store.Record
	calls  []store.ToolCall
	// names interns tool names; keys memoizes repeat keys by tool name and
	// raw arguments within a session (a turn re-running its tests hashes
	// the command once). Both are cleared per session.
	names  map[string]string
	keys   map[string]map[string]string
	keyer  loopdetect.RepeatKeyer
	tc     turnCalls
	counts map[string]int
	keyBuf []string
	// tracker is the replay's, reset per turn.
	tracker *loopdetect.CapTracker
}

func newReader(whatIf *Settings) *reader {
	r := &reader{sc: store.NewScanner(), whatIf: whatIf, names: map[string]string{}, keys: map[string]map[string]string{},
		counts: map[string]int{}}
	if whatIf != nil {
		r.tracker = loopdetect.NewCapTracker(whatIf.Cap)
	}
	return r
}

// key is recordedKey, memoized.
func (r *reader) key(c store.ToolCall) (key, name string) {
	name, ok := r.names[c.Name]
	if !ok {
		name = strings.Clone(c.Name)
		r.names[name] = name
	}
	byArgs := r.keys[name]
	if byArgs == nil {
		byArgs = map[string]string{}
		r.keys[name] = byArgs
	}
	if c.Invalid == "" {
		if k, ok := byArgs[string(c.Arguments)]; ok {
			return k, name
		}
	}
	key = recordedKey(&r.keyer, c)
	if c.Invalid == "" {
		byArgs[string(c.Arguments)] = key
	}
	return key, name
}

var dupMarker = []byte(`"modelText":"Duplicate provider tool call id `)

// run is a subagent run being read: a turn of its own, with its calls.
type run struct {
	turn Turn
	tc   turnCalls
	loop *store.LoopStop
}

// session reads one transcript. Lines that do not decode are counted in
// skipped, as store.Load skips them. The records of a subagent run (those
// with a parent) make turns of their own, interleaved with the prompt
// turn's when runs are concurrent. loose is the usage recorded outside any
// turn (a /compress summary).
func (r *reader) session(dataDir, id string) (turns []Turn, loose Turn, skipped int, err error) {
	var (
		cwd   string
		cur   *Turn
		dups  map[uint64]bool // hashes of the toolCallIds answered as provider replays
		loop  *store.LoopStop
		runs  map[string]*run // the open subagent runs of the current turn, by agent call
		nrun  int             // runs started in the current turn
		nturn int             // prompt turns started
		// The agent a guarded session watched (acpd's own have none).
		agent, agentSession string
	)
	tc := &r.tc
	tc.reset()
	finishRun := func(parent string, end *store.Record) {
		ru := runs[parent]
		if ru == nil {
			return
		}
		delete(runs, parent)
		ru.tc.dropReplays(dups)
		clear(r.counts)
		ru.turn.finish(&ru.tc, r.counts, ru.loop, end)
		if r.whatIf != nil {
			r.tracker.Reset()
			ru.turn.WhatIf = r.replay(&ru.turn, &ru.tc, *r.whatIf)
		}
		turns = append(turns, ru.turn)
	}
	finish := func(end *store.Record) {
		if cur == nil {
			return
		}
		for _, p := range slices.Sorted(maps.Keys(runs)) {
			finishRun(p, nil) // never ended: acpd stopped during the run
		}
		tc.dropReplays(dups)
		clear(r.counts)
		cur.finish(tc, r.counts, loop, end)
		if r.whatIf != nil {
			r.tracker.Reset()
			cur.WhatIf = r.replay(cur, tc, *r.whatIf)
		}
		turns = append(turns, *cur)
		cur, loop, nrun = nil, nil, 0
		tc.reset()
		clear(dups)
	}
	rec := &r.rec
	clear(r.names)
	clear(r.keys)
	startTurn := func(t time.Time) {
		finish(nil)
		nturn++
		cur = &Turn{Session: id, Turn: nturn, Agent: agent, AgentSession: agentSession, Cwd: cwd, Start: t}
	}
	addBatch := func(tc *turnCalls, calls []store.ToolCall) {
		for _, c := range calls {
			var cl call
			cl.key, cl.name = r.key(c)
			tc.calls = append(tc.calls, cl)
			tc.ids = append(tc.ids, idHash(c.ID))
		}
		tc.ends = append(tc.ends, len(tc.calls))
	}
	// batch routes a response's calls to the prompt turn or to its run.
	batch := func(parent string, calls []store.ToolCall) {
		switch {
		case cur == nil:
		case parent == "":
			addBatch(tc, calls)
		case runs[parent] != nil:
			addBatch(&runs[parent].tc, calls)
		}
	}
	err = r.sc.ScanFile(dataDir, id, func(kind store.Kind, line []byte) error {
		switch kind {
		case store.KindMeta, store.KindLoopStop, store.KindTurnEnd, store.KindAgentStart, store.KindAgentEnd, "":
		case store.KindUser:
			// Only the time: a prompt may be large.
			t, err := store.DecodeTime(line)
			if err != nil {
				skipped++
				return nil
			}
			startTurn(t)
			return nil
		case store.KindToolCalls:
			calls, parent, err := store.DecodeToolCalls(line, r.calls)
			r.calls = calls
			if err != nil {
				skipped++
				return nil
			}
			batch(parent, calls)
			return nil
		case store.KindToolResult:
			if !bytes.Contains(line, dupMarker) {
				return nil
			}
		case store.KindUsage:
		default:
			return nil
		}
		if err := store.Decode(line, rec); err != nil {
			skipped++
			return nil
		}
		switch rec.Kind {
		case store.KindMeta:
			if rec.Meta.ID != id {
				skipped++
				return nil
			}
			cwd = rec.Meta.Cwd
			if rec.Meta.Agent != "" {
				agent, agentSession = rec.Meta.Agent, rec.Meta.AgentSessionID
			}
		case store.KindUser: // a line in another shape, decoded whole
			startTurn(rec.T)
		case store.KindToolCalls:
			batch(rec.Parent, rec.ToolCalls)
		case store.KindToolResult:
			if dups == nil {
				dups = map[uint64]bool{}
			}
			if strings.HasPrefix(rec.Tool.ModelText, "Duplicate provider tool call id ") {
				dups[idHash(rec.Tool.ToolCallID)] = true
			}
		case store.KindLoopStop:
			l := *rec.Loop
			switch {
			case cur == nil:
			case rec.Parent == "":
				loop = &l
			case runs[rec.Parent] != nil:
				runs[rec.Parent].loop = &l
			}
		case store.KindAgentStart:
			if cur == nil {
				return nil
			}
			if runs == nil {
				runs = map[string]*run{}
			}
			finishRun(rec.Parent, nil) // a second start for one call: the first never ended
			nrun++
			runs[rec.Parent] = &run{turn: Turn{Session: id, Turn: cur.Turn, Run: nrun, Agent: rec.Agent.Type,
				ParentToolCallID: rec.Parent, Cwd: cwd, Start: rec.T}}
		case store.KindAgentEnd:
			// The run's end, as a turn_end: its stop reason, or an error.
			finishRun(rec.Parent, &store.Record{T: rec.T, StopReason: rec.Agent.StopReason})
		case store.KindUsage:
			switch {
			case cur == nil:
				if loose.Start.IsZero() {
					loose.Start, loose.Cwd = rec.T, cwd
				}
				loose.addUsage(rec.Usage, false)
			case rec.Parent != "":
				// A subagent run's request: the run's own, and the prompt
				// turn's as its subagents'.
				if ru := runs[rec.Parent]; ru != nil {
					ru.turn.addUsage(rec.Usage, false)
				}
				cur.addUsage(rec.Usage, true)
			default:
				cur.addUsage(rec.Usage, false)
			}
		case store.KindTurnEnd:
			if rec.Parent != "" {
				return nil
			}
			end := *rec
			finish(&end)
		}
		return nil
	})
	finish(nil)
	if cap(turns) > len(turns) {
		// Kept until the report is printed: exactly sized.
		turns = slices.Clone(turns)
	}
	// Turn numbers count every turn of the session, kept or not.
	return turns, loose, skipped, err
}

// idHash is FNV-1a of a toolCallId: a turn keeps its calls' ids only to
// find the provider replays among them, and ids are unique in a session.
func idHash(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return h
}

// recordedKey is the repeat key the daemon computed for a recorded call
// (session.turn.prepare): valid arguments are keyed as JSON; a call whose
// arguments could not be parsed was keyed on their text, which the
// transcript keeps as a JSON string (or as JSON, when the text was JSON of
// the wrong shape). One case cannot be told apart: a call the model sent
// without a name was keyed with the empty name and is recorded as
// unknown_tool.
func recordedKey(keyer *loopdetect.RepeatKeyer, c store.ToolCall) string {
	args := c.Arguments
	if c.Invalid != "" && len(args) > 0 && args[0] != '"' && !bytes.Equal(args, []byte("{}")) {
		return loopdetect.ToolCallRepeatKey(c.Name, string(args))
	}
	k, err := keyer.KeyJSON(c.Name, args)
	if err != nil {
		return loopdetect.ToolCallRepeatKey(c.Name, string(args))
	}
	return k
}

// finish fills in the turn's figures once its records are in (the provider
// replays dropped) and derives the outcome. counts is empty scratch.
func (t *Turn) finish(tc *turnCalls, counts map[string]int, loop *store.LoopStop, end *store.Record) {
	streak, last := 0, ""
	for _, c := range tc.calls {
		t.ToolCalls++
		n := counts[c.key] + 1
		counts[c.key] = n
		if n > t.MaxRepeat {
			t.MaxRepeat, t.MaxRepeatTool = n, c.name
		}
		if c.name == last {
			streak++
		} else {
			streak, last = 1, c.name
		}
		if streak > t.MaxNameStreak {
			t.MaxNameStreak, t.StreakTool = streak, c.name
		}
	}
	t.DistinctKeys = len(counts)
	switch {
	case end == nil:
		t.Outcome = "incomplete"
		return
	case loop != nil:
		t.Outcome, t.LoopType, t.CapReason = "loop", loop.LoopType, loop.CapReason
	case end.StopReason != "":
		t.Outcome = string(end.StopReason)
	default:
		t.Outcome = "error"
	}
	t.Duration = end.T.Sub(t.Start)
}

// replay runs the daemon guard's per-batch decision over the turn's batches
// under s and returns how the outcome would change (nil: it would not).
func (r *reader) replay(t *Turn, tc *turnCalls, s Settings) *Change {
	tr := r.tracker
	start := 0
	for bi, end := range tc.ends {
		keys := r.keyBuf[:0]
		for _, c := range tc.calls[start:end] {
			keys = append(keys, c.key)
		}
		r.keyBuf = keys
		batchStart := start
		start = end
		lt, cr := tr.RecordBatch(keys, s.SkipLoopDetection)
		if lt == "" {
			continue
		}
		names := func(key string) string {
			for _, c := range tc.calls[:batchStart+len(keys)] {
				if c.key == key {
					return c.name
				}
			}
			return ""
		}
		last := bi == len(tc.ends)-1
		if last && t.stoppedByGuard() && string(lt) == t.LoopType && (t.CapReason == "" || string(cr) == t.CapReason) {
			return nil // the same stop on the same batch
		}
		return &Change{Stops: true, LoopType: string(lt), CapReason: string(cr), AtCall: tr.Total(),
			Why: why(lt, cr, tr, names(tr.MaxRepeatKey()))}
	}
	if t.stoppedByGuard() {
		return &Change{AtCall: tr.Total(), Why: fmt.Sprintf(
			"no cap or duplicate rule holds at call %d (%d calls, max repeat %d); the transcript ends there",
			tr.Total(), tr.Total(), tr.MaxKeyRepeat())}
	}
	return nil
}

func why(lt loopdetect.LoopType, cr loopdetect.CapReason, tr *loopdetect.CapTracker, tool string) string {
	c := tr.Cap()
	switch {
	case lt == loopdetect.LoopGlobalToolCallDuplicate:
		return fmt.Sprintf("%s repeated %d times (skipLoopDetection false)", tool, tr.MaxKeyRepeat())
	case cr == loopdetect.CapExplicit:
		return fmt.Sprintf("%d calls past the hard cap of %d", tr.Total(), c.Max)
	case cr == loopdetect.CapBackstop:
		return fmt.Sprintf("%d calls past the backstop of %d", tr.Total(), c.Max*loopdetect.AdaptiveCapHardMultiplier)
	case c.StuckWindow > 0:
		return fmt.Sprintf("%d calls past the soft cap of %d with one call repeated %d times in the last %d",
			tr.Total(), c.Max, tr.StuckRepeat(), c.StuckWindow)
	default:
		return fmt.Sprintf("%d calls past the soft cap of %d with %s repeated %d times",
			tr.Total(), c.Max, tool, tr.MaxKeyRepeat())
	}
}

// durationMillis is a Turn's duration for json and csv.
func (t *Turn) durationMillis() int64 { return t.Duration.Milliseconds() }

// MarshalJSON adds durationMs.
func (t Turn) MarshalJSON() ([]byte, error) {
	type plain Turn
	return segjson.Marshal(struct {
		plain
		DurationMs int64 `json:"durationMs"`
	}{plain(t), t.durationMillis()})
}
