package session

import (
	"log/slog"

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
