package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/acpd/acpd/session/credhttp"
	"github.com/acpd/acpd/session/model/sse"
)

// HTTPOptions are the transport settings every HTTP wire protocol shares:
// retries, backoff, the request timeout, extra headers.
type HTTPOptions struct {
	// Name is the provider as errors name it ("anthropic", "gemini", …);
	// "" reads "model".
	Name string
	// HTTPClient sends the requests (nil: a client without a global
	// timeout, ctx bounds it). Whichever it is, it follows redirects only
	// within the endpoint's origin (credhttp): the key and the conversation
	// never go to a host the configuration does not name.
	HTTPClient *http.Client
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
	// MaxResponseBytes bounds one answer's body (0: MaxResponseBytes).
	MaxResponseBytes int64
}

// Streamer posts a protocol's streaming requests and retries them: the
// part of a provider that does not depend on the wire format. One
// Streamer serves every request of a provider, concurrently.
type Streamer struct {
	opts   HTTPOptions
	client func() *http.Client
	logger *slog.Logger
	randMu sync.Mutex
}

// NewStreamer fills in the defaults of opts.
func NewStreamer(opts HTTPOptions) *Streamer {
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = time.Second
	}
	if opts.BackoffCap <= 0 {
		opts.BackoffCap = 30 * time.Second
	}
	if opts.BackoffCap < opts.BackoffBase {
		opts.BackoffCap = opts.BackoffBase
	}
	if opts.Name == "" {
		opts.Name = "model"
	}
	opts.MaxRetries = max(opts.MaxRetries, 0)
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = MaxResponseBytes
	}
	s := &Streamer{opts: opts, logger: opts.Logger}
	if opts.HTTPClient != nil {
		c := credhttp.Apply(opts.HTTPClient)
		s.client = func() *http.Client { return c }
	} else {
		// Built at the first request: every provider of the configuration
		// gets a Streamer before acpd answers initialize, and cloning the
		// default transport sets up its HTTP/2 support first, about 0.1 ms
		// of an editor's wait for a client that may never be used.
		s.client = sync.OnceValue(defaultClient)
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	return s
}

// defaultClient has the default transport's settings (proxy from the
// environment, HTTP/2, dial and TLS timeouts) with a write buffer that takes
// a request body, whose parts are mostly single messages, in 64 KiB writes
// rather than 4 KiB ones.
func defaultClient() *http.Client {
	t := credhttp.Transport()
	t.WriteBufferSize = 64 << 10
	return credhttp.NewClient(t, 0)
}

// Logger is the options' logger (never nil).
func (s *Streamer) Logger() *slog.Logger { return s.logger }

// Name is the provider name errors carry.
func (s *Streamer) Name() string { return s.opts.Name }

// Call is one streaming request.
type Call struct {
	URL    string
	Header http.Header // set after HTTPOptions.Header (Content-Type is always JSON)
	// Body returns a fresh reader over the request body for each attempt;
	// Size is its length.
	Body func() io.Reader
	Size int64
	// HTTPError turns a non-200 answer into the error; nil: NewHTTPError.
	HTTPError func(status int, header http.Header, body []byte) error
	// Read parses a 200 body, handing each event to emit as soon as it is
	// known; it stops when emit returns false. Read is given a fresh body
	// per attempt and must keep no state across calls. An error it returns
	// is retried unless it is an APIError that is not Retryable.
	Read func(body io.Reader, emit func(Event) bool) error
}

var errIdle = errors.New("no data from the model server")

// MaxResponseBytes bounds one streamed answer's body. A model's longest
// answer, with the framing of one small event per token, is a few tens of
// MiB; past this bound an endpoint is streaming without end, and what the
// protocol accumulates from it (text, arguments) would grow with it.
const MaxResponseBytes = 256 << 20

// ResponseTooLargeError is an answer past MaxResponseBytes.
type ResponseTooLargeError struct{ Limit int64 }

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("the model server's answer passed %s, the bound of one answer; it was dropped", sizeText(e.Limit))
}

func sizeText(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ErrStopped is what Stream's attempt reports when the consumer stopped
// iterating; it never reaches the consumer.
var ErrStopped = errors.New("iteration stopped")

// Emit hands evs to emit in order, for a Call's Read: it stops at the first
// one emit refuses and reports that as ErrStopped.
func Emit(emit func(Event) bool, evs ...Event) error {
	for _, ev := range evs {
		if !emit(ev) {
			return ErrStopped
		}
	}
	return nil
}

// Stream runs c, yielding its events. Failed attempts are retried per the
// options; an attempt that already yielded events is followed by
// EventRetry before the next one, so the consumer drops that attempt's
// partial text. The last yield carries the final error, if any.
func (s *Streamer) Stream(ctx context.Context, c Call, yield func(Event, error) bool) {
	for attempt := 0; ; attempt++ {
		emitted, err := s.attempt(ctx, c, yield)
		if err == nil || errors.Is(err, ErrStopped) {
			return
		}
		if ctx.Err() != nil {
			yield(Event{}, ctx.Err())
			return
		}
		if !retryable(err) || attempt >= s.opts.MaxRetries {
			yield(Event{}, finalError(err))
			return
		}
		if emitted && !yield(Event{Kind: EventRetry, RetryErr: err}, nil) {
			return
		}
		wait := s.backoff(attempt, retryAfter(err))
		s.logger.Warn("model request failed, retrying", "provider", s.opts.Name, "err", err, "attempt", attempt+1, "wait", wait)
		WatchRetry(ctx, Retry{Err: err, Attempt: attempt + 1, Attempts: s.opts.MaxRetries + 1, Wait: wait})
		if err := s.sleep(ctx, wait); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			yield(Event{}, err)
			return
		}
	}
}

// attempt runs one HTTP request and streams its events. emitted tells
// whether anything reached the consumer before a failure.
func (s *Streamer) attempt(ctx context.Context, c Call, yield func(Event, error) bool) (emitted bool, err error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var idle *time.Timer
	if s.opts.RequestTimeout > 0 {
		idle = time.AfterFunc(s.opts.RequestTimeout, func() { cancel(errIdle) })
		defer idle.Stop()
	}
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.URL, nil)
	if err != nil {
		return false, fmt.Errorf("%s request: %w", s.opts.Name, err)
	}
	hreq.Body, hreq.ContentLength = io.NopCloser(c.Body()), c.Size
	hreq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(c.Body()), nil }
	for k, vs := range s.opts.Header {
		for _, v := range vs {
			hreq.Header.Add(k, v)
		}
	}
	for k, vs := range c.Header {
		hreq.Header.Del(k)
		for _, v := range vs {
			hreq.Header.Add(k, v)
		}
	}
	hreq.Header.Set("Content-Type", "application/json")
	if hreq.Header.Get("Accept") == "" {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	resp, err := s.client().Do(hreq)
	if err != nil {
		return false, s.cause(actx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if rerr != nil && len(b) == 0 {
			return false, s.cause(actx, rerr)
		}
		if c.HTTPError != nil {
			return false, c.HTTPError(resp.StatusCode, resp.Header, b)
		}
		return false, NewHTTPError(resp.StatusCode, resp.Header, b, time.Now())
	}
	body := &tickReader{r: resp.Body, left: s.opts.MaxResponseBytes, limit: s.opts.MaxResponseBytes}
	if idle != nil {
		body.tick = func() { idle.Reset(s.opts.RequestTimeout) }
	}
	stopped := false
	err = c.Read(body, func(ev Event) bool {
		emitted = true
		if !yield(ev, nil) {
			stopped = true
			return false
		}
		return true
	})
	switch {
	case stopped:
		return emitted, ErrStopped
	case err != nil && tooLarge(err):
		return emitted, fmt.Errorf("%s: %w", s.opts.Name, err)
	case body.err != nil && err != nil:
		// The body failed under the parser: the cause is the read.
		return emitted, s.cause(actx, body.err)
	}
	return emitted, err
}

// tickReader resets the idle timer on every read, keeps the read error,
// which tells a cut stream from a malformed one, and ends the body past
// left bytes.
type tickReader struct {
	r    io.Reader
	tick func()
	err  error
	left int64
	// limit is the bound left started from, for the error.
	limit int64
}

func (t *tickReader) Read(p []byte) (int, error) {
	if t.left <= 0 {
		t.err = &ResponseTooLargeError{Limit: t.limit}
		return 0, t.err
	}
	if int64(len(p)) > t.left {
		p = p[:t.left]
	}
	n, err := t.r.Read(p)
	t.left -= int64(n)
	if t.tick != nil {
		t.tick()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		t.err = err
	}
	return n, err
}

// cause reports why a request or read failed: the caller's cancellation,
// the idle timeout, or the transport error.
func (s *Streamer) cause(actx context.Context, err error) error {
	if errors.Is(context.Cause(actx), errIdle) {
		return fmt.Errorf("%s request: %w for %s", s.opts.Name, errIdle, s.opts.RequestTimeout)
	}
	return fmt.Errorf("%s request: %w", s.opts.Name, err)
}

func retryable(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Retryable()
	}
	if credhttp.IsRedirect(err) || tooLarge(err) {
		// The endpoint answers every attempt the same.
		return false
	}
	// Transport failures, cut streams, idle timeouts, undecodable chunks.
	return true
}

// tooLarge reports an event or an answer past its bound.
func tooLarge(err error) bool {
	var ev *sse.TooLargeError
	var body *ResponseTooLargeError
	return errors.As(err, &ev) || errors.As(err, &body)
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
func (s *Streamer) backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	d := s.opts.BackoffCap
	if attempt < 30 {
		d = min(s.opts.BackoffBase<<attempt, s.opts.BackoffCap)
	}
	half := d / 2
	var j int64
	if s.opts.Rand != nil {
		s.randMu.Lock()
		j = s.opts.Rand.Int64N(int64(half) + 1)
		s.randMu.Unlock()
	} else {
		j = rand.Int64N(int64(half) + 1)
	}
	return d - half + time.Duration(j)
}

func (s *Streamer) sleep(ctx context.Context, d time.Duration) error {
	if s.opts.Sleep != nil {
		return s.opts.Sleep(ctx, d)
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
