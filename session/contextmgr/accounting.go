package contextmgr

import (
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/tokens"
)

// Accounting is a session's token count: the last request's
// provider-reported prompt_tokens plus estimates of the messages appended
// since, kept current incrementally: bringing it up to date costs only the
// messages appended since the last call, never a rescan of the history.
// The zero value is ready. Not safe for concurrent use (the turn owns it).
type Accounting struct {
	n   int // history[:n] is accounted
	sum int // estimate of history[:n]

	// prompt is the provider's prompt_tokens for the last request, which
	// carried messages estimated at atSum; 0 when there is no usable count
	// (none yet, or the history was rewritten since).
	prompt, atSum int
	// sentSum is the estimate of the request in flight.
	sentSum int
	// overhead is what a request costs besides its messages (system prompt,
	// tool schemas, the tokenizer's difference from the estimate): from the
	// last provider count, else SetOverhead's estimate.
	overhead     int
	overheadSeen bool
}

// Sync accounts the messages appended to history since the last call. A
// history shorter than what was accounted was rewritten without Reset, and
// is recounted.
func (a *Accounting) Sync(history []model.Message) {
	if len(history) < a.n {
		a.Reset()
	}
	for i := a.n; i < len(history); i++ {
		a.sum += tokens.Message(&history[i])
	}
	a.n = len(history)
}

// Reset forgets the accounted history (it was rewritten: compacted, or a
// refused turn removed): the next Sync recounts it, and the estimate stands
// until the provider reports a count again.
func (a *Accounting) Reset() {
	a.n, a.sum, a.prompt, a.atSum = 0, 0, 0, 0
}

// SetOverhead sets the estimated cost of a request besides its messages,
// used until a provider count calibrates it.
func (a *Accounting) SetOverhead(n int) {
	if !a.overheadSeen {
		a.overhead = max(n, 0)
	}
}

// Used is the size of the next request: the last provider count plus the
// estimate of what was appended since, or the estimate of the whole history
// plus the overhead when there is no count. Call Sync first.
func (a *Accounting) Used() int {
	if a.prompt > 0 {
		return max(a.prompt+a.sum-a.atSum, 0)
	}
	return a.sum + a.overhead
}

// UsedAtMost is Used with its estimated part padded by a quarter: a
// bound the provider's count is unlikely to pass, since tokenizers count
// code and JSON denser than the estimate's four bytes a token. Budgets are
// checked against it.
func (a *Accounting) UsedAtMost() int {
	if a.prompt > 0 {
		return max(a.prompt+(a.sum-a.atSum)*5/4, 0)
	}
	return (a.sum + a.overhead) * 5 / 4
}

// Estimated reports whether Used is an estimate only (no provider count
// since the history was last rewritten).
func (a *Accounting) Estimated() bool { return a.prompt == 0 }

// Sent marks the synced history as the request being sent.
func (a *Accounting) Sent() { a.sentSum = a.sum }

// Observe takes the provider's prompt_tokens for the request last Sent.
func (a *Accounting) Observe(promptTokens int) {
	if promptTokens <= 0 {
		return
	}
	a.prompt, a.atSum = promptTokens, a.sentSum
	a.overhead, a.overheadSeen = max(promptTokens-a.sentSum, 0), true
}

// Messages is the estimate of the accounted messages alone.
func (a *Accounting) Messages() int { return a.sum }

// Overhead is the current estimate of a request's cost besides messages.
func (a *Accounting) Overhead() int { return a.overhead }
