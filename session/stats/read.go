package stats

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/store"
)

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
	// results are the session's result digests by toolCallId hash, for a
	// replay under the result signal (nil otherwise); cleared per session.
	results map[uint64]uint64
}

func newReader(whatIf *Settings) *reader {
	r := &reader{sc: store.NewScanner(), whatIf: whatIf, names: map[string]string{}, keys: map[string]map[string]string{},
		counts: map[string]int{}}
	if whatIf != nil {
		r.tracker = loopdetect.NewCapTracker(whatIf.Cap)
		if whatIf.Cap.Results() {
			r.results = map[uint64]uint64{}
		}
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

var (
	dupMarker        = []byte(`"modelText":"Duplicate provider tool call id `)
	decisionsMarker  = []byte(`"decisions":[`)
	resultHashMarker = []byte(`"resultHash":"`)
)

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
	s := &sessionRead{r: r, id: id}
	r.tc.reset()
	clear(r.names)
	clear(r.keys)
	clear(r.results)
	err = r.sc.ScanFile(dataDir, id, s.line)
	s.finish(nil)
	if cap(s.turns) > len(s.turns) {
		// Kept until the report is printed: exactly sized.
		s.turns = slices.Clone(s.turns)
	}
	// Turn numbers count every turn of the session, kept or not.
	return s.turns, s.loose, s.skipped, err
}

// sessionRead is the state of one transcript being read: the turn open,
// its subagent runs, and the turns finished so far.
type sessionRead struct {
	r       *reader
	id      string
	cwd     string
	cur     *Turn
	dups    map[uint64]bool // hashes of the toolCallIds answered as provider replays
	loop    *store.LoopStop
	runs    map[string]*run // the open subagent runs of the current turn, by agent call
	nrun    int             // runs started in the current turn
	nturn   int             // prompt turns started
	turns   []Turn
	loose   Turn
	skipped int
	// The agent a guarded session watched (acpd's own have none).
	agent, agentSession string
}

// line reads one transcript line. The frequent kinds are decoded only as
// far as the figures need (a prompt's time, a batch's calls); the rest
// whole.
func (s *sessionRead) line(kind store.Kind, line []byte) error {
	r := s.r
	switch kind {
	case store.KindMeta, store.KindLoopStop, store.KindTurnEnd, store.KindAgentStart, store.KindAgentEnd, "":
	case store.KindUser:
		// Only the time: a prompt may be large.
		t, err := store.DecodeTime(line)
		if err != nil {
			s.skipped++
			return nil
		}
		s.startTurn(t)
		return nil
	case store.KindToolCalls:
		calls, parent, err := store.DecodeToolCalls(line, r.calls)
		r.calls = calls
		if err != nil {
			s.skipped++
			return nil
		}
		s.batch(parent, calls)
		return nil
	case store.KindToolResult:
		if r.results != nil && bytes.Contains(line, resultHashMarker) {
			// The digest the result signal compared, for a "results"
			// replay; a line that does not decode only loses it.
			if id, h, err := store.DecodeResultHash(line); err == nil {
				if d, ok := loopdetect.ParseResultHash(h); ok {
					r.results[idHash(id)] = d
				}
			}
		}
		if !bytes.Contains(line, dupMarker) && !bytes.Contains(line, decisionsMarker) {
			return nil
		}
	case store.KindUsage:
	default:
		return nil
	}
	rec := &r.rec
	if err := store.Decode(line, rec); err != nil {
		s.skipped++
		return nil
	}
	s.record(rec)
	return nil
}

// record folds in one decoded record.
func (s *sessionRead) record(rec *store.Record) {
	switch rec.Kind {
	case store.KindMeta:
		if rec.Meta.ID != s.id {
			s.skipped++
			return
		}
		s.cwd = rec.Meta.Cwd
		if rec.Meta.Agent != "" {
			s.agent, s.agentSession = rec.Meta.Agent, rec.Meta.AgentSessionID
		}
	case store.KindUser: // a line in another shape, decoded whole
		s.startTurn(rec.T)
	case store.KindToolCalls:
		s.batch(rec.Parent, rec.ToolCalls)
	case store.KindToolResult:
		if s.dups == nil {
			s.dups = map[uint64]bool{}
		}
		if strings.HasPrefix(rec.Tool.ModelText, "Duplicate provider tool call id ") {
			s.dups[idHash(rec.Tool.ToolCallID)] = true
		}
		if len(rec.Tool.Decisions) > 0 {
			if t := s.turnOf(rec.Parent); t != nil {
				t.Decided = append(t.Decided, decided(rec.Tool))
			}
		}
	case store.KindLoopStop:
		l := *rec.Loop
		switch {
		case s.cur == nil:
		case rec.Parent == "":
			s.loop = &l
		case s.runs[rec.Parent] != nil:
			s.runs[rec.Parent].loop = &l
		}
	case store.KindAgentStart:
		if s.cur == nil {
			return
		}
		if s.runs == nil {
			s.runs = map[string]*run{}
		}
		s.finishRun(rec.Parent, nil) // a second start for one call: the first never ended
		s.nrun++
		s.runs[rec.Parent] = &run{turn: Turn{Session: s.id, Turn: s.cur.Turn, Run: s.nrun, Agent: rec.Agent.Type,
			ParentToolCallID: rec.Parent, Cwd: s.cwd, Start: rec.T}}
	case store.KindAgentEnd:
		// The run's end, as a turn_end: its stop reason, or an error.
		s.finishRun(rec.Parent, &store.Record{T: rec.T, StopReason: rec.Agent.StopReason})
	case store.KindUsage:
		s.usage(rec)
	case store.KindTurnEnd:
		if rec.Parent != "" {
			return
		}
		end := *rec
		s.finish(&end)
	}
}

// usage adds a usage record to the turn or run it belongs to, or to the
// session's loose usage.
func (s *sessionRead) usage(rec *store.Record) {
	switch {
	case s.cur == nil:
		if s.loose.Start.IsZero() {
			s.loose.Start, s.loose.Cwd = rec.T, s.cwd
		}
		s.loose.addUsage(rec.Usage, false)
	case rec.Parent != "":
		// A subagent run's request: the run's own, and the prompt
		// turn's as its subagents'.
		if ru := s.runs[rec.Parent]; ru != nil {
			ru.turn.addUsage(rec.Usage, false)
		}
		s.cur.addUsage(rec.Usage, true)
	default:
		s.cur.addUsage(rec.Usage, false)
	}
}

// turnOf is the turn a record of parent belongs to: the prompt turn, or
// its subagent run; nil outside a turn.
func (s *sessionRead) turnOf(parent string) *Turn {
	switch {
	case s.cur == nil:
		return nil
	case parent == "":
		return s.cur
	case s.runs[parent] != nil:
		return &s.runs[parent].turn
	}
	return nil
}

func (s *sessionRead) startTurn(t time.Time) {
	s.finish(nil)
	s.nturn++
	s.cur = &Turn{Session: s.id, Turn: s.nturn, Agent: s.agent, AgentSession: s.agentSession, Cwd: s.cwd, Start: t}
}

// batch routes a response's calls to the prompt turn or to its run.
func (s *sessionRead) batch(parent string, calls []store.ToolCall) {
	switch {
	case s.cur == nil:
	case parent == "":
		s.r.addBatch(&s.r.tc, calls)
	case s.runs[parent] != nil:
		s.r.addBatch(&s.runs[parent].tc, calls)
	}
}

// addBatch appends one model response's calls to tc.
func (r *reader) addBatch(tc *turnCalls, calls []store.ToolCall) {
	for _, c := range calls {
		var cl call
		cl.key, cl.name = r.key(c)
		tc.calls = append(tc.calls, cl)
		tc.ids = append(tc.ids, idHash(c.ID))
	}
	tc.ends = append(tc.ends, len(tc.calls))
}

// finishRun ends a subagent run (end nil: it never ended).
func (s *sessionRead) finishRun(parent string, end *store.Record) {
	ru := s.runs[parent]
	if ru == nil {
		return
	}
	delete(s.runs, parent)
	s.r.complete(&ru.turn, &ru.tc, s.dups, ru.loop, end)
	s.turns = append(s.turns, ru.turn)
}

// finish ends the prompt turn open (end nil: it never ended) and its runs.
func (s *sessionRead) finish(end *store.Record) {
	if s.cur == nil {
		return
	}
	for _, p := range slices.Sorted(maps.Keys(s.runs)) {
		s.finishRun(p, nil) // never ended: acpd stopped during the run
	}
	s.r.complete(s.cur, &s.r.tc, s.dups, s.loop, end)
	s.turns = append(s.turns, *s.cur)
	s.cur, s.loop, s.nrun = nil, nil, 0
	s.r.tc.reset()
	clear(s.dups)
	// An agent behind acpd guard may reuse call ids in later turns.
	clear(s.r.results)
}

// complete fills in a finished turn's figures and, with a what-if, its
// replay.
func (r *reader) complete(t *Turn, tc *turnCalls, dups map[uint64]bool, loop *store.LoopStop, end *store.Record) {
	tc.dropReplays(dups)
	clear(r.counts)
	t.finish(tc, r.counts, loop, end)
	if r.whatIf != nil {
		r.tracker.Reset()
		t.WhatIf, t.Replay = r.replay(t, tc, *r.whatIf)
	}
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
