package tck

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/acpd/acpd/acp/acptest"
)

// tier is how much a requirement weighs in the verdict, as the kit has it.
type tier string

const (
	mandatory     tier = "MANDATORY"     // a MUST: a failure, or no test of it, fails the run
	capability    tier = "CAPABILITY"    // applies when advertised; a failure then fails the run
	advisory      tier = "ADVISORY"      // a SHOULD: the kit reports it; acpd holds itself to it
	informational tier = "INFORMATIONAL" // spec silent: recorded, never judged
	acpdOwn       tier = "ACPD"          // acpd's own promise on the wire, beyond the kit
)

// requirement is one entry of the kit's v1 registry (or one of acpd's).
type requirement struct {
	id   string
	tier tier
	text string
}

// requirements are the kit's v1 requirements, in its registry's order,
// with acpd's own last.
var requirements = []requirement{
	{"ACP-TRANSPORT-001", mandatory, "every stdout line is one JSON-RPC 2.0 message"},
	{"ACP-TRANSPORT-002", mandatory, "stdout is UTF-8"},
	{"ACP-JSONRPC-001", mandatory, "a response echoes its request's id, integer or string"},
	{"ACP-JSONRPC-002", mandatory, "a response has exactly one of result and error; an error an integer code and a string message"},
	{"ACP-JSONRPC-003", mandatory, "a notification gets no response"},
	{"ACP-JSONRPC-004", advisory, "an unknown method gets -32601"},
	{"ACP-JSONRPC-005", advisory, "the connection works after an erroneous request"},
	{"ACP-INIT-001", mandatory, "initialize succeeds, its result valid, protocolVersion an integer"},
	{"ACP-INIT-002", mandatory, "asked for version 1, the agent answers 1"},
	{"ACP-INIT-003", mandatory, "asked for an unsupported version (65535), the agent answers one it supports, not 65535"},
	{"ACP-INIT-004", advisory, "initialize's result has agentInfo with name and version"},
	{"ACP-SCHEMA-001", mandatory, "every message the agent sends validates against the v1 schema"},
	{"ACP-SESSION-001", mandatory, "session/new with an absolute cwd and no MCP servers gives a sessionId"},
	{"ACP-SESSION-002", mandatory, "two session/new give two sessionIds"},
	{"ACP-PROMPT-001", mandatory, "a text prompt ends with a defined stopReason"},
	{"ACP-PROMPT-002", mandatory, "a turn's session/update notifications are valid and carry its sessionId"},
	{"ACP-PROMPT-003", advisory, "a prompt with a resource_link block is accepted"},
	{"ACP-CANCEL-001", mandatory, "session/cancel during a prompt ends it with stopReason cancelled"},
	{"ACP-CANCEL-002", mandatory, "a cancelled turn's updates all come before its response"},
	{"ACP-LOAD-001", capability, "session/load of a stored session succeeds with a valid result"},
	{"ACP-LOAD-002", capability, "every update of a session/load comes before its response; none after"},
	{"ACP-LOAD-003", advisory, "session/load's result is an object, not null"},
	{"ACP-RESUME-001", capability, "session/resume succeeds with a valid result"},
	{"ACP-RESUME-002", capability, "session/resume replays no history before its response"},
	{"ACP-LIST-001", capability, "session/list with no params lists sessions as an array"},
	{"ACP-LIST-002", capability, "session/list for a cwd no session uses gives []"},
	{"ACP-DELETE-001", capability, "session/delete of a session succeeds with {}"},
	{"ACP-DELETE-002", advisory, "deleting a session that is gone or never was succeeds"},
	{"ACP-CLOSE-001", capability, "session/close of an idle session succeeds with {}"},
	{"ACP-CLOSE-002", capability, "session/close during a prompt ends the prompt cancelled"},
	{"ACP-ADDDIRS-001", capability, "session/new with an absolute additionalDirectories entry is accepted"},
	{"ACP-MODES-001", capability, "session/new's modes are valid and the current one is offered"},
	{"ACP-MODES-002", capability, "session/set_mode to another mode succeeds"},
	{"ACP-CONFIG-001", capability, "every config option's currentValue is one of its values"},
	{"ACP-CONFIG-002", capability, "session/set_config_option answers every option, the changed one changed"},
	{"ACP-CONFIG-003", mandatory, "no boolean config option unless the client accepts them"},
	{"ACP-PROMPTCAP-001", capability, "an image block is accepted when image is advertised"},
	{"ACP-PROMPTCAP-002", capability, "an audio block is accepted when audio is advertised"},
	{"ACP-PROMPTCAP-003", capability, "an embedded resource block is accepted when embeddedContext is advertised"},
	{"ACP-AUTH-001", advisory, "authMethods ids are unique"},
	{"ACP-AUTH-002", mandatory, "no terminal auth method unless the client accepts it"},
	{"ACP-AUTH-003", capability, "after authenticate, session/new is not refused for authentication"},
	{"ACP-AUTH-004", capability, "logout succeeds with an object when advertised"},
	{"ACP-AUTH-005", advisory, "without authMethods, session/new is not refused for authentication"},
	{"ACP-CLIENTCAP-001", mandatory, "no fs/* call to a client that did not offer fs"},
	{"ACP-CLIENTCAP-002", mandatory, "no terminal/* call to a client that did not offer terminal"},
	{"ACP-CLIENTCAP-003", mandatory, "no elicitation/create to a client that did not offer elicitation"},
	{"ACP-EXT-001", mandatory, "a request to an unknown _-prefixed method gets a response"},
	{"ACP-META-001", advisory, "a prompt carrying _meta (traceparent) is accepted"},
	{"ACP-ERROR-001", advisory, "every error message is one non-empty line"},
	{"ACP-SHUTDOWN-001", advisory, "the agent exits on its own once stdin is closed"},
	{"ACP-SCHEMA-002", advisory, "no message carries a root key its schema does not define, _meta aside"},
	{"ACP-STDERR-001", informational, "how much the agent writes to stderr"},
	{"ACP-INFO-PARSE-001", informational, "what a line that is not JSON gets"},
	{"ACP-INFO-INVALIDREQ-001", informational, "what JSON that is not JSON-RPC gets"},
	{"ACP-INFO-UNKNOWNSESSION-001", informational, "what a prompt to an unknown session gets"},
	{"ACPD-NEW-001", acpdOwn, "no session/update for a new session before its session/new response (clients drop or wait on them)"},
	{"ACPD-SETMODEL-001", acpdOwn, "session/set_model is answered as the model config option"},
}

// status is an outcome, ordered as the kit aggregates them.
type status string

const (
	pass      status = "PASS"
	fail      status = "FAIL"
	skipped   status = "SKIPPED"
	notTested status = "NOT_TESTED"
)

// report collects the outcomes of every check and the facts every line
// the agents wrote is judged on.
type report struct {
	mu       sync.Mutex
	outcomes map[string][]outcome
	// lineRules holds, per line-level rule, its first violation ("" none).
	lineRules map[string]string
	lines     int
	stderr    []int
}

type outcome struct {
	status status
	note   string
}

func newReport() *report {
	return &report{outcomes: map[string][]outcome{}, lineRules: map[string]string{}}
}

func (r *report) record(id string, s status, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[id] = append(r.outcomes[id], outcome{s, fmt.Sprintf(format, args...)})
}

// check records pass or fail.
func (r *report) check(id string, ok bool, format string, args ...any) {
	if ok {
		r.record(id, pass, "")
		return
	}
	r.record(id, fail, format, args...)
}

// agentLine judges one line an agent wrote against the line-level rules.
func (r *report) agentLine(b []byte, sent map[string]string, v *acptest.Validator) {
	probs := lineProblems(b)
	// The answer to the legacy session/set_model, which the kit never
	// sends, is in neither v1 schema: ACPD-SETMODEL-001 checks it is {}.
	var env struct {
		ID json.RawMessage `json:"id"`
	}
	legacy := json.Unmarshal(b, &env) == nil && len(env.ID) > 0 && sent[string(env.ID)] == "session/set_model"
	if err := v.CheckAgentLine(b, sent); err != nil && !legacy {
		probs["ACP-SCHEMA-001"] = fmt.Sprintf("%v: %.300s", err, b)
		if strings.Contains(err.Error(), "unknown") {
			probs["ACP-SCHEMA-002"] = probs["ACP-SCHEMA-001"]
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines++
	for id, p := range probs {
		if r.lineRules[id] == "" {
			r.lineRules[id] = p
		}
	}
}

func (r *report) stderrBytes(n int) {
	r.mu.Lock()
	r.stderr = append(r.stderr, n)
	r.mu.Unlock()
}

// finish records the line-level rules, judged over every line of the run.
func (r *report) finish() {
	r.mu.Lock()
	lines, rules, stderr := r.lines, r.lineRules, r.stderr
	r.mu.Unlock()
	for _, id := range []string{"ACP-TRANSPORT-001", "ACP-TRANSPORT-002", "ACP-JSONRPC-002", "ACP-SCHEMA-001", "ACP-SCHEMA-002", "ACP-ERROR-001"} {
		r.check(id, rules[id] == "" && lines > 0, "%s", rules[id])
	}
	total, most := 0, 0
	for _, n := range stderr {
		total += n
		most = max(most, n)
	}
	r.record("ACP-STDERR-001", pass, "%d processes wrote %d bytes to stderr (at most %d)", len(stderr), total, most)
}

// aggregate is a requirement's status: any FAIL wins, then any PASS, then
// SKIPPED; nothing recorded is NOT_TESTED.
func (r *report) aggregate(id string) (status, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	os := r.outcomes[id]
	if len(os) == 0 {
		return notTested, ""
	}
	var notes []string
	best := skipped
	for _, o := range os {
		switch {
		case o.status == fail:
			return fail, o.note
		case o.status == pass:
			best = pass
		}
		if o.note != "" {
			notes = append(notes, o.note)
		}
	}
	sort.Strings(notes)
	return best, strings.Join(notes, "; ")
}

// verdict prints the table and says whether the run is conformant by the
// kit's rule, and which requirements acpd's stricter rule (every ADVISORY
// and acpd's own pass too) finds wanting.
func (r *report) verdict() (table string, conformant bool, wanting []string) {
	var b strings.Builder
	conformant = true
	for _, q := range requirements {
		s, note := r.aggregate(q.id)
		fmt.Fprintf(&b, "%-28s %-13s %-10s %s", q.id, q.tier, s, q.text)
		if note != "" {
			fmt.Fprintf(&b, " (%s)", note)
		}
		b.WriteByte('\n')
		switch {
		case q.tier == mandatory && (s == fail || s == notTested), q.tier == capability && s == fail:
			conformant = false
			wanting = append(wanting, q.id)
		case (q.tier == advisory || q.tier == acpdOwn) && (s == fail || s == notTested):
			wanting = append(wanting, q.id)
		case q.tier == informational && s == fail:
			wanting = append(wanting, q.id)
		}
	}
	if conformant {
		b.WriteString("VERDICT: CONFORMANT\n")
	} else {
		b.WriteString("VERDICT: NOT CONFORMANT\n")
	}
	return b.String(), conformant, wanting
}
