package acp

import (
	"context"
	"fmt"
)

// MethodSessionSteering is the steering extension that claude-agent-acp and
// codex-acp share (not part of the ACP specification): the client adds a
// message to the turn that is running, without cancelling it. An agent
// advertises it with `_meta.steering.supported: true` at the top level of
// its initialize answer, beside agentCapabilities.
const MethodSessionSteering = "_session/steering"

// Steering outcomes, the extension's result values.
const (
	// SteerInjected: a turn was running and took the message; it reaches
	// the model at the turn's next safe point.
	SteerInjected = "injected"
	// SteerStartedNewTurn: no turn was running, and the message started
	// one of its own (no session/prompt owns it).
	SteerStartedNewTurn = "startedNewTurn"
	// SteerPromptRequired: no turn was running and the request asked not
	// to start one (idleBehavior "promptRequired"); the message was not
	// used, the client sends it as a session/prompt.
	SteerPromptRequired = "promptRequired"
)

// SteerIdlePromptRequired is the one idleBehavior a steering request may
// name in `_meta.steering.idleBehavior`.
const SteerIdlePromptRequired = "promptRequired"

// SteerReasonNoRunningTurn is the reason of a promptRequired outcome.
const SteerReasonNoRunningTurn = "noRunningTurn"

// SteeringRequest is the params of _session/steering.
type SteeringRequest struct {
	SessionID string         `json:"sessionId"`
	Prompt    []ContentBlock `json:"prompt"`
	Meta      Meta           `json:"_meta,omitempty"`
}

// PromptRequired reports whether the request asked for promptRequired
// instead of a turn of its own when no turn runs.
func (r *SteeringRequest) PromptRequired() bool {
	st, _ := r.Meta["steering"].(map[string]any)
	return st["idleBehavior"] == SteerIdlePromptRequired
}

// Validate checks the session id, a non-empty prompt of valid blocks and
// the idle behaviour (-32602 naming the field, as claude-agent-acp does).
func (r *SteeringRequest) Validate() error {
	if err := needID("sessionId", r.SessionID); err != nil {
		return err
	}
	if len(r.Prompt) == 0 {
		return ErrInvalidParams("prompt", "prompt must be a non-empty array of content blocks")
	}
	for i, b := range r.Prompt {
		if err := b.validate(fmt.Sprintf("prompt[%d]", i)); err != nil {
			return err
		}
	}
	if raw, ok := r.Meta["steering"]; ok && raw != nil {
		st, ok := raw.(map[string]any)
		if !ok {
			return ErrInvalidParams("_meta.steering", "_meta.steering must be an object")
		}
		if b, ok := st["idleBehavior"]; ok && b != nil && b != SteerIdlePromptRequired {
			return ErrInvalidParams("_meta.steering.idleBehavior", fmt.Sprintf("unknown idleBehavior %v (the one value is %q)", b, SteerIdlePromptRequired))
		}
	}
	return nil
}

// SteeringResponse is the result of _session/steering: Outcome one of the
// Steer… values; Reason is set with promptRequired.
type SteeringResponse struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	Meta    Meta   `json:"_meta,omitempty"`
}

// Steerer is implemented by agents that serve _session/steering; without
// it the method is answered -32601.
type Steerer interface {
	Steer(ctx context.Context, req *SteeringRequest) (*SteeringResponse, error)
}

// SteeringAdvertisement is the initialize answer's top-level `_meta` entry
// that advertises _session/steering.
func SteeringAdvertisement() map[string]any { return map[string]any{"supported": true} }
