package gemini

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/session/model"
)

// DefaultBaseURL is the Gemini API's.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

// Options configures a Gemini provider.
type Options struct {
	// BaseURL is the API root with its version (DefaultBaseURL when "");
	// a root without one gets /v1beta. Requests go to
	// {BaseURL}/models/{model}:streamGenerateContent?alt=sse.
	BaseURL    string
	APIKey     string // sent as x-goog-api-key when non-empty
	HTTPClient *http.Client
	// MaxRetries is how many times a failed attempt is retried (0: never).
	MaxRetries int
	// RequestTimeout bounds the wait for response headers and for each
	// read of the stream (an idle timeout). 0: none.
	RequestTimeout time.Duration
	Logger         *slog.Logger
	// BackoffBase and BackoffCap shape the backoff between retries
	// (defaults 1s and 30s); the server's Retry-After or RetryInfo
	// overrides it.
	BackoffBase, BackoffCap time.Duration
	// Sleep waits between retries; nil waits on a timer.
	Sleep  func(ctx context.Context, d time.Duration) error
	Header http.Header
	// IncludeThoughts asks for thought summaries (streamed as reasoning).
	// ThinkingBudget (Gemini 2.5; -1 dynamic, 0 off) and ThinkingLevel
	// (Gemini 3: "low", "high") are sent when set.
	IncludeThoughts bool
	ThinkingBudget  *int
	ThinkingLevel   string
}

// Client streams from the Gemini API.
type Client struct {
	opts   Options
	base   string
	client *http.Client
	logger *slog.Logger

	mu sync.Mutex
	// turns keeps the parts of each model turn, signatures included, by
	// the turn's content, until the conversation sends them back.
	turns map[[32]byte][]Part
}

// New returns a provider for opts.
func New(opts Options) *Client {
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = time.Second
	}
	if opts.BackoffCap <= 0 {
		opts.BackoffCap = 30 * time.Second
	}
	opts.BackoffCap = max(opts.BackoffCap, opts.BackoffBase)
	opts.MaxRetries = max(opts.MaxRetries, 0)
	c := &Client{opts: opts, base: apiRoot(opts.BaseURL), client: opts.HTTPClient, logger: opts.Logger, turns: map[[32]byte][]Part{}}
	if c.client == nil {
		c.client = &http.Client{}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c
}

var versioned = regexp.MustCompile(`/(v1|v1beta|v1alpha|v1beta1)(/|$)`)

// apiRoot is base with an API version.
func apiRoot(base string) string {
	base = strings.TrimRight(base, "/")
	if base == "" {
		return DefaultBaseURL
	}
	if versioned.MatchString(base) {
		return base
	}
	return base + "/v1beta"
}

var (
	errIdle    = errors.New("no data from the model server")
	errStopped = errors.New("iteration stopped")
)

func (c *Client) thinking() *thinkingConfig {
	o := c.opts
	if !o.IncludeThoughts && o.ThinkingBudget == nil && o.ThinkingLevel == "" {
		return nil
	}
	return &thinkingConfig{IncludeThoughts: o.IncludeThoughts, ThinkingBudget: o.ThinkingBudget, ThinkingLevel: o.ThinkingLevel}
}

// Stream implements model.Provider.
func (c *Client) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		body, err := buildRequest(req, buildInput{turn: c.turnFor, thinking: c.thinking()})
		if err != nil {
			yield(model.Event{}, fmt.Errorf("build %s request: %w", Provider, err))
			return
		}
		u := c.base + "/models/" + url.PathEscape(strings.TrimPrefix(req.Model, "models/")) + ":streamGenerateContent?alt=sse"
		for attempt := 0; ; attempt++ {
			emitted, err := c.attempt(ctx, u, body, yield)
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

// turnKey identifies a model turn by what it said and called.
func turnKey(content string, calls []model.ToolCall) [32]byte {
	h := sha256.New()
	h.Write([]byte(content))
	for _, tc := range calls {
		h.Write([]byte{0})
		h.Write([]byte(tc.Name))
		h.Write([]byte{0})
		h.Write(compact(callArgs(tc)))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func (c *Client) turnFor(_ int, m model.Message) []Part {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.turns[turnKey(m.Content, m.ToolCalls)]
}

func (c *Client) remember(res *Result) {
	calls := make([]model.ToolCall, len(res.Calls))
	for i, call := range res.Calls {
		calls[i] = model.ToolCall{ID: call.ID, Name: call.Name, Arguments: call.Args}
	}
	c.mu.Lock()
	c.turns[turnKey(res.Text, calls)] = res.Parts
	c.mu.Unlock()
}

func (c *Client) attempt(ctx context.Context, u string, body []byte, yield func(model.Event, error) bool) (emitted bool, err error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var idle *time.Timer
	if c.opts.RequestTimeout > 0 {
		idle = time.AfterFunc(c.opts.RequestTimeout, func() { cancel(errIdle) })
		defer idle.Stop()
	}
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, u, bytes.NewReader(body))
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
		hreq.Header.Set("x-goog-api-key", c.opts.APIKey)
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
	c.remember(res)
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

func retryable(err error) bool {
	if model.IsContextOverflow(err) {
		return false
	}
	var ae *model.APIError
	if errors.As(err, &ae) {
		if ae.Status == http.StatusOK && (ae.Code == "PROMPT_BLOCKED" || ae.Code == "INVALID_ARGUMENT" || ae.Code == "PERMISSION_DENIED") {
			return false
		}
		return ae.Retryable()
	}
	return true // transport failures, cut streams, idle timeouts, bad chunks
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

// httpError is the APIError of a non-200 answer: Google's
// {"error":{"code","message","status","details"}} (also inside a one-element
// array, the shape without alt=sse), or the body's text. The wait comes
// from Retry-After or from RetryInfo's retryDelay in the details.
func httpError(status int, header http.Header, body []byte, now time.Time) *model.APIError {
	e := &model.APIError{Status: status, Body: string(body)}
	var top struct {
		Error *wireError `json:"error"`
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(trimmed, &arr) == nil && len(arr) > 0 {
			trimmed = arr[0]
		}
	}
	if json.Unmarshal(trimmed, &top) == nil && top.Error != nil {
		e.Message, e.Type, e.Code = top.Error.Message, top.Error.Status, errCode(top.Error)
		for _, d := range top.Error.Details {
			if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
				if w, err := time.ParseDuration(d.RetryDelay); err == nil && w > 0 {
					e.RetryAfter = min(w, maxRetryAfter)
				}
			}
		}
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
