package session

import (
	"log/slog"
	"strings"

	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/turnguard"
)

// The daemon's per-turn loop state lives in package turnguard, shared with
// `acpd guard`; this file adapts the session's view of a finished tool call
// to it.

// newGuard returns one turn's guard.
func newGuard(c loopdetect.Cap, skipLoop bool, mode loopdetect.FailureMode, logger *slog.Logger) *turnguard.Guard {
	return turnguard.New(c, skipLoop, mode, logger)
}

// failureVerdict feeds one finished batch to the repeated-tool-failure
// reducer (§7.6) and returns the text to add after the tool responses: the
// reminder on warn, the stop message on stop.
func failureVerdict(g *turnguard.Guard, obs []failureObservation) string {
	batch := make([]loopdetect.FailureObservation, 0, len(obs))
	for _, o := range obs {
		batch = append(batch, loopdetect.FailureObservation{
			ProviderDuplicate: o.providerDuplicate,
			Terminal:          loopdetect.TerminalStatus(o.terminal),
			Execution:         loopdetect.ExecutionStatus(o.execution),
			PolicyToolName:    o.tool,
			ErrorType:         failureErrorType(o.errType),
		})
	}
	_, text := g.FailureVerdict(batch)
	return text
}

// failureErrorType maps a tool's error type to the reducer's: acpd's tools
// spell qwen-code's ToolErrorType names in upper case (tools.ErrTypeUnknown
// is "UNKNOWN"), and an unclassified failure must disable enforcement
// (§7.6), not become a failure key of its own.
func failureErrorType(t string) string {
	if strings.EqualFold(t, loopdetect.ErrorTypeUnknown) {
		return loopdetect.ErrorTypeUnknown
	}
	return t
}
