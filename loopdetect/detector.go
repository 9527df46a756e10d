package loopdetect

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf16"
)

// EventKind is the kind of a model stream event fed to the Detector.
type EventKind int

// Stream event kinds the Detector distinguishes; anything else is EventOther.
const (
	EventOther           EventKind = iota // ignored by every detector
	EventToolCallRequest                  // one tool call: ToolName and Args/ArgsJSON
	EventContent                          // a text delta: Text
	EventThought                          // a thought summary: Subject and Description
	EventFinished                         // a model response completed; commits the cap floor
	EventRetry                            // the response is being retried; its calls are discarded
	EventUserCancelled                    // the user cancelled; ignored like EventOther
)

// Event is one model stream event.
type Event struct {
	Kind     EventKind
	ToolName string
	// Args holds decoded arguments; ArgsJSON raw ones and wins when non-nil.
	// With neither set the arguments count as {}, as in the daemon.
	Args     any
	ArgsJSON json.RawMessage
	// Key is the call's repeat key when the caller already has it; when
	// empty it is computed from ToolName and the arguments.
	Key                  string
	Text                 string // EventContent
	Subject, Description string // EventThought
}

// RepeatKey returns the event's repeat key. Raw arguments that are not
// valid JSON are keyed as a JSON string of their text.
func (e *Event) RepeatKey() string {
	if e.Key != "" {
		return e.Key
	}
	switch {
	case e.ArgsJSON != nil:
		if k, err := ToolCallRepeatKeyJSON(e.ToolName, e.ArgsJSON); err == nil {
			return k
		}
		return ToolCallRepeatKey(e.ToolName, string(e.ArgsJSON))
	case e.Args == nil:
		return ToolCallRepeatKey(e.ToolName, map[string]any{})
	}
	return ToolCallRepeatKey(e.ToolName, e.Args)
}

// shellCommand returns args.command when it is a string.
func (e *Event) shellCommand() (string, bool) {
	var args any = e.Args
	if e.ArgsJSON != nil {
		var m map[string]any
		if json.Unmarshal(e.ArgsJSON, &m) != nil {
			return "", false
		}
		args = m
	}
	m, ok := args.(map[string]any)
	if !ok {
		return "", false
	}
	cmd, ok := m["command"].(string)
	return cmd, ok
}

// RecordKind says what a Record reports.
type RecordKind int

// Record kinds, mirroring the reference's telemetry events.
const (
	RecordLoopDetected      RecordKind = iota // a detector fired; LoopType says which
	RecordDetectionDisabled                   // DisableForSession was called
)

// Record is what the reference logs as telemetry. Every detector that fires
// produces one, even when several fire on the same call.
type Record struct {
	Kind     RecordKind
	LoopType LoopType
	// CapReason says which cap rule fired when LoopType is
	// LoopTurnToolCallCap; "" otherwise.
	CapReason CapReason
}

// Config configures a Detector.
type Config struct {
	// Cap is the per-turn tool-call cap (always on).
	Cap Cap
	// SkipLoopDetection turns the heuristic tier off in Check, as the
	// model.skipLoopDetection setting does (the CLI default is true).
	SkipLoopDetection bool
	// OnRecord, if set, receives every Record as it happens.
	OnRecord func(Record)
}

// Detector is qwen-code's core LoopDetectionService (reference version) for
// one session. The always-on tier (consecutive identical calls, git
// inspection stagnation, the per-turn cap) and the heuristic tier (global
// duplicates, alternating calls, read-file loops, action stagnation, content
// chanting, repetitive thoughts) share one latch: once a loop is detected
// every later check reports it until Reset.
type Detector struct {
	cfg Config

	loopDetected  bool
	disabled      bool
	lastLoopType  LoopType
	lastCapReason CapReason

	// always-on
	cap         *CapTracker
	lastKey     string
	consecutive int
	inShell     bool // the last call was a git inspection
	shellStreak int

	// heuristic
	globalCounts   map[string]int
	recentKeys     []string // last 2*AlternatingPatternCycles keys
	recentNames    []string // last FileReadWindow raw names
	hasSeenNonRead bool
	lastName       string
	haveLastName   bool
	sameNameStreak int
	thoughts       []string
	content        contentTracker
	inCodeBlock    bool
}

// New returns a Detector in its reset state.
func New(cfg Config) *Detector {
	return &Detector{
		cfg:          cfg,
		cap:          NewCapTracker(cfg.Cap),
		globalCounts: make(map[string]int),
	}
}

// LastLoopType is the type of the most recent detection since Reset, or "".
// When several heuristics fire on one call, the last one evaluated wins.
func (d *Detector) LastLoopType() LoopType { return d.lastLoopType }

// LastCapReason is the cap rule behind the most recent turn_tool_call_cap
// detection since Reset, or "" when the last detection was of another type.
func (d *Detector) LastCapReason() CapReason { return d.lastCapReason }

// ConsecutiveToolCallCount is the current run of identical consecutive calls.
func (d *Detector) ConsecutiveToolCallCount() int { return d.consecutive }

// CapTotal is the number of calls counted against the per-turn cap.
func (d *Detector) CapTotal() int { return d.cap.Total() }

// DisableForSession turns every detector off for the rest of the session
// (Reset keeps it off) and records it; each call records once.
func (d *Detector) DisableForSession() {
	d.disabled = true
	d.emit(Record{Kind: RecordDetectionDisabled})
}

func (d *Detector) emit(r Record) {
	if d.cfg.OnRecord != nil {
		d.cfg.OnRecord(r)
	}
}

func (d *Detector) fire(t LoopType) {
	d.lastLoopType = t
	d.lastCapReason = ""
	d.emit(Record{Kind: RecordLoopDetected, LoopType: t})
}

func (d *Detector) fireCap(r CapReason) {
	d.lastLoopType = LoopTurnToolCallCap
	d.lastCapReason = r
	d.emit(Record{Kind: RecordLoopDetected, LoopType: LoopTurnToolCallCap, CapReason: r})
}

// Reset starts a new prompt: it clears every counter, the latch and the
// last loop type, but keeps DisableForSession in force.
func (d *Detector) Reset() {
	d.loopDetected = false
	d.lastLoopType = ""
	d.lastCapReason = ""
	d.cap.Reset()
	d.resetStreaks()
	d.content.reset()
	// Deliberate deviation from upstream (acpd Decision 3): upstream never
	// clears inCodeBlock, so an unbalanced ``` fence in one prompt hid all
	// content of the next prompt from the chanting detector.
	d.inCodeBlock = false
	d.thoughts = d.thoughts[:0]
	d.recentNames = d.recentNames[:0]
	d.sameNameStreak = 0
	d.lastName, d.haveLastName = "", false
	d.hasSeenNonRead = false
	clear(d.globalCounts)
	d.recentKeys = d.recentKeys[:0]
}

func (d *Detector) resetStreaks() {
	d.lastKey, d.consecutive = "", 0
	d.inShell, d.shellStreak = false, 0
}

// Check is what a session calls per stream event: the always-on tier, then
// the heuristic tier unless Config.SkipLoopDetection is set.
func (d *Detector) Check(ev Event) bool {
	if ev.Kind == EventToolCallRequest && ev.Key == "" && !d.disabled && !d.loopDetected {
		ev.Key = ev.RepeatKey()
	}
	if d.CheckAlwaysOnSafeties(ev) {
		return true
	}
	if d.cfg.SkipLoopDetection {
		return false
	}
	return d.AddAndCheckHeuristicLoops(ev)
}

// AddAndCheck runs both tiers regardless of SkipLoopDetection, as the
// reference's addAndCheck does.
func (d *Detector) AddAndCheck(ev Event) bool {
	if ev.Kind == EventToolCallRequest && ev.Key == "" && !d.disabled && !d.loopDetected {
		ev.Key = ev.RepeatKey()
	}
	if d.CheckAlwaysOnSafeties(ev) {
		return true
	}
	return d.AddAndCheckHeuristicLoops(ev)
}

// CheckAlwaysOnSafeties runs the tier no setting can skip: consecutive
// identical calls, git inspection stagnation and the per-turn cap. Finished
// and Retry events move the cap's rollback floor even while disabled.
func (d *Detector) CheckAlwaysOnSafeties(ev Event) bool {
	if d.loopDetected {
		return true
	}
	switch ev.Kind {
	case EventFinished:
		d.cap.Finished()
		return false
	case EventRetry:
		d.cap.Retry()
		d.resetStreaks()
		return false
	case EventToolCallRequest:
	default:
		return false
	}
	if d.disabled {
		return false // and no hashing: nothing would use the key
	}
	key := ev.RepeatKey()
	// Counted before any guard, so even a call that halts for another
	// reason feeds the stuck signal.
	d.cap.ObserveKey(key)

	if key == d.lastKey {
		d.consecutive++
	} else {
		d.lastKey, d.consecutive = key, 1
	}
	if d.consecutive >= ToolCallLoopThreshold {
		d.fire(LoopConsecutiveIdenticalToolCalls)
		d.loopDetected = true
		return true
	}

	if d.isShellInspection(&ev) {
		if d.inShell {
			d.shellStreak++
		} else {
			d.inShell, d.shellStreak = true, 1
		}
		if d.shellStreak >= ShellCommandStagnationThreshold {
			d.fire(LoopShellCommandStagnation)
			d.loopDetected = true
			return true
		}
	} else {
		d.inShell, d.shellStreak = false, 0
	}

	d.cap.AddCalls(1)
	if r := d.cap.HaltReason(); r != "" {
		d.fireCap(r)
		d.loopDetected = true
		return true
	}
	return false
}

func (d *Detector) isShellInspection(ev *Event) bool {
	if ev.ToolName != "run_shell_command" {
		return false
	}
	cmd, ok := ev.shellCommand()
	return ok && isGitOverviewInspection(cmd)
}

// AddAndCheckHeuristicLoops runs the opt-in tier (skipped by default in CLI
// and daemon sessions): global duplicates, alternating calls, read-file
// loops and action stagnation on tool calls, chanting on content and
// repetition on thoughts.
func (d *Detector) AddAndCheckHeuristicLoops(ev Event) bool {
	if d.loopDetected || d.disabled {
		return d.loopDetected
	}
	switch ev.Kind {
	case EventToolCallRequest:
		// Chanting and thought repetition only count within one stream.
		d.content.reset()
		d.thoughts = d.thoughts[:0]
		d.trackToolCall(ev.ToolName)
		key := ev.RepeatKey()
		// All four run, so each one that fires is recorded and the last
		// sets LastLoopType.
		globalDup := d.checkGlobalDuplicate(key)
		alternating := d.checkAlternating(key)
		readLoop := d.checkReadFileLoop()
		stagnation := d.checkActionStagnation()
		d.loopDetected = globalDup || alternating || readLoop || stagnation
	case EventRetry:
		// A retry replays the failed attempt's calls: drop the duplicate
		// counters so the replay cannot trip them.
		clear(d.globalCounts)
		d.recentKeys = d.recentKeys[:0]
	case EventContent:
		d.loopDetected = d.checkContent(ev.Text)
	case EventThought:
		d.trackThought(ev.Subject, ev.Description)
		d.loopDetected = d.checkThoughts()
	}
	return d.loopDetected
}

// isReadLike reports read-only exploration tools by exact raw name or the
// read_/list_ prefix (MCP tools), never by substring.
func isReadLike(name string) bool {
	switch name {
	case "read_file", "read_many_files", "list_directory", "zoom_image":
		return true
	}
	return strings.HasPrefix(name, "read_") || strings.HasPrefix(name, "list_")
}

func (d *Detector) trackToolCall(name string) {
	d.recentNames = append(d.recentNames, name)
	if len(d.recentNames) > FileReadWindow {
		d.recentNames = slices.Delete(d.recentNames, 0, 1)
	}
	if !d.hasSeenNonRead && !isReadLike(name) {
		d.hasSeenNonRead = true
	}
	if d.haveLastName && d.lastName == name {
		d.sameNameStreak++
	} else {
		d.lastName, d.haveLastName, d.sameNameStreak = name, true, 1
	}
}

func (d *Detector) checkGlobalDuplicate(key string) bool {
	n := d.globalCounts[key] + 1
	d.globalCounts[key] = n
	if n >= GlobalDuplicateThreshold {
		d.fire(LoopGlobalToolCallDuplicate)
		return true
	}
	return false
}

func (d *Detector) checkAlternating(key string) bool {
	const window = 2 * AlternatingPatternCycles
	d.recentKeys = append(d.recentKeys, key)
	if len(d.recentKeys) > window {
		d.recentKeys = slices.Delete(d.recentKeys, 0, 1)
	}
	if len(d.recentKeys) < window {
		return false
	}
	a, b := d.recentKeys[0], d.recentKeys[1]
	if a == b {
		return false
	}
	for i, k := range d.recentKeys {
		if (i%2 == 0 && k != a) || (i%2 == 1 && k != b) {
			return false
		}
	}
	d.fire(LoopAlternatingToolCallPattern)
	return true
}

func (d *Detector) checkReadFileLoop() bool {
	// Cold start: a prompt that has only read so far is exploring.
	if !d.hasSeenNonRead || len(d.recentNames) < FileReadThreshold {
		return false
	}
	reads := 0
	for _, n := range d.recentNames {
		if isReadLike(n) {
			reads++
		}
	}
	if reads >= FileReadThreshold {
		d.fire(LoopReadFileLoop)
		return true
	}
	return false
}

func (d *Detector) checkActionStagnation() bool {
	if d.sameNameStreak >= StagnationThreshold {
		d.fire(LoopActionStagnation)
		return true
	}
	return false
}

func (d *Detector) checkContent(s string) bool {
	f := classifyContent(s)
	if f.reset {
		// Structure boundaries (lists, tables, headings, fences) repeat
		// legitimately; never compare chunks across them.
		d.content.reset()
	}
	wasIn := d.inCodeBlock
	if f.fences%2 == 1 {
		d.inCodeBlock = !d.inCodeBlock
	}
	if wasIn || d.inCodeBlock || f.divider {
		return false
	}
	if d.content.add(s) {
		d.fire(LoopChantingIdenticalSentences)
		return true
	}
	return false
}

func (d *Detector) trackThought(subject, description string) {
	sig := jsLower(jsTrim(subject)) + "|" + cutUTF16(jsLower(jsTrim(description)), thoughtDescriptionPrefix)
	d.thoughts = append(d.thoughts, sig)
	if len(d.thoughts) > MaxThoughtHistory {
		d.thoughts = slices.Delete(d.thoughts, 0, 1)
	}
}

func (d *Detector) checkThoughts() bool {
	if len(d.thoughts) < ThoughtRepeatThreshold {
		return false
	}
	recent := d.thoughts[len(d.thoughts)-ThoughtRepeatThreshold:]
	for _, t := range recent[1:] {
		if t != recent[0] {
			return false
		}
	}
	d.fire(LoopRepetitiveThoughts)
	return true
}

// jsLower lower-cases like String.prototype.toLowerCase for the one
// unconditional multi-character mapping Go lacks (İ → i̇). The
// context-dependent final sigma is not reproduced.
func jsLower(s string) string {
	if strings.ContainsRune(s, 'İ') {
		s = strings.ReplaceAll(s, "İ", "i\u0307")
	}
	return strings.ToLower(s)
}

// cutUTF16 keeps the first n UTF-16 code units of s, as substring(0, n)
// does; a pair split by the cut keeps its high surrogate (in WTF-8).
func cutUTF16(s string, n int) string {
	units := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if w < 0 {
			w = 1
		}
		if units+w > n {
			if units < n { // half a pair fits
				hi, _ := utf16.EncodeRune(r)
				return s[:i] + string(appendWTF8(nil, hi))
			}
			return s[:i]
		}
		units += w
	}
	return s
}
