package session

import (
	"context"
	"strings"
	"sync"
	"unique"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/instructions"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/workspace"
)

// Project awareness: the system prompt's environment block and instruction
// files are gathered in the background from the moment the session is
// created (session/new, load or resume) and never delay its answer; the
// first model request (or /context) waits for them, at most
// instructions.GatherTimeout for the git commands. They are gathered once:
// the system prompt stays byte-identical for the whole session, so the
// provider's prompt cache keeps matching it.
//
// Sessions share what is equal instead of holding a copy each. Decision:
// each session still gathers its own facts when it starts, and keeps them
// for its life — a snapshot that changed for newer sessions never changes
// an older session's system prompt, which would throw its prompt cache
// away —, but an environment block, instruction files or system prompt
// equal to one another session holds is swapped for that one: the texts by
// content (package unique), the instruction files per workspace (the Hub).
// A workspace whose files did not change is held once, however many
// sessions are open in it; one that changed is held once per version still
// in use.

// prep is the session's background gathering.
type prep struct {
	once   sync.Once
	ctx    context.Context // the session's life: cancelled by free
	done   chan struct{}
	cancel context.CancelFunc
	// noEnv and load are the options, taken when the session is made.
	noEnv bool
	load  *instructions.Options
	env   unique.Handle[string] // the environment block; "" when turned off
	instr *instructions.Loaded  // the instruction files; nil when turned off
	// system is the whole system prompt, built once by the first turn
	// that needs it (the turn holder); built says it was.
	system unique.Handle[string]
	built  bool
	// gatherCancel ends a gathering under way; stopPrep calls it with
	// cancel. The gathering runs on a context of its own rather than a
	// child of ctx: a child leaves ctx a map of children and a Done channel
	// for the rest of the session's life, a third of a kilobyte for each
	// idle session.
	gatherMu     sync.Mutex
	gatherCancel context.CancelFunc
}

// newPrep makes the session's gathering, not started yet.
func (s *Session) newPrep() {
	ctx, cancel := context.WithCancel(context.Background())
	o := s.m.opts
	s.prep = &prep{done: make(chan struct{}), cancel: cancel, ctx: ctx, noEnv: o.NoEnvironment}
	if !o.NoInstructions {
		s.prep.load = &instructions.Options{
			Roots:     s.roots,
			FileNames: o.ContextFileNames,
			GlobalDir: o.ConfigDir,
			Budget:    instructions.BudgetFor(s.window()),
		}
	}
}

// startPrepAfterReply starts the gathering once the answer to the request
// of ctx (session/new, load, resume) is on the wire: forking git while the
// answer is being made would slow it on a busy machine.
func (s *Session) startPrepAfterReply(ctx context.Context) {
	if !acp.AfterReply(ctx, s.startPrep) {
		s.startPrep()
	}
}

// startPrep starts gathering the environment and the instruction files;
// later calls do nothing.
func (s *Session) startPrep() {
	p := s.prep
	p.once.Do(func() { go s.gather(p) })
}

func (s *Session) gather(p *prep) {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	p.gatherMu.Lock()
	if p.ctx.Err() != nil {
		cancel() // freed before the gathering started
	}
	p.gatherCancel = cancel
	p.gatherMu.Unlock()
	defer func() {
		p.gatherMu.Lock()
		p.gatherCancel = nil
		p.gatherMu.Unlock()
		cancel()
	}()
	envDone := make(chan string, 1)
	if p.noEnv {
		envDone <- ""
	} else {
		go func() { envDone <- instructions.Gather(ctx, s.roots, 0, s.m.opts.Sandbox).Text() }()
	}
	p.instr = &instructions.Loaded{}
	if p.load != nil {
		l := instructions.Load(ctx, *p.load)
		p.instr = &l
		if ctx.Err() == nil { // a load cut short by free is nobody's to share
			p.instr = s.m.hub.Instructions(workspace.InstructionsKey(*p.load), p.instr)
		}
	}
	p.env = unique.Make(<-envDone)
	for _, f := range p.instr.Files {
		s.log.Info("instruction file loaded", "path", f.Path, "imports", len(f.Imports), "truncated", f.Truncated)
	}
	for _, w := range p.instr.Warnings {
		s.notify(p.ctx, notice.InstructionFile, w)
	}
}

// waitPrep waits for the gathering (starting it if it has not started);
// false when ctx ended first.
func (s *Session) waitPrep(ctx context.Context) bool {
	s.startPrep()
	select {
	case <-s.prep.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// stopPrep cancels the gathering (its git commands are killed).
func (s *Session) stopPrep() {
	p := s.prep
	p.cancel()
	p.gatherMu.Lock()
	if p.gatherCancel != nil {
		p.gatherCancel()
	}
	p.gatherMu.Unlock()
}

// promptParts are a system prompt's parts around custom (the configured
// prompt, or a subagent's own): the session's instruction files and
// environment block. Callers have waited for prep.
func (s *Session) promptParts(custom string) instructions.Parts {
	p := s.prep
	parts := instructions.Parts{Custom: custom, Instructions: p.instr.Text(), Environment: p.env.Value()}
	if parts.Environment == "" {
		// The model needs the roots for its absolute paths either way.
		parts.Environment = "Workspace roots (absolute): " + strings.Join(s.roots, ", ")
	}
	return parts
}

// systemPrompt is the system message of every request of the session: the
// built-in prompt (or model.systemPrompt), the instruction files, the
// environment block. Callers hold the turn and have waited for prep.
func (s *Session) systemPrompt() string {
	p := s.prep
	if p.built {
		return p.system.Value()
	}
	// Callers have waited already; this only guards against caching a
	// prompt built before the gathering finished.
	s.startPrep()
	<-p.done
	parts := s.promptParts(s.m.opts.SystemPrompt)
	for _, t := range s.tools.Tools() {
		parts.Tools = append(parts.Tools, t.Name())
	}
	p.system, p.built = unique.Make(instructions.SystemPrompt(parts)), true
	return p.system.Value()
}
