// Package gemini speaks the Gemini API (POST
// {base}/models/{model}:streamGenerateContent?alt=sse): text, thought parts
// (streamed as reasoning), function calls with their ids, and the
// thoughtSignatures Gemini 3 requires back on the parts that carried them.
//
// Hand-written rather than google.golang.org/genai: the stream is one JSON
// shape, genai decodes each chunk into map[string]any first (signatures are
// not kept byte for byte), and it brings cloud.google.com/go/auth, grpc and
// s2a-go into a daemon that may never use this provider.
package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/sse"
)

// DefaultBaseURL is the Gemini API's.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

// Options configures a Gemini provider.
type Options struct {
	model.HTTPOptions
	// BaseURL is the API root with its version (DefaultBaseURL when "");
	// a root without one gets /v1beta.
	BaseURL string
	APIKey  string // sent as x-goog-api-key when non-empty
	// Thinking is the thinking asked for when the request names no level:
	// IncludeThoughts streams thought summaries; ThinkingBudget (Gemini
	// 2.5: -1 dynamic, 0 off) and ThinkingLevel (Gemini 3: "low", "high")
	// are sent when set.
	IncludeThoughts bool
	ThinkingBudget  *int
	ThinkingLevel   string
	// Models are per-model settings, by model id.
	Models map[string]Model
}

// Model is one model's settings.
type Model struct {
	// MaxTokens is maxOutputTokens when the request sets none.
	MaxTokens int
	// Thinking is "budget" (Levels give each level's thinkingBudget) or
	// "effort" (a level is sent by name as Gemini 3's thinkingLevel).
	Thinking string
	Levels   map[string]int
	// DefaultLevel is the level of a request that names none.
	DefaultLevel string
}

// Client streams from the Gemini API.
type Client struct {
	opts     Options
	base     string
	streamer *model.Streamer
}

// New returns a provider for opts.
func New(opts Options) *Client {
	if opts.HTTPOptions.Name == "" {
		opts.HTTPOptions.Name = Provider
	}
	return &Client{opts: opts, base: APIRoot(opts.BaseURL), streamer: model.NewStreamer(opts.HTTPOptions)}
}

var versioned = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`/(v1|v1beta|v1alpha|v1beta1)(/|$)`) })

// APIRoot is base with an API version: a base without one (the host alone)
// gets v1beta, one that names a version (v1, v1beta, Vertex's
// v1beta1/projects/…) is kept. Requests and acpd doctor's model list both
// start from it.
func APIRoot(base string) string {
	base = strings.TrimRight(base, "/")
	if base == "" {
		return DefaultBaseURL
	}
	if versioned().MatchString(base) {
		return base
	}
	return base + "/v1beta"
}

// budgets are the thinkingBudget of each level for Gemini 2.5 models,
// within every 2.5 model's range (Flash's maximum is 24576).
// Built on first use: a package-level map is built by package
// initialization, on every start of acpd.
var budgets = sync.OnceValue(func() map[string]int {
	return map[string]int{"minimal": 512, "low": 1024, "medium": 8192, "high": 24576}
})

// thinking is the thinkingConfig for a request's level on model: "" the
// configured default; "off" a zero budget (Gemini 3 cannot stop thinking:
// its lowest level); a level by name (thinkingLevel on Gemini 3, a budget
// on 2.5); a number a budget in tokens.
func (c *Client) thinking(level, modelName string) *thinkingConfig {
	o := c.opts
	m, known := o.Models[modelName]
	if level == "" && known {
		level = m.DefaultLevel
	}
	gemini3 := strings.Contains(modelName, "gemini-3")
	if b, ok := m.Levels[level]; ok && known && m.Thinking == "budget" && level != "off" {
		return &thinkingConfig{IncludeThoughts: true, ThinkingBudget: &b}
	}
	switch {
	case level == "":
		include := o.IncludeThoughts || thinks(modelName)
		if !include && o.ThinkingBudget == nil && o.ThinkingLevel == "" {
			return nil
		}
		return &thinkingConfig{IncludeThoughts: include, ThinkingBudget: o.ThinkingBudget, ThinkingLevel: o.ThinkingLevel}
	case level == "off" && gemini3:
		return &thinkingConfig{ThinkingLevel: "low"}
	case level == "off":
		zero := 0
		return &thinkingConfig{ThinkingBudget: &zero}
	}
	if n, err := strconv.Atoi(level); err == nil {
		return &thinkingConfig{IncludeThoughts: true, ThinkingBudget: &n}
	}
	if gemini3 {
		return &thinkingConfig{IncludeThoughts: true, ThinkingLevel: level}
	}
	if b, ok := budgets()[level]; ok {
		return &thinkingConfig{IncludeThoughts: true, ThinkingBudget: &b}
	}
	return &thinkingConfig{IncludeThoughts: true}
}

// thinks tells the models that think (2.5 and later) from the 1.x and 2.0
// ones, which refuse a thinkingConfig: those that think are asked for their
// thought summaries, which stream to the editor.
func thinks(name string) bool {
	name = strings.ToLower(strings.TrimPrefix(name, "models/"))
	return strings.HasPrefix(name, "gemini") && !strings.HasPrefix(name, "gemini-1") && !strings.HasPrefix(name, "gemini-2.0") && !strings.HasPrefix(name, "gemini-pro")
}

// Stream implements model.Provider.
func (c *Client) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		if m, ok := c.opts.Models[req.Model]; ok && req.MaxTokens == 0 {
			req.MaxTokens = m.MaxTokens
		}
		body, err := buildRequest(req, buildInput{thinking: c.thinking(req.ThinkingLevel, req.Model)})
		if err != nil {
			yield(model.Event{}, fmt.Errorf("build %s request: %w", c.streamer.Name(), err))
			return
		}
		h := http.Header{}
		if c.opts.APIKey != "" {
			h.Set("x-goog-api-key", c.opts.APIKey)
		}
		u := c.base + "/models/" + url.PathEscape(strings.TrimPrefix(req.Model, "models/")) + ":streamGenerateContent?alt=sse"
		c.streamer.Stream(ctx, model.Call{
			URL: u, Header: h, Size: int64(len(body)),
			Body: func() io.Reader { return bytes.NewReader(body) },
			HTTPError: func(status int, header http.Header, b []byte) error {
				return httpError(status, header, b, time.Now())
			},
			Read: read,
		}, yield)
	}
}

// read parses one 200 body: deltas as they stream, then the text parts'
// signatures, the calls, the usage and the finish reason.
func read(body io.Reader, emit func(model.Event) bool) error {
	r := sse.NewReader(body)
	defer r.Release()
	d := NewDecoder()
read:
	for {
		_, data, err := r.Next()
		if errors.Is(err, io.EOF) {
			break read
		}
		if err != nil {
			return err
		}
		if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
			break read // not Gemini's, but some gateways end every stream so
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
	return model.Emit(emit, res.Events()...)
}

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
		e.RetryAfter = retryDelay(top.Error)
	}
	if e.Message == "" {
		text := strings.TrimSpace(string(body))
		if text == "" {
			text = http.StatusText(status)
		}
		e.Message = fmt.Sprintf("HTTP %d: %s", status, text)
	}
	if d := model.ParseRetryAfter(header.Get("Retry-After"), now); d > 0 {
		e.RetryAfter = d
	}
	return e
}

// maxRetryDelay bounds RetryInfo's delay, as Retry-After is bounded.
const maxRetryDelay = 10 * time.Minute

func retryDelay(w *wireError) time.Duration {
	for _, d := range w.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			if v, err := time.ParseDuration(d.RetryDelay); err == nil && v > 0 {
				return min(v, maxRetryDelay)
			}
		}
	}
	return 0
}
