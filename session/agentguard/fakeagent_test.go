package agentguard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// fakeAgent is a scripted ACP agent for the tests: it speaks the protocol
// over any pair of streams, answers initialize and session/new itself, and
// plays a script for each prompt. It reproduces what real agents send for a
// tool call (guard.md §2) and how they answer a cancel (§3).
type fakeAgent struct {
	in  *bufio.Reader
	out io.Writer

	name string // agentInfo.name
	// onPrompt plays one prompt turn; it must answer the prompt (or not).
	onPrompt func(a *fakeAgent, p *prompt)
	// onLoad replays a loaded session's history before answering.
	onLoad func(a *fakeAgent, sessionID string)
	// onSteer, when set, makes the agent advertise _session/steering and
	// answers each steering request: the outcome ("injected",
	// "startedNewTurn", …); p is the running prompt (nil when none).
	onSteer func(a *fakeAgent, sessionID string, p *prompt, params json.RawMessage) string

	wmu     sync.Mutex
	mu      sync.Mutex
	nextID  int
	waiting map[string]chan json.RawMessage // our requests, by id, awaiting the editor's answer
	prompts map[string]*prompt              // by session
	// seen records every line the agent read, for transparency checks.
	seen []string
}

// prompt is one prompt turn being played.
type prompt struct {
	sessionID string
	id        json.RawMessage
	cancelled chan struct{} // closed on session/cancel
	once      sync.Once
}

func newFakeAgent(in io.Reader, out io.Writer) *fakeAgent {
	return &fakeAgent{in: bufio.NewReaderSize(in, 1<<20), out: out, name: "fake-agent",
		waiting: map[string]chan json.RawMessage{}, prompts: map[string]*prompt{}}
}

type wire struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// serve reads until EOF. Prompts play on their own goroutines.
func (a *fakeAgent) serve() {
	for {
		line, err := a.in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			a.mu.Lock()
			a.seen = append(a.seen, strings.TrimRight(string(line), "\n"))
			a.mu.Unlock()
			a.handle(line)
		}
		if err != nil {
			return
		}
	}
}

func (a *fakeAgent) seenLines() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

func (a *fakeAgent) handle(line []byte) {
	var m wire
	if json.Unmarshal(line, &m) != nil {
		return
	}
	if m.Method == "" {
		a.mu.Lock()
		ch := a.waiting[string(m.ID)]
		delete(a.waiting, string(m.ID))
		a.mu.Unlock()
		if ch != nil {
			if m.Error != nil {
				ch <- json.RawMessage(`{"error":` + string(m.Error) + `}`)
			} else {
				ch <- m.Result
			}
		}
		return
	}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	switch m.Method {
	case "initialize":
		meta := ""
		if a.onSteer != nil {
			meta = `,"_meta":{"steering":{"supported":true}}`
		}
		a.reply(m.ID, fmt.Sprintf(`{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"agentInfo":{"name":%q,"version":"1.0"},"authMethods":[]%s}`, a.name, meta))
	case "_session/steering":
		if a.onSteer == nil {
			a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found: %s"}}`, m.ID, m.Method))
			return
		}
		a.mu.Lock()
		pr := a.prompts[p.SessionID]
		a.mu.Unlock()
		a.reply(m.ID, fmt.Sprintf(`{"outcome":%q}`, a.onSteer(a, p.SessionID, pr, m.Params)))
	case "session/new":
		a.mu.Lock()
		a.nextID++
		id := fmt.Sprintf("sess-%d", a.nextID)
		a.mu.Unlock()
		a.reply(m.ID, fmt.Sprintf(`{"sessionId":%q}`, id))
	case "session/load":
		go func() {
			if a.onLoad != nil {
				a.onLoad(a, p.SessionID)
			}
			a.reply(m.ID, `{}`)
		}()
	case "session/prompt":
		pr := &prompt{sessionID: p.SessionID, id: m.ID, cancelled: make(chan struct{})}
		a.mu.Lock()
		a.prompts[p.SessionID] = pr
		a.mu.Unlock()
		go a.onPrompt(a, pr)
	case "session/cancel":
		a.mu.Lock()
		pr := a.prompts[p.SessionID]
		a.mu.Unlock()
		if pr != nil {
			pr.once.Do(func() { close(pr.cancelled) })
		}
	default:
		if m.ID != nil {
			a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found: %s"}}`, m.ID, m.Method))
		}
	}
}

func (a *fakeAgent) send(line string) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	_, _ = io.WriteString(a.out, line+"\n")
}

func (a *fakeAgent) reply(id json.RawMessage, result string) {
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

// answer ends a prompt with a stop reason.
func (a *fakeAgent) answer(p *prompt, stop string) {
	a.reply(p.id, fmt.Sprintf(`{"stopReason":%q}`, stop))
}

// update sends a session/update with the given update object.
func (a *fakeAgent) update(sessionID, update string) {
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":%s}}`, sessionID, update))
}

// toolCall sends a tool_call update; extra is more members ("" for none).
func (a *fakeAgent) toolCall(sessionID, id, extra string) {
	a.update(sessionID, fmt.Sprintf(`{"sessionUpdate":"tool_call","toolCallId":%q%s}`, id, extra))
}

// toolUpdate sends a tool_call_update.
func (a *fakeAgent) toolUpdate(sessionID, id, extra string) {
	a.update(sessionID, fmt.Sprintf(`{"sessionUpdate":"tool_call_update","toolCallId":%q%s}`, id, extra))
}

// askPermission sends session/request_permission for toolCall (a JSON
// object) and waits for the answer: the outcome ("cancelled", the option
// id, or "error").
func (a *fakeAgent) askPermission(sessionID, toolCall string) string {
	a.mu.Lock()
	a.nextID++
	id := fmt.Sprintf(`"perm-%d"`, a.nextID)
	ch := make(chan json.RawMessage, 1)
	a.waiting[id] = ch
	a.mu.Unlock()
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"session/request_permission","params":{"sessionId":%q,"toolCall":%s,`+
		`"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`,
		id, sessionID, toolCall))
	res := <-ch
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(res, &r)
	switch {
	case r.Error != nil:
		return "error"
	case r.Outcome.Outcome == "selected":
		return r.Outcome.OptionID
	}
	return r.Outcome.Outcome
}

// fakeAgentMain runs the fake agent as this process's main, for the tests
// that need a real agent process (lifecycle). The mode says how it
// behaves; arg is the mode's argument.
func fakeAgentMain(mode, arg string) {
	switch mode {
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
	case "child":
		// A process of its own that outlives it unless someone ends it;
		// its pid goes to the file arg.
		c := exec.Command("sleep", "300")
		if err := c.Start(); err != nil {
			os.Exit(9)
		}
		_ = os.WriteFile(arg, []byte(strconv.Itoa(c.Process.Pid)), 0o644)
	}
	a := newFakeAgent(os.Stdin, os.Stdout)
	a.onPrompt = func(a *fakeAgent, p *prompt) {
		switch mode {
		case "crash-on-prompt":
			a.toolCall(p.sessionID, "c1", `,"title":"ls","kind":"execute","status":"in_progress","rawInput":{"command":"ls"}`)
			os.Exit(3)
		}
		a.answer(p, "end_turn")
	}
	a.serve()
	switch mode {
	case "ignore-eof", "ignore-term":
		// Like the Claude adapter: stdin's EOF does not end the process.
		select {}
	}
	os.Exit(0)
}
