package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// OpenAIOptions configures an OpenAI-compatible provider.
type OpenAIOptions struct {
	BaseURL    string       // e.g. https://dashscope.aliyuncs.com/compatible-mode/v1
	APIKey     string       // sent as a Bearer token when non-empty
	HTTPClient *http.Client // nil: a client without a global timeout (ctx bounds it)
	// MaxRetries is how many times a failed attempt is retried (0: never).
	MaxRetries int
	// RequestTimeout bounds the wait for response headers and for each
	// read of the stream (an idle timeout, so long answers are fine). 0: none.
	RequestTimeout time.Duration
	Logger         *slog.Logger // nil: discard
	// BackoffBase and BackoffCap shape the exponential backoff between
	// retries (defaults 1s and 30s); a server's Retry-After overrides it.
	BackoffBase time.Duration
	BackoffCap  time.Duration
	// Rand supplies backoff jitter; nil uses the global source.
	Rand *rand.Rand
	// Sleep waits between retries; nil waits on a timer. Tests inject one
	// to observe the delays without spending them.
	Sleep func(ctx context.Context, d time.Duration) error
	// Header holds extra request headers.
	Header http.Header
	// CacheControl is model.cacheControl: "on", "off" or "auto" (""):
	// whether requests carry cache_control markers (CacheMarkers). Marked
	// requests to DashScope also send X-DashScope-CacheControl: enable, as
	// qwen-code does.
	CacheControl string
}

// OpenAI streams chat completions from an OpenAI-compatible server
// (OpenAI, DashScope, DeepSeek, vLLM, Ollama, llama.cpp, OpenRouter).
//
// It uses a hand-written SSE reader and Assembler rather than openai-go:
// openai-go's accumulator concatenates repeated names, indexes calls
// densely from 0, adds up usage, drops a pending event at EOF and loses
// llama.cpp's `error:` field, which are exactly the quirks to survive.
type OpenAI struct {
	opts   OpenAIOptions
	url    string
	client *http.Client
	logger *slog.Logger
	randMu sync.Mutex
}

// NewOpenAI returns a provider for opts; it never fails, and a missing
// BaseURL is reported by Stream.
func NewOpenAI(opts OpenAIOptions) *OpenAI {
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = time.Second
	}
	if opts.BackoffCap <= 0 {
		opts.BackoffCap = 30 * time.Second
	}
	if opts.BackoffCap < opts.BackoffBase {
		opts.BackoffCap = opts.BackoffBase
	}
	opts.MaxRetries = max(opts.MaxRetries, 0)
	o := &OpenAI{opts: opts, client: opts.HTTPClient, logger: opts.Logger}
	if o.client == nil {
		// The default transport's settings (proxy from the environment,
		// HTTP/2, dial and TLS timeouts) with a write buffer that takes a
		// request body, whose parts are mostly single messages, in 64 KiB
		// writes rather than 4 KiB ones.
		o.client = &http.Client{}
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			t := dt.Clone()
			t.WriteBufferSize = 64 << 10
			o.client.Transport = t
		}
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if opts.BaseURL != "" {
		o.url = strings.TrimRight(opts.BaseURL, "/") + "/chat/completions"
	}
	return o
}

var errIdle = errors.New("no data from the model server")

// errStopped means the consumer stopped iterating.
var errStopped = errors.New("iteration stopped")

// Stream implements Provider. Failed attempts are retried per the options;
// an attempt that already yielded events is followed by EventRetry before
// the next one, so the consumer drops that attempt's partial text.
func (o *OpenAI) Stream(ctx context.Context, req Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if o.url == "" {
			yield(Event{}, errors.New("model provider: baseUrl is required"))
			return
		}
		markers := CacheMarkers(o.opts.CacheControl, o.opts.BaseURL, req.Model)
		body, err := buildRequest(req, markers)
		if err != nil {
			yield(Event{}, fmt.Errorf("build model request: %w", err))
			return
		}
		for attempt := 0; ; attempt++ {
			emitted, err := o.attempt(ctx, body, yield)
			if err == nil || errors.Is(err, errStopped) {
				return
			}
			if ctx.Err() != nil {
				yield(Event{}, ctx.Err())
				return
			}
			if !retryable(err) || attempt >= o.opts.MaxRetries {
				yield(Event{}, finalError(err))
				return
			}
			if emitted && !yield(Event{Kind: EventRetry, RetryErr: err}, nil) {
				return
			}
			wait := o.backoff(attempt, retryAfter(err))
			o.logger.Warn("model request failed, retrying", "err", err, "attempt", attempt+1, "wait", wait)
			if err := o.sleep(ctx, wait); err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(Event{}, err)
				return
			}
		}
	}
}

// attempt runs one HTTP request and streams its events. emitted tells
// whether anything reached the consumer before a failure.
func (o *OpenAI) attempt(ctx context.Context, body requestBody, yield func(Event, error) bool) (emitted bool, err error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var idle *time.Timer
	if o.opts.RequestTimeout > 0 {
		idle = time.AfterFunc(o.opts.RequestTimeout, func() { cancel(errIdle) })
		defer idle.Stop()
	}
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, o.url, nil)
	if err != nil {
		return false, fmt.Errorf("model request: %w", err)
	}
	hreq.Body, hreq.ContentLength = io.NopCloser(body.reader()), body.size
	hreq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body.reader()), nil }
	for k, vs := range o.opts.Header {
		for _, v := range vs {
			hreq.Header.Add(k, v)
		}
	}
	if body.markers && isDashScope(o.opts.BaseURL) {
		hreq.Header.Set("X-DashScope-CacheControl", "enable")
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if o.opts.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+o.opts.APIKey)
	}
	resp, err := o.client.Do(hreq)
	if err != nil {
		return false, o.cause(actx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if rerr != nil && len(b) == 0 {
			return false, o.cause(actx, rerr)
		}
		return false, newHTTPError(resp.StatusCode, resp.Header, b, time.Now())
	}

	err = streamSSE(resp.Body, NewAssembler(o.logger), func() {
		if idle != nil {
			idle.Reset(o.opts.RequestTimeout)
		}
	}, func(ev Event) bool {
		emitted = true
		return yield(ev, nil)
	})
	var re *readError
	if errors.As(err, &re) {
		return emitted, o.cause(actx, re.err)
	}
	return emitted, err
}

// readError marks a failure reading the body (as opposed to one reported
// by the stream's content).
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// streamSSE reads one SSE body through a, handing each event to emit as
// soon as it is known. tick runs after every read (for the idle timer).
// It returns errStopped when emit returns false.
func streamSSE(body io.Reader, a *Assembler, tick func(), emit func(Event) bool) error {
	sse := newSSEReader(body)
	defer sse.release()
	send := func(evs []Event) error {
		for _, ev := range evs {
			if !emit(ev) {
				return errStopped
			}
		}
		return nil
	}
read:
	for {
		kind, data, err := sse.next()
		tick()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return &readError{err}
		}
		switch kind {
		case sseDone:
			break read
		case sseError:
			return a.FeedError(data)
		case sseData:
			evs, err := a.Feed(data)
			if err != nil {
				return err
			}
			if err := send(evs); err != nil {
				return err
			}
		}
	}
	evs, err := a.Finish()
	if err != nil {
		return err
	}
	return send(evs)
}

// cause reports why a request or read failed: the caller's cancellation,
// the idle timeout, or the transport error.
func (o *OpenAI) cause(actx context.Context, err error) error {
	if errors.Is(context.Cause(actx), errIdle) {
		return fmt.Errorf("model request: %w for %s", errIdle, o.opts.RequestTimeout)
	}
	return fmt.Errorf("model request: %w", err)
}

func retryable(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Retryable()
	}
	// Transport failures, cut streams, idle timeouts, undecodable chunks.
	return true
}

func retryAfter(err error) time.Duration {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.RetryAfter
	}
	return 0
}

// finalError is what the consumer sees once retries are spent.
func finalError(err error) error {
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests {
		c := *ae
		c.Message = RateLimitMessage
		return &c
	}
	return err
}

// backoff is capped exponential with equal jitter: half the step is fixed,
// half random, so sessions that failed together do not retry together.
func (o *OpenAI) backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	d := o.opts.BackoffCap
	if attempt < 30 {
		d = min(o.opts.BackoffBase<<attempt, o.opts.BackoffCap)
	}
	half := d / 2
	var j int64
	if o.opts.Rand != nil {
		o.randMu.Lock()
		j = o.opts.Rand.Int64N(int64(half) + 1)
		o.randMu.Unlock()
	} else {
		j = rand.Int64N(int64(half) + 1)
	}
	return d - half + time.Duration(j)
}

func (o *OpenAI) sleep(ctx context.Context, d time.Duration) error {
	if o.opts.Sleep != nil {
		return o.opts.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
