package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/mcp/mcptest"
	"github.com/acpd/acpd/session/tools"
)

// editor is a fake editor answering elicitations.
type editor struct {
	mu        sync.Mutex
	asked     []*acp.CreateElicitationRequest
	completed []string
	answer    func(*acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error)
}

func (e *editor) elicitation(form, url bool) *Elicitation {
	return &Elicitation{Form: form, URL: url,
		Create: func(_ context.Context, req *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
			e.mu.Lock()
			e.asked = append(e.asked, req)
			e.mu.Unlock()
			if e.answer != nil {
				return e.answer(req)
			}
			return &acp.CreateElicitationResponse{Action: acp.ElicitAccept}, nil
		},
		Complete: func(_ context.Context, id string) {
			e.mu.Lock()
			e.completed = append(e.completed, id)
			e.mu.Unlock()
		},
	}
}

func (e *editor) requests() []*acp.CreateElicitationRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*acp.CreateElicitationRequest(nil), e.asked...)
}

func (e *editor) completions() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.completed...)
}

func connectElicit(t *testing.T, el *Elicitation) *Set {
	t.Helper()
	opts, _ := testOptions(t)
	opts.Elicit = el
	set, errs := Connect(t.Context(), []acp.MCPServer{stdioServer("srv")}, opts)
	require.Empty(t, errs)
	t.Cleanup(func() { _ = set.Close() })
	return set
}

// runCall runs a tool as the call with ACP id toolCallID.
func runCall(t *testing.T, set *Set, name, toolCallID string) tools.Result {
	t.Helper()
	env := &tools.Env{ToolCallID: toolCallID}
	call, err := findTool(t, set, name).Build(env, nil)
	require.NoError(t, err)
	return call.Execute(t.Context(), env)
}

// Only what acpd handles is advertised: elicitation in the editor's modes,
// nothing else (as initialize carries it on the wire).
func TestClientCapabilities(t *testing.T) {
	t.Parallel()
	e := &editor{}
	for _, tt := range []struct {
		el   *Elicitation
		want string
	}{
		{nil, `{}`},
		{e.elicitation(true, false), `{"elicitation":{"form":{}}}`},
		{e.elicitation(false, true), `{"elicitation":{"url":{}}}`},
		{e.elicitation(true, true), `{"elicitation":{"form":{},"url":{}}}`},
	} {
		var mu sync.Mutex
		var caps json.RawMessage
		h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcptest.NewServer(0, nil) }, nil)
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var m struct {
				Method string `json:"method"`
				Params struct {
					Capabilities json.RawMessage `json:"capabilities"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "initialize" {
				mu.Lock()
				caps = m.Params.Capabilities
				mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			h.ServeHTTP(w, r)
		}))
		opts, _ := testOptions(t)
		opts.Elicit = tt.el
		set, errs := Connect(t.Context(), []acp.MCPServer{{Type: "http", Name: "h", URL: ts.URL}}, opts)
		require.Empty(t, errs)
		require.NoError(t, set.Close())
		ts.Close()
		mu.Lock()
		assert.JSONEq(t, tt.want, string(caps))
		mu.Unlock()
	}
}

// A form elicitation goes to the editor tied to the call, naming the
// server; the user's answer reaches the server.
func TestElicitation_Form(t *testing.T) {
	t.Parallel()
	e := &editor{answer: func(*acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
		return &acp.CreateElicitationResponse{Action: acp.ElicitAccept, Content: map[string]json.RawMessage{"name": json.RawMessage(`"Ada"`), "color": json.RawMessage(`"green"`)}}, nil
	}}
	set := connectElicit(t, e.elicitation(true, true))
	res := runCall(t, set, "mcp__srv__ask_form", "call-7")
	require.NoError(t, res.Err, res.LLMContent)
	assert.Equal(t, "form: action=accept name=Ada color=green", res.LLMContent)
	asked := e.requests()
	require.Len(t, asked, 1)
	r := asked[0]
	assert.Equal(t, "form", r.Mode)
	assert.Equal(t, "call-7", r.ToolCallID)
	assert.Equal(t, `MCP server "srv": Who are you?`, r.Message)
	assert.Equal(t, acp.Meta{"source": "mcp", "server": "srv"}, r.Meta)
	wire, err := json.Marshal(r.RequestedSchema)
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"object","properties":{"name":{"type":"string","title":"Name","minLength":1},"color":{"type":"string","title":"Colour","enum":["red","green"]}},"required":["name"]}`, string(wire))

	// A declined form is the server's to handle; an answer that breaks the
	// schema is refused by the SDK.
	for answer, want := range map[string]string{"decline": "form: action=decline", "cancel": "form: action=cancel"} {
		e.answer = func(*acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
			return &acp.CreateElicitationResponse{Action: answer}, nil
		}
		res := runCall(t, set, "mcp__srv__ask_form", "call-8")
		assert.Contains(t, res.LLMContent, want)
	}
	e.answer = func(*acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
		return nil, errors.New("the editor went away")
	}
	res = runCall(t, set, "mcp__srv__ask_form", "call-9")
	assert.Contains(t, res.LLMContent, "form: action=cancel", "a failed question is a cancel")
}

// A URL elicitation is shown to the editor with an id of acpd's own, and
// the server's completion reaches the editor under that id.
func TestElicitation_URL(t *testing.T) {
	t.Parallel()
	e := &editor{}
	set := connectElicit(t, e.elicitation(false, true))
	res := runCall(t, set, "mcp__srv__ask_url", "call-1")
	require.NoError(t, res.Err, res.LLMContent)
	assert.Equal(t, "url: action=accept", res.LLMContent)
	asked := e.requests()
	require.Len(t, asked, 1)
	assert.Equal(t, "url", asked[0].Mode)
	assert.Equal(t, "https://example.com/consent?flow=1", asked[0].URL)
	assert.Equal(t, "call-1", asked[0].ToolCallID)
	assert.Regexp(t, `^mcp-[A-Z2-7]{26}$`, asked[0].ElicitationID)
	assert.Eventually(t, func() bool { return len(e.completions()) == 1 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{asked[0].ElicitationID}, e.completions())
}

// -32042: the URL is shown, and once the server says the step is done the
// call is retried, once.
func TestElicitation_URLRequired(t *testing.T) {
	t.Parallel()
	e := &editor{}
	set := connectElicit(t, e.elicitation(false, true))
	res := runCall(t, set, "mcp__srv__needs_url", "call-2")
	require.NoError(t, res.Err, res.LLMContent)
	assert.Equal(t, "needs_url: done after consent", res.LLMContent)
	asked := e.requests()
	require.Len(t, asked, 1)
	assert.Equal(t, "https://example.com/archive-login", asked[0].URL)
	assert.Equal(t, "call-2", asked[0].ToolCallID)
	assert.Equal(t, []string{asked[0].ElicitationID}, e.completions())

	// Without URL elicitation in the editor, the call fails saying why,
	// and the URL is not given to the model.
	set = connectElicit(t, (&editor{}).elicitation(true, false))
	res = runCall(t, set, "mcp__srv__needs_url", "call-3")
	require.Error(t, res.Err)
	assert.Contains(t, res.LLMContent, "needs the user to open a web page first, and this editor cannot show one")
	assert.NotContains(t, res.LLMContent, "example.com")

	// The user declining the page fails the call.
	d := &editor{answer: func(*acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
		return &acp.CreateElicitationResponse{Action: acp.ElicitDecline}, nil
	}}
	set = connectElicit(t, d.elicitation(false, true))
	res = runCall(t, set, "mcp__srv__needs_url", "call-4")
	require.Error(t, res.Err)
	assert.Contains(t, res.LLMContent, `the user answered "decline"`)
}

// A request in a mode the editor did not advertise is declined without
// asking it (a server must not send one; the handler still refuses).
func TestElicitation_ModeNotOffered(t *testing.T) {
	t.Parallel()
	e := &editor{}
	s := newServer(acp.MCPServer{Name: "x"}, Options{Elicit: e.elicitation(true, false)}.withDefaults())
	res, err := s.elicit(t.Context(), &sdk.ElicitRequest{Params: &sdk.ElicitParams{Mode: "url", URL: "https://example.com", ElicitationID: "e", Message: "m"}})
	require.NoError(t, err)
	assert.Equal(t, acp.ElicitDecline, res.Action)
	assert.Empty(t, e.requests())
}
