package model

import (
	"context"
	"errors"
	"time"
)

// Retry describes a failed model request a provider is about to retry.
type Retry struct {
	Err error
	// Status is the HTTP status of the failure (0: a transport failure or
	// a cut stream).
	Status int
	// Attempt is the number of the attempt that failed (1 for the first).
	Attempt int
	// Attempts is how many attempts the request gets in all (the
	// configured retries and the first).
	Attempts int
	// Wait is how long the provider waits before the next attempt.
	Wait time.Duration
}

type retryWatchKey struct{}

// WithRetryWatch returns a context under which a provider's Stream calls fn
// before each retry wait, so the session can tell the user why its answer
// is late. fn must not block.
func WithRetryWatch(ctx context.Context, fn func(Retry)) context.Context {
	return context.WithValue(ctx, retryWatchKey{}, fn)
}

// WatchRetry reports r to the function WithRetryWatch put in ctx, if any.
// Every provider calls it before it waits to retry a request.
func WatchRetry(ctx context.Context, r Retry) {
	fn, _ := ctx.Value(retryWatchKey{}).(func(Retry))
	if fn == nil {
		return
	}
	if r.Status == 0 {
		var ae *APIError
		if errors.As(r.Err, &ae) {
			r.Status = ae.Status
		}
	}
	fn(r)
}
