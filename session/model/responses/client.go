// Package responses speaks the OpenAI Responses API (POST {base}/responses,
// streamed), statelessly: acpd keeps the history, so every request sends the
// whole conversation with store false and asks for the reasoning items'
// encrypted_content, and a response's reasoning items go back, exactly as
// received, before the function calls they led to. GPT-5-Codex models speak
// only this API; OpenAI, Azure, xAI, OpenRouter, Ollama, vLLM and LM Studio
// serve it.
//
// Hand-written rather than openai-go: the wire is a dozen event types, and
// openai-go/v3 links ~137k lines with 175 init functions into a daemon that
// may never use this provider; its accumulator is also where its reported
// stream bugs sit.
package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/sse"
)

// Options configures a Responses provider.
type Options struct {
	model.HTTPOptions
	BaseURL string // e.g. https://api.openai.com/v1; requests go to {BaseURL}/responses
	APIKey  string // sent as a Bearer token when non-empty
	// ReasoningEffort is reasoning.effort when the request names no
	// thinking level ("minimal", "low", "medium", "high"); "" sends no
	// reasoning parameter, which models without reasoning require.
	ReasoningEffort string
	// ReasoningSummary is reasoning.summary (default "auto" whenever an
	// effort is sent): the summaries are what the editor shows as thought.
	ReasoningSummary string
	// Models are per-model settings, by model id.
	Models map[string]Model
}

// Model is one model's settings.
type Model struct {
	// MaxTokens is max_output_tokens when the request sets none.
	MaxTokens int
	// DefaultLevel is the thinking level (an effort) of a request that
	// names none.
	DefaultLevel string
}

// Client streams from the Responses API.
type Client struct {
	opts     Options
	url      string
	streamer *model.Streamer
}

// New returns a provider for opts; a missing BaseURL is reported by Stream.
func New(opts Options) *Client {
	if opts.HTTPOptions.Name == "" {
		opts.HTTPOptions.Name = Provider
	}
	if opts.ReasoningSummary == "" {
		opts.ReasoningSummary = "auto"
	}
	c := &Client{opts: opts, streamer: model.NewStreamer(opts.HTTPOptions)}
	if opts.BaseURL != "" {
		c.url = strings.TrimRight(opts.BaseURL, "/") + "/responses"
	}
	return c
}

// effort maps the request's thinking level to reasoning.effort: "" is the
// configured default, "off" sends no reasoning parameter, and any other
// level is the effort of that name.
func (c *Client) effort(level, modelName string) string {
	if level == "" {
		level = c.opts.Models[modelName].DefaultLevel
	}
	switch level {
	case "":
		return c.opts.ReasoningEffort
	case "off":
		return ""
	}
	return level
}

// reasoningModel tells OpenAI's reasoning models by name: they take a
// reasoning parameter (its summary is what streams as thought), which the
// others refuse.
func reasoningModel(name string) bool {
	name = strings.ToLower(name[strings.LastIndex(name, "/")+1:])
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "codex", "gpt-oss"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Stream implements model.Provider.
func (c *Client) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		if c.url == "" {
			yield(model.Event{}, errors.New(c.streamer.Name()+": baseUrl is required"))
			return
		}
		if m, ok := c.opts.Models[req.Model]; ok && req.MaxTokens == 0 {
			req.MaxTokens = m.MaxTokens
		}
		in := buildInput{reasoning: replayed, cacheKey: req.CacheHints.Key, effort: c.effort(req.ThinkingLevel, req.Model)}
		// A reasoning model asks for its summary even at its default
		// effort, so the editor sees its thought.
		if in.effort != "" || (req.ThinkingLevel == "" && c.opts.Models[req.Model].DefaultLevel == "" && reasoningModel(req.Model)) {
			in.summary = c.opts.ReasoningSummary
		}
		body, err := buildRequest(req, in)
		if err != nil {
			yield(model.Event{}, fmt.Errorf("build %s request: %w", c.streamer.Name(), err))
			return
		}
		h := http.Header{}
		if c.opts.APIKey != "" {
			h.Set("Authorization", "Bearer "+c.opts.APIKey)
		}
		c.streamer.Stream(ctx, model.Call{
			URL: c.url, Header: h, Size: int64(len(body)),
			Body: func() io.Reader { return bytes.NewReader(body) },
			Read: read,
		}, yield)
	}
}

// replayed is the reasoning of assistant message m as it goes back: the
// items this protocol produced, exactly as received.
func replayed(_ int, m model.Message) []json.RawMessage {
	var out []json.RawMessage
	for _, th := range m.Thinking {
		if th.Protocol == Protocol && th.Type == "reasoning" && len(th.Raw) > 0 {
			out = append(out, th.Raw)
		}
	}
	return out
}

// read parses one 200 body, handing each event on as soon as it is known:
// the deltas as they stream, then each reasoning item as an EventThinking
// block, the calls, the usage and the finish reason.
func read(body io.Reader, emit func(model.Event) bool) error {
	r := sse.NewReader(body)
	defer r.Release()
	d := NewDecoder()
read:
	for {
		kind, data, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch kind {
		case sse.Done:
			break read
		case sse.Error:
			// `event: error` carries the error event's JSON; a bare
			// `error:` field (never seen from this API) its text.
			if !json.Valid(data) {
				return &model.APIError{Status: http.StatusOK, Message: Provider + ": " + string(data), Body: string(data)}
			}
		}
		evs, err := d.Feed(data)
		if err != nil {
			return err
		}
		if err := model.Emit(emit, evs...); err != nil {
			return err
		}
	}
	res, err := d.Finish()
	if err != nil {
		return err
	}
	for _, rs := range res.Reasoning {
		th := model.Thinking{Protocol: Protocol, Type: "reasoning", ID: rs.ID, Text: strings.Join(rs.Summary, "\n\n"), Data: rs.Encrypted, Raw: rs.Raw}
		if err := model.Emit(emit, model.Event{Kind: model.EventThinking, Thinking: th}); err != nil {
			return err
		}
	}
	return model.Emit(emit, res.Events()...)
}
