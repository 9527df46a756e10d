// Package anthropic is the Anthropic Messages API (`POST {base}/v1/messages`,
// streamed): text, tool use with input_json_delta, extended thinking and
// redacted thinking with their signatures, prompt caching at cache_control
// breakpoints, and the API's own errors.
//
// Hand-written rather than anthropic-sdk-go. Measured with a throwaway main
// that streams one Messages request through the SDK (v2.15.0) against one
// that only makes an HTTP POST, both `go build -ldflags=-s`, Go 1.26, on
// the shared 2-core box: the binary grows from 5.9 MB to 12.3 MB, the
// start-up runs 112 package inits instead of 77 (GODEBUG=inittrace=1;
// 1.1 ms of init work against 0.7 ms), and it pulls in gjson/sjson, a
// YAML decoder and a JSON-schema generator. Every daemon would pay that,
// also those that never talk to Anthropic. The wire format is eight event
// types, and the SDK's accumulator has had bugs exactly where acpd needs
// exactness (signature deltas overwritten, usage added up instead of the
// latest value taken). This package adds no dependency and no init work.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strings"

	"github.com/acpd/acpd/session/model"
)

// DefaultBaseURL is Anthropic's API.
const DefaultBaseURL = "https://api.anthropic.com"

// APIVersion is the anthropic-version header acpd speaks.
const APIVersion = "2023-06-01"

// DefaultMaxTokens is max_tokens when neither the request nor the model's
// configuration sets one: the API requires the field.
const DefaultMaxTokens = 16384

// Options configures a Messages API provider.
type Options struct {
	model.HTTPOptions
	BaseURL string // "" = DefaultBaseURL; "/v1/messages" is appended
	APIKey  string // sent as x-api-key
	// Beta lists anthropic-beta flags to send.
	Beta []string
	// CacheControl is model.cacheControl: "off" sends no cache_control
	// breakpoints; "auto" ("") and "on" place them (Breakpoints).
	CacheControl string
	// Models holds per-model settings by the model id sent on the wire.
	Models map[string]Model
}

// Model is one model's settings.
type Model struct {
	// MaxTokens is the model's max_tokens when the request sets none.
	MaxTokens int
	// Thinking is how the model thinks: ThinkingBudget (thinking.type
	// "enabled" with budget_tokens; Claude 3.7 to 4.5), ThinkingAdaptive
	// (thinking.type "adaptive" with output_config.effort; newer models,
	// which reject budget_tokens), or "" (no thinking).
	Thinking string
	// Levels maps a thinking level to its budget in tokens (budget mode)
	// or its effort name (adaptive mode, the value ignored). nil: the
	// defaults (DefaultBudgets).
	Levels map[string]int
	// DefaultLevel is the level used when the editor chose none; "" or
	// "off" thinks only when asked.
	DefaultLevel string
}

// Thinking modes.
const (
	ThinkingBudget   = "budget"
	ThinkingAdaptive = "adaptive"
)

// DefaultBudgets are the budget_tokens of the usual levels (the API's
// minimum is 1024).
var DefaultBudgets = map[string]int{"low": 2048, "medium": 8192, "high": 24576}

// Client streams from the Messages API.
type Client struct {
	opts Options
	url  string
	s    *model.Streamer
}

// New returns a provider for opts; it never fails.
func New(opts Options) *Client {
	if opts.HTTPOptions.Name == "" {
		opts.HTTPOptions.Name = Protocol
	}
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	base = strings.TrimRight(base, "/")
	// A base that already names the version ("…/v1", as OpenAI-style
	// settings often do) is taken as is.
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	return &Client{opts: opts, url: base + "/messages", s: model.NewStreamer(opts.HTTPOptions)}
}

// Stream implements model.Provider.
func (c *Client) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		if req.Model == "" {
			yield(model.Event{}, errors.New("anthropic request: model is required"))
			return
		}
		body, err := c.build(req)
		if err != nil {
			yield(model.Event{}, fmt.Errorf("anthropic request: %w", err))
			return
		}
		h := http.Header{}
		h.Set("anthropic-version", APIVersion)
		if c.opts.APIKey != "" {
			h.Set("x-api-key", c.opts.APIKey)
		}
		if len(c.opts.Beta) > 0 {
			h.Set("anthropic-beta", strings.Join(c.opts.Beta, ","))
		}
		c.s.Stream(ctx, model.Call{
			URL: c.url, Header: h, Body: body.reader, Size: int64(len(body.b)),
			Read: Read,
		}, func(ev model.Event, err error) bool {
			if ev.Kind == model.EventThinking {
				// Bound to the conversation it was produced in: the next
				// request drops it if what precedes it changed.
				ev.Thinking.Prefix = body.digest
			}
			return yield(ev, err)
		})
	}
}
