// Package headless runs one prompt turn without an editor — `acpd run` —
// and reports it as text, one JSON object or a JSON line per update. The
// agent is driven over ACP through package acp/client, exactly as an
// editor drives it; the exit status says how the turn ended.
package headless

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/client"
	"github.com/acpd/acpd/session"
)

// Exit statuses of `acpd run`.
const (
	ExitOK         = 0
	ExitError      = 1 // model or internal error
	ExitUsage      = 2 // usage or configuration error
	ExitLoop       = 3 // loop protection stopped the turn
	ExitIncomplete = 4 // the model stopped early: max_tokens, refusal, max_turn_requests
	ExitTurnBudget = 5 // the turn reached model.maxTokensPerTurn
	ExitTokenLimit = 6 // the request passed model.sessionTokenLimit
	// ExitRefused: the turn ended, but something it needed a person's yes
	// for was refused (an edit or command in approval mode default, a
	// fetch of a private address, replacing files a rewind found changed):
	// the work the prompt asked for was not all done.
	ExitRefused     = 7
	ExitInterrupted = 130 // SIGINT (128+2); SIGTERM gives 143
)

// Output formats.
const (
	FormatText       = "text"
	FormatJSON       = "json"
	FormatStreamJSON = "stream-json"
)

// CancelGrace bounds the wait for the `cancelled` answer after a signal. The
// agent answers at once in practice; the bound only keeps a wedged tool from
// making Ctrl-C useless.
const CancelGrace = 10 * time.Second

// Options are the resolved inputs of one run.
type Options struct {
	Prompt string
	// PromptBlocks, when set, is the prompt as content blocks (the first
	// line of stream-json input); Prompt is then its text.
	PromptBlocks []acp.ContentBlock
	// Input, when set, is stream-json input whose lines steer the turn
	// (steering.go).
	Input     *Input
	Cwd       string
	SessionID string // continue this stored session; "" starts a new one
	Format    string
	Mode      string // approval mode, for the refusal message
	// ClientVersion is clientInfo.version in initialize.
	ClientVersion string
	// Answers answer the model's questions (--answer), in order.
	Answers []string
	// Continue is the command that continues the session, with %s for
	// its id: text output ends with it ("acpd run --session %s").
	Continue string
	// Rewind is the turn a rewind-only run undoes (--rewind N), 0 for none.
	Rewind int
	// MCPServers are given to the session (--mcp-config).
	MCPServers []acp.MCPServer
}

// Agent is the agent a run drives: session.Manager, or a fake in tests.
type Agent interface {
	acp.Agent
	Close()
}

// Env is the process around a run.
type Env struct {
	Stdout, Stderr io.Writer
	Logger         *slog.Logger
	Trace          bool // log every JSON-RPC message of the agent's side
	// Signals delivers SIGINT and SIGTERM; nil never does.
	Signals <-chan os.Signal
	// Live says stderr is a terminal: progress (waiting for the model,
	// retries, compaction) is shown there as it happens.
	Live bool
}

// Run starts the agent in process, drives one turn and reports it. It
// returns the exit status.
func Run(ctx context.Context, env Env, o Options, newAgent func(acp.Client) Agent) int {
	logger := env.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	agentEnd, clientEnd := client.Pipe()
	agentConn := acp.NewConn(agentEnd, agentEnd, acp.Options{Logger: logger, Trace: env.Trace})
	agent := newAgent(agentConn)
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- agentConn.Serve(serveCtx, agent) }()

	out := NewOutput(env.Stdout, env.Stderr, o.Format, o.Mode)
	out.answers.left = append([]string(nil), o.Answers...)
	out.live, out.continueCmd, out.rewind = env.Live, o.Continue, o.Rewind
	stopWatch := out.watchSilence()
	defer stopWatch()
	conn := client.NewConn(ctx, clientEnd, out, logger)

	turnCtx, cancelTurn := context.WithCancel(ctx)
	defer cancelTurn()
	c := &runClient{conn: conn, out: out, opts: o}
	if o.Input != nil {
		c.steer = newSteerInput(o.Input, out, c)
		c.steer.start(context.WithoutCancel(ctx))
	}
	done := make(chan Outcome, 1)
	go func() { done <- c.run(turnCtx) }()

	var (
		res     Outcome
		signo   int
		expired <-chan time.Time
	)
wait:
	for {
		select {
		case res = <-done:
			break wait
		case sig := <-env.Signals:
			if signo != 0 {
				fmt.Fprintf(env.Stderr, "acpd run: %v again, exiting without waiting\n", sig)
				cancelTurn()
				break wait
			}
			signo = 2
			if sig == syscall.SIGTERM {
				signo = 15
			}
			fmt.Fprintf(env.Stderr, "acpd run: %v: cancelling the turn\n", sig)
			c.stopSteering() // a line sent now would find the turn ending
			if !c.cancel(ctx) {
				// No prompt is running yet: abandon the handshake.
				cancelTurn()
			}
			t := time.NewTimer(CancelGrace)
			defer t.Stop()
			expired = t.C
		case <-expired:
			fmt.Fprintf(env.Stderr, "acpd run: the turn did not answer the cancellation within %v\n", CancelGrace)
			cancelTurn()
			break wait
		}
	}

	// The turn has ended: steering lines still queued are not sent, and
	// the answer to the one in flight is awaited (a steer's answer comes
	// at once; the bound only keeps a wedged agent from holding the run).
	sending := c.stopSteering()
	grace := time.NewTimer(2 * time.Second)
	select {
	case <-sending:
	case <-grace.C:
	}
	grace.Stop()

	// Closing our end makes the agent's Serve see EOF; it then cancels
	// whatever still runs (only after a second signal) and returns.
	_ = conn.Close()
	_ = clientEnd.Close()
	shutdown := time.NewTimer(2 * time.Second)
	select {
	case err := <-served:
		if err != nil {
			logger.Debug("agent connection ended", "err", err)
		}
	case <-shutdown.C:
		stopServe()
		<-served
	}
	shutdown.Stop()
	stopServe()
	agent.Close()
	_ = agentEnd.Close()

	<-sending // the closed connection has answered it by now
	if c.steer != nil {
		out.steerUnsent(c.steer.unsent())
	}

	stopWatch()
	code := res.ExitCode()
	if code == ExitOK && out.refusedCount() > 0 {
		code = ExitRefused
	}
	if signo != 0 {
		if res.Resp == nil && res.RPCErr == nil {
			// Interrupted before the prompt answered (or before it was sent).
			res = Outcome{SessionID: c.getSessionID(), Resp: &acp.PromptResponse{StopReason: acp.StopCancelled}}
		}
		code = 128 + signo
	}
	conn.StopReplies()
	if err := out.Finish(res); err != nil {
		fmt.Fprintf(env.Stderr, "acpd run: write output: %v\n", err)
		if code == ExitOK {
			code = ExitError
		}
	}
	return code
}

// Outcome is how the prompt ended: a response, an error from the agent, or
// a failure before or around the prompt.
type Outcome struct {
	SessionID string
	Resp      *acp.PromptResponse
	RPCErr    *jsonrpc2.Error
	// Status, when non-zero, overrides the exit status derived from the
	// other fields (usage errors before the prompt).
	Status int
	Err    error  // a local failure without an agent error
	During string // what failed, for the stderr line, e.g. "--session ID"
}

// ExitCode is the exit status the outcome calls for.
func (t Outcome) ExitCode() int {
	switch {
	case t.Status != 0:
		return t.Status
	case t.RPCErr != nil:
		if client.LoopDetected(t.RPCErr) {
			return ExitLoop
		}
		if client.ErrorKind(t.RPCErr) == session.ErrorKindModelNotConfigured {
			return ExitUsage // a configuration error: no model to run
		}
		return ExitError
	case t.Err != nil || t.Resp == nil:
		return ExitError
	}
	switch t.Resp.StopReason {
	case acp.StopEndTurn:
		return ExitOK
	case acp.StopMaxTokens, acp.StopRefusal, acp.StopMaxTurnRequests:
		switch _, budget := session.TurnMeta(t.Resp.Meta); budget {
		case session.BudgetTurnTokens:
			return ExitTurnBudget
		case session.BudgetSessionLimit:
			return ExitTokenLimit
		}
		return ExitIncomplete
	case acp.StopCancelled:
		return ExitInterrupted
	}
	return ExitError
}

// runClient drives the turn over the editor side of the connection.
type runClient struct {
	conn *client.Conn
	out  *Output
	opts Options

	// mu guards sessionID, which the signal path reads.
	mu        sync.Mutex
	sessionID string

	// sendMu orders the prompt request before any cancel of it: it is held
	// while the request is written and prompting set, and while a cancel
	// reads prompting and writes its notifications.
	sendMu    sync.Mutex
	prompting bool

	// steer sends stream-json input's lines to the turn; nil without.
	steer *steerInput
}

// stopSteering stops sending steering lines; the channel is closed once
// the line in flight, if any, has its answer.
func (c *runClient) stopSteering() <-chan struct{} {
	if c.steer == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return c.steer.stop()
}

// mcpServers are the run's MCP servers (never null on the wire).
func (c *runClient) mcpServers() []acp.MCPServer {
	if c.opts.MCPServers == nil {
		return []acp.MCPServer{}
	}
	return c.opts.MCPServers
}

func (c *runClient) getSessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// promptRequestID is the JSON-RPC id of the one session/prompt request,
// chosen so $/cancel_request can name it.
var promptRequestID = jsonrpc2.ID{Str: "acpd-run-prompt", IsString: true}

// cancel cancels the running prompt (session/cancel and $/cancel_request);
// either way the prompt answers `cancelled`. It reports false when no
// prompt has been sent yet.
func (c *runClient) cancel(ctx context.Context) bool {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if !c.prompting {
		return false
	}
	return c.conn.Cancel(ctx, c.getSessionID(), promptRequestID) == nil
}

// run is initialize → session/new or session/load → session/prompt. It runs
// on its own goroutine: the connection's handler, which answers the agent's
// requests, runs on the read loop and must stay free.
func (c *runClient) run(ctx context.Context) Outcome {
	init, err := c.conn.Initialize(ctx, &acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersion,
		ClientInfo:      &acp.Implementation{Name: "acpd-run", Version: c.opts.ClientVersion},
		// The model may ask questions: they are answered from --answer,
		// or fail saying so (Output.Elicit). Notices (retries, budgets,
		// problems) are shown as they happen. Compaction is not asked for
		// as compaction_update: its tool call frame is what acpd run has
		// always shown (a line on stderr, a tool call in json).
		ClientCapabilities: acp.ClientCapabilities{
			Elicitation: &acp.ElicitationCapabilities{Form: &acp.Capability{}},
			Session:     &acp.ClientSessionCapabilities{Notices: &acp.Capability{}},
		},
	})
	if err != nil {
		return failed("", "initialize", err)
	}
	if init.ProtocolVersion != acp.ProtocolVersion {
		return Outcome{Err: fmt.Errorf("initialize: agent speaks protocol version %d, want %d", init.ProtocolVersion, acp.ProtocolVersion)}
	}

	id := c.opts.SessionID
	if id != "" {
		if !init.AgentCapabilities.LoadSession {
			return Outcome{Status: ExitUsage, Err: fmt.Errorf("--session %s: this build cannot continue sessions (the agent does not advertise loadSession)", id)}
		}
		_, err := c.conn.LoadSession(ctx, &acp.LoadSessionRequest{
			SessionID: id, Cwd: c.opts.Cwd, MCPServers: c.mcpServers(),
		})
		if err != nil {
			o := failed(id, "session/load", err)
			o.During = "--session " + id
			var re *jsonrpc2.Error
			if errors.As(err, &re) && (re.Code == acp.CodeInvalidParams || re.Code == acp.CodeResourceNotFound) {
				o.Status = ExitUsage // an unknown or unusable session id
			}
			return o
		}
	} else {
		created, err := c.conn.NewSession(ctx, &acp.NewSessionRequest{
			Cwd: c.opts.Cwd, MCPServers: c.mcpServers(),
		})
		if err != nil {
			return failed("", "session/new", err)
		}
		id = created.SessionID
	}

	c.mu.Lock()
	c.sessionID = id
	c.mu.Unlock()
	// Updates before this point replay a loaded session's history; only the
	// new turn is reported.
	c.out.startTurn(id)

	c.sendMu.Lock()
	prompt := c.opts.PromptBlocks
	if prompt == nil {
		prompt = []acp.ContentBlock{acp.TextBlock(c.opts.Prompt)}
	}
	p, err := c.conn.StartPrompt(ctx, &acp.PromptRequest{SessionID: id, Prompt: prompt}, promptRequestID)
	c.prompting = err == nil
	c.sendMu.Unlock()
	if err != nil {
		return failed(id, "session/prompt", err)
	}
	resp, err := p.Wait(ctx)
	if err != nil {
		return failed(id, "session/prompt", err)
	}
	return Outcome{SessionID: id, Resp: resp}
}

// failed wraps a failed call: the agent's error as is, anything else (a
// closed connection, a cancelled context) as a local error.
func failed(sessionID, method string, err error) Outcome {
	var re *jsonrpc2.Error
	if errors.As(err, &re) {
		return Outcome{SessionID: sessionID, RPCErr: re}
	}
	return Outcome{SessionID: sessionID, Err: fmt.Errorf("%s: %w", method, err)}
}
