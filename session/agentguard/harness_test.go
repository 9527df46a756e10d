package agentguard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/proxy"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/store"
)

// harness is an editor talking to the guard, which relays to a fakeAgent,
// all in process over pipes.
type harness struct {
	t     *testing.T
	agent *fakeAgent
	eng   *Engine
	p     *proxy.Proxy
	store *store.Store
	data  string

	editorIn io.WriteCloser // what the editor writes

	mu      sync.Mutex
	nextID  int
	waiting map[string]chan string
	// received are the notifications and requests the editor got, in order.
	received []string
	// permission answers the agent's permission requests: the result JSON,
	// or "" to leave the request unanswered (then held keeps its id).
	permission func(params json.RawMessage) string
	held       []json.RawMessage
	raw        chan string // every line the editor got
}

// newHarness starts a guard with opts (Store set to a fresh data folder
// unless opts has one) in front of a fake agent set up by setup.
func newHarness(t *testing.T, opts Options, setup func(a *fakeAgent)) *harness {
	t.Helper()
	editorInR, editorInW := io.Pipe()
	editorOutR, editorOutW := io.Pipe()
	agentInR, agentInW := io.Pipe()
	agentOutR, agentOutW := io.Pipe()

	h := &harness{t: t, editorIn: editorInW, waiting: map[string]chan string{}, raw: make(chan string, 100000),
		permission: func(json.RawMessage) string { return `{"outcome":{"outcome":"selected","optionId":"allow"}}` }}
	h.agent = newFakeAgent(agentInR, agentOutW)
	h.agent.onPrompt = func(a *fakeAgent, p *prompt) { a.answer(p, "end_turn") }
	if setup != nil {
		setup(h.agent)
	}
	go h.agent.serve()

	if opts.Store == nil {
		h.data = t.TempDir()
		st, err := store.Open(filepath.Join(h.data, store.GuardDir), store.Options{})
		require.NoError(t, err)
		opts.Store = st
	}
	h.store = opts.Store
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Cap == (loopdetect.Cap{}) {
		opts.Cap = loopdetect.DefaultCap()
	}
	if opts.CancelGrace == 0 {
		opts.CancelGrace = 5 * time.Second
	}
	h.eng = NewEngine(opts)
	h.p = proxy.New(editorInR, editorOutW, agentOutR, agentInW, h.eng, proxy.Options{Logger: opts.Logger})
	h.eng.Bind(h.p)
	ctx := context.Background()
	go func() {
		_ = h.p.Pump(ctx, proxy.Editor)
		_ = h.p.Flush(ctx, proxy.Agent)
		agentInW.Close()
	}()
	go func() {
		_ = h.p.Pump(ctx, proxy.Agent)
		editorOutW.Close()
	}()
	go h.read(editorOutR)
	t.Cleanup(func() {
		editorInW.Close()
		agentOutW.Close()
		h.eng.Close()
	})
	return h
}

// read dispatches what the editor receives.
func (h *harness) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadString('\n')
		if line = strings.TrimRight(line, "\n"); line != "" {
			h.raw <- line
			var m wire
			if json.Unmarshal([]byte(line), &m) == nil {
				switch {
				case m.Method == "":
					h.mu.Lock()
					ch := h.waiting[string(m.ID)]
					delete(h.waiting, string(m.ID))
					h.mu.Unlock()
					if ch != nil {
						ch <- line
					}
				default:
					h.mu.Lock()
					h.received = append(h.received, line)
					answer := h.permission
					h.mu.Unlock()
					if m.Method == "session/request_permission" && m.ID != nil {
						if res := answer(m.Params); res != "" {
							h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, res))
						} else {
							h.mu.Lock()
							h.held = append(h.held, m.ID)
							h.mu.Unlock()
						}
					}
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (h *harness) send(line string) {
	_, err := io.WriteString(h.editorIn, line+"\n")
	require.NoError(h.t, err)
}

// start sends a request and returns a channel for its answer line.
func (h *harness) start(method, params string) (string, chan string) {
	h.mu.Lock()
	h.nextID++
	id := fmt.Sprint(h.nextID)
	ch := make(chan string, 1)
	h.waiting[id] = ch
	h.mu.Unlock()
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params))
	return id, ch
}

// call sends a request and waits for its answer line.
func (h *harness) call(method, params string) string {
	h.t.Helper()
	_, ch := h.start(method, params)
	return h.await(ch)
}

func (h *harness) await(ch chan string) string {
	h.t.Helper()
	select {
	case l := <-ch:
		return l
	case <-time.After(20 * time.Second):
		h.t.Fatalf("no answer; the editor received:\n%s", strings.Join(h.got(), "\n"))
	}
	return ""
}

func (h *harness) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.received...)
}

// session runs initialize and session/new; it returns the session id.
func (h *harness) session() string {
	h.t.Helper()
	h.call("initialize", `{"protocolVersion":1,"clientCapabilities":{}}`)
	var r struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	require.NoError(h.t, json.Unmarshal([]byte(h.call("session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, h.t.TempDir()))), &r))
	require.NotEmpty(h.t, r.Result.SessionID)
	return r.Result.SessionID
}

// promptResult is a prompt's answer.
type promptResult struct {
	StopReason string
	Error      *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	}
	line string
}

// prompt sends a prompt and waits for its answer.
func (h *harness) prompt(sessionID, text string) promptResult {
	h.t.Helper()
	_, ch := h.start("session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}`, sessionID, text))
	return parsePromptResult(h.t, h.await(ch))
}

func parsePromptResult(t *testing.T, line string) promptResult {
	t.Helper()
	var r struct {
		Result *struct {
			StopReason string `json:"stopReason"`
		} `json:"result"`
		Error *struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &r), line)
	out := promptResult{Error: r.Error, line: line}
	if r.Result != nil {
		out.StopReason = r.Result.StopReason
	}
	return out
}

// loopData asserts the answer is acpd's loop error and returns its data.
func (r promptResult) loopData(t *testing.T) map[string]any {
	t.Helper()
	require.NotNil(t, r.Error, "want the loop error, got %s", r.line)
	require.Equal(t, -32603, r.Error.Code, r.line)
	require.Equal(t, loopdetect.LoopDetectedTurnErrorMessage, r.Error.Message)
	require.Equal(t, "LOOP_DETECTED", r.Error.Data["code"], r.line)
	return r.Error.Data
}
