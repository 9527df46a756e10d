// Package chat is the OpenAI-compatible chat-completions protocol
// (`POST {base}/chat/completions`, streamed): OpenAI, DashScope, DeepSeek,
// vLLM, Ollama, llama.cpp, OpenRouter and every other server that speaks it.
//
// It uses a hand-written SSE reader and Assembler rather than openai-go:
// openai-go's accumulator concatenates repeated names, indexes calls
// densely from 0, adds up usage, drops a pending event at EOF and loses
// llama.cpp's `error:` field, which are exactly the quirks to survive.
package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/sse"
)

// Options configures a chat-completions provider.
type Options struct {
	model.HTTPOptions
	BaseURL string // e.g. https://dashscope.aliyuncs.com/compatible-mode/v1
	APIKey  string // sent as a Bearer token when non-empty
	// CacheControl is model.cacheControl: "on", "off" or "auto" (""):
	// whether requests carry cache_control markers (CacheMarkers). Marked
	// requests to DashScope also send X-DashScope-CacheControl: enable, as
	// qwen-code does.
	CacheControl string
}

// Client streams chat completions from an OpenAI-compatible server.
type Client struct {
	opts Options
	url  string
	s    *model.Streamer
}

// New returns a provider for opts; it never fails, and a missing BaseURL
// is reported by Stream.
func New(opts Options) *Client {
	c := &Client{opts: opts, s: model.NewStreamer(opts.HTTPOptions)}
	if opts.BaseURL != "" {
		c.url = strings.TrimRight(opts.BaseURL, "/") + "/chat/completions"
	}
	return c
}

// cacheKey is the chat protocol's entry in a model.Cache.
type cacheKey struct{}

// messageCache is the conversation's MessageCache, nil without a Cache.
func messageCache(c *model.Cache) *MessageCache {
	if v := c.Load(cacheKey{}, func() any { return new(MessageCache) }); v != nil {
		return v.(*MessageCache)
	}
	return nil
}

// Stream implements model.Provider. Failed attempts are retried per the
// options; an attempt that already yielded events is followed by
// EventRetry before the next one, so the consumer drops that attempt's
// partial text.
func (c *Client) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		if c.url == "" {
			yield(model.Event{}, errors.New("model provider: baseUrl is required"))
			return
		}
		markers := CacheMarkers(c.opts.CacheControl, c.opts.BaseURL, req.Model)
		body, err := buildRequest(req, messageCache(req.Cache), markers)
		if err != nil {
			yield(model.Event{}, fmt.Errorf("build model request: %w", err))
			return
		}
		call := model.Call{
			URL:  c.url,
			Body: body.reader,
			Size: body.size,
			Read: func(r io.Reader, emit func(model.Event) bool) error {
				return streamSSE(r, NewAssembler(c.s.Logger()), emit)
			},
		}
		if c.opts.APIKey != "" || (body.markers && isDashScope(c.opts.BaseURL)) {
			call.Header = make(map[string][]string, 2)
		}
		if body.markers && isDashScope(c.opts.BaseURL) {
			call.Header.Set("X-DashScope-CacheControl", "enable")
		}
		if c.opts.APIKey != "" {
			call.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
		}
		c.s.Stream(ctx, call, yield)
	}
}

// streamSSE reads one SSE body through a, handing each event to emit as
// soon as it is known. It returns model.ErrStopped when emit returns false.
func streamSSE(body io.Reader, a *Assembler, emit func(model.Event) bool) error {
	r := sse.NewReader(body)
	defer r.Release()
read:
	for {
		kind, data, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		switch kind {
		case sse.Done:
			break read
		case sse.Error:
			return a.FeedError(data)
		case sse.Data:
			evs, err := a.Feed(data)
			if err != nil {
				return err
			}
			if err := model.Emit(emit, evs...); err != nil {
				return err
			}
		}
	}
	evs, err := a.Finish()
	if err != nil {
		return err
	}
	return model.Emit(emit, evs...)
}
