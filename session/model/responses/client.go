package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/session/model"
)

// Options configures a Responses provider.
type Options struct {
	BaseURL    string // e.g. https://api.openai.com/v1; requests go to {BaseURL}/responses
	APIKey     string // sent as a Bearer token when non-empty
	HTTPClient *http.Client
	// MaxRetries is how many times a failed attempt is retried (0: never).
	MaxRetries int
	// RequestTimeout bounds the wait for response headers and for each
	// read of the stream (an idle timeout). 0: none.
	RequestTimeout time.Duration
	Logger         *slog.Logger
	// BackoffBase and BackoffCap shape the backoff between retries
	// (defaults 1s and 30s); a server's Retry-After overrides it.
	BackoffBase, BackoffCap time.Duration
	// Sleep waits between retries; nil waits on a timer.
	Sleep  func(ctx context.Context, d time.Duration) error
	Header http.Header
	// ReasoningEffort is reasoning.effort ("minimal", "low", "medium",
	// "high"); "" sends no reasoning parameter, which models without
	// reasoning require. ReasoningSummary is reasoning.summary (default
	// "auto" when an effort is set).
	ReasoningEffort  string
	ReasoningSummary string
}

// Client streams from the OpenAI Responses API, statelessly: the whole
// conversation is sent each time with store false, and the reasoning items
// of a response (with their encrypted_content) go back with the calls they
// led to.
type Client struct {
	opts   Options
	url    string
	client *http.Client
	logger *slog.Logger

	mu sync.Mutex
	// reasoning keeps each response's reasoning items by the call_id of
	// its first function call, until the conversation sends them back.
	reasoning map[string][]json.RawMessage
}

// New returns a provider for opts; a missing BaseURL is reported by Stream.
func New(opts Options) *Client {
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = time.Second
	}
	if opts.BackoffCap <= 0 {
		opts.BackoffCap = 30 * time.Second
	}
	opts.BackoffCap = max(opts.BackoffCap, opts.BackoffBase)
	opts.MaxRetries = max(opts.MaxRetries, 0)
	if opts.ReasoningEffort != "" && opts.ReasoningSummary == "" {
		opts.ReasoningSummary = "auto"
	}
	c := &Client{opts: opts, client: opts.HTTPClient, logger: opts.Logger, reasoning: map[string][]json.RawMessage{}}
	if c.client == nil {
		c.client = &http.Client{}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if opts.BaseURL != "" {
		c.url = strings.TrimRight(opts.BaseURL, "/") + "/responses"
	}
	return c
}

var (
	errIdle    = errors.New("no data from the model server")
	errStopped = errors.New("iteration stopped")
)

// Stream implements model.Provider.
func (c *Client) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		if c.url == "" {
			yield(model.Event{}, errors.New("model provider: baseUrl is required"))
			return
		}
		body, err := buildRequest(req, buildInput{
			reasoning: c.reasoningFor,
			cacheKey:  cacheKey(req),
			effort:    c.opts.ReasoningEffort,
			summary:   c.opts.ReasoningSummary,
		})
		if err != nil {
			yield(model.Event{}, fmt.Errorf("build %s request: %w", Provider, err))
			return
		}
		for attempt := 0; ; attempt++ {
			emitted, err := c.attempt(ctx, body, yield)
			if err == nil || errors.Is(err, errStopped) {
				return
			}
			if ctx.Err() != nil {
				yield(model.Event{}, ctx.Err())
				return
			}
			if !retryable(err) || attempt >= c.opts.MaxRetries {
				yield(model.Event{}, finalError(err))
				return
			}
			if emitted && !yield(model.Event{Kind: model.EventRetry, RetryErr: err}, nil) {
				return
			}
			wait := c.backoff(attempt, retryAfter(err))
			c.logger.Warn("model request failed, retrying", "provider", Provider, "err", err, "attempt", attempt+1, "wait", wait)
			model.WatchRetry(ctx, model.Retry{Err: err, Attempt: attempt + 1, Wait: wait})
			if err := c.sleep(ctx, wait); err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(model.Event{}, err)
				return
			}
		}
	}
}

// reasoningFor is the reasoning to send back before assistant message m.
func (c *Client) reasoningFor(_ int, m model.Message) []json.RawMessage {
	if len(m.ToolCalls) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reasoning[m.ToolCalls[0].ID]
}

// cacheKey routes a conversation's requests to the same prompt cache: the
// model and the conversation's first user message identify it.
func cacheKey(req model.Request) string {
	first := model.FirstUserText(req.Messages)
	if first == "" {
		return ""
	}
	h := fnv64(req.Model + "\x00" + first)
	return "acpd-" + strconv.FormatUint(h, 16)
}

func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func (c *Client) attempt(ctx context.Context, body []byte, yield func(model.Event, error) bool) (emitted bool, err error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var idle *time.Timer
	if c.opts.RequestTimeout > 0 {
		idle = time.AfterFunc(c.opts.RequestTimeout, func() { cancel(errIdle) })
		defer idle.Stop()
	}
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("model request: %w", err)
	}
	for k, vs := range c.opts.Header {
		for _, v := range vs {
			hreq.Header.Add(k, v)
		}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if c.opts.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	resp, err := c.client.Do(hreq)
	if err != nil {
		return false, c.cause(actx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if rerr != nil && len(b) == 0 {
			return false, c.cause(actx, rerr)
		}
		return false, httpError(resp.StatusCode, resp.Header, b, time.Now())
	}
	sse := newSSEReader(resp.Body)
	d := NewDecoder()
	for {
		_, data, err := sse.next()
		if idle != nil {
			idle.Reset(c.opts.RequestTimeout)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return emitted, c.cause(actx, err)
		}
		if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
			break
		}
		evs, err := d.Feed(data)
		if err != nil {
			return emitted, err
		}
		for _, ev := range evs {
			emitted = true
			if !yield(ev, nil) {
				return true, errStopped
			}
		}
	}
	res, err := d.Finish()
	if err != nil {
		return emitted, err
	}
	if len(res.Reasoning) > 0 && len(res.Calls) > 0 {
		items := make([]json.RawMessage, 0, len(res.Reasoning))
		for _, r := range res.Reasoning {
			items = append(items, r.Raw)
		}
		c.mu.Lock()
		c.reasoning[res.Calls[0].CallID] = items
		c.mu.Unlock()
	}
	for _, ev := range res.Events() {
		emitted = true
		if !yield(ev, nil) {
			return true, errStopped
		}
	}
	return emitted, nil
}

func (c *Client) cause(actx context.Context, err error) error {
	if errors.Is(context.Cause(actx), errIdle) {
		return fmt.Errorf("model request: %w for %s", errIdle, c.opts.RequestTimeout)
	}
	return fmt.Errorf("model request: %w", err)
}

// finalCodes are failures reported inside a stream that the same request
// cannot get past.
var finalCodes = map[string]bool{
	"context_length_exceeded":   true,
	"invalid_prompt":            true,
	"insufficient_quota":        true,
	"invalid_encrypted_content": true,
	"invalid_request_error":     true,
}

func retryable(err error) bool {
	if model.IsContextOverflow(err) {
		return false
	}
	var ae *model.APIError
	if errors.As(err, &ae) {
		if ae.Status == http.StatusOK && (finalCodes[ae.Code] || finalCodes[ae.Type]) {
			return false
		}
		return ae.Retryable()
	}
	return true // transport failures, cut streams, idle timeouts, bad events
}

func retryAfter(err error) time.Duration {
	var ae *model.APIError
	if errors.As(err, &ae) {
		return ae.RetryAfter
	}
	return 0
}

func finalError(err error) error {
	var ae *model.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests {
		c := *ae
		c.Message = model.RateLimitMessage
		return &c
	}
	return err
}

func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	d := c.opts.BackoffCap
	if attempt < 30 {
		d = min(c.opts.BackoffBase<<attempt, c.opts.BackoffCap)
	}
	half := d / 2
	return d - half + time.Duration(rand.Int64N(int64(half)+1))
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if c.opts.Sleep != nil {
		return c.opts.Sleep(ctx, d)
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

const maxRetryAfter = 10 * time.Minute

// httpError is the APIError of a non-200 answer: the real API's
// {"error":{"message","type","param","code"}}, or the body's text.
func httpError(status int, header http.Header, body []byte, now time.Time) *model.APIError {
	e := &model.APIError{Status: status, Body: string(body)}
	var top struct {
		Error *wireError `json:"error"`
	}
	if json.Unmarshal(body, &top) == nil && top.Error != nil {
		e.Message, e.Type, e.Code = top.Error.Message, top.Error.Type, code(top.Error.Code)
	}
	if e.Message == "" {
		text := strings.TrimSpace(string(body))
		if text == "" {
			text = http.StatusText(status)
		}
		e.Message = fmt.Sprintf("HTTP %d: %s", status, text)
	}
	if v := strings.TrimSpace(header.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(min(secs, maxRetryAfter.Seconds()) * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil && t.After(now) {
			e.RetryAfter = min(t.Sub(now), maxRetryAfter)
		}
	}
	return e
}
