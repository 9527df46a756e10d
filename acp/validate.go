package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
)

// Params is implemented by every params type acpd receives. The connection
// calls Validate after decoding and before the Agent sees the value; it
// returns an *Error with code -32602 naming the offending field.
type Params interface {
	Validate() error
}

// requiredKeys lists, per method, the params keys the schema requires. They
// are checked for presence (and non-null) before decoding, because a Go zero
// value cannot tell a missing field from an empty one. A switch, not a map:
// a package-level map is built by package initialization on every start of
// acpd. Methods without required keys (logout, session/list) and unknown
// ones have none.
func requiredKeys(method string) []string {
	switch method {
	case MethodInitialize:
		return []string{"protocolVersion"}
	case MethodAuthenticate:
		return []string{"methodId"}
	case MethodSessionNew:
		return []string{"cwd", "mcpServers"}
	case MethodSessionLoad:
		return []string{"sessionId", "cwd", "mcpServers"}
	case MethodSessionResume:
		return []string{"sessionId", "cwd"}
	case MethodSessionFork:
		return []string{"sessionId", "cwd"}
	case MethodSessionClose:
		return []string{"sessionId"}
	case MethodSessionDelete:
		return []string{"sessionId"}
	case MethodSessionSetMode:
		return []string{"sessionId", "modeId"}
	case MethodSessionSetModel:
		return []string{"sessionId", "modelId"}
	case MethodSessionSetConfigOption:
		return []string{"sessionId", "configId", "value"}
	case MethodSessionPrompt, MethodSessionSteering:
		return []string{"sessionId", "prompt"}
	case MethodSessionCancel:
		return []string{"sessionId"}
	case MethodCancelRequest:
		return []string{"requestId"}
	}
	return nil
}

// DecodeParams decodes the params of method into v and validates them.
//
// Keys are matched case-sensitively at the top level of params: a key that
// differs from a field's JSON name only in case (e.g. "SessionId") is
// rejected with -32602 instead of being silently accepted, as encoding/json
// would. Nested objects still use encoding/json's case-insensitive matching;
// the cost of a full second pass over large prompts was judged not worth it.
// Unknown keys are ignored (forward compatibility). Absent or null params are
// treated as {} for methods without required fields.
func DecodeParams(method string, raw json.RawMessage, v Params) error {
	raw = bytes.TrimSpace(raw)
	required := requiredKeys(method)
	if len(raw) == 0 || string(raw) == "null" {
		if len(required) > 0 {
			return ErrInvalidParams("params", "missing params (required: "+strings.Join(required, ", ")+")")
		}
		return v.Validate()
	}
	if raw[0] != '{' {
		return ErrInvalidParams("params", "params must be a JSON object")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return ErrInvalidParams("params", "params: "+err.Error())
	}
	tags := jsonTags(reflect.TypeOf(v))
	for k := range keys {
		if _, ok := tags[k]; ok {
			continue
		}
		for t := range tags {
			if strings.EqualFold(k, t) {
				return ErrInvalidParams(k, fmt.Sprintf("unknown field %s (field names are case-sensitive; did you mean %s?)", k, t))
			}
		}
	}
	for _, k := range required {
		if val, ok := keys[k]; !ok || string(val) == "null" {
			return ErrInvalidParams(k, "missing required field "+k)
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return decodeError(err)
	}
	return v.Validate()
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return t.String()
}

// decodeError turns an encoding/json error into -32602 naming the field.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "params"
		}
		return ErrInvalidParams(field, fmt.Sprintf("invalid type for %s: expected %s, got JSON %s", field, jsonKind(te.Type), te.Value))
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	return ErrInvalidParams("params", "invalid params: "+err.Error())
}

var tagCache sync.Map // reflect.Type -> map[string]struct{}

// jsonTags returns the top-level JSON keys of the struct t points to.
func jsonTags(t reflect.Type) map[string]struct{} {
	if m, ok := tagCache.Load(t); ok {
		return m.(map[string]struct{})
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	m := map[string]struct{}{}
	if t.Kind() == reflect.Struct {
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			m[name] = struct{}{}
		}
	}
	tagCache.Store(t, m)
	return m
}

func needID(field, v string) error {
	if v == "" {
		return ErrInvalidParams(field, "missing required field "+field)
	}
	return nil
}

func absPath(field, p string) error {
	if p == "" {
		return ErrInvalidParams(field, "missing required field "+field)
	}
	if !filepath.IsAbs(p) {
		return ErrInvalidParams(field, fmt.Sprintf("%s must be an absolute path, got %q", field, p))
	}
	return nil
}

func absPaths(field string, ps []string) error {
	for i, p := range ps {
		if err := absPath(fmt.Sprintf("%s[%d]", field, i), p); err != nil {
			return err
		}
	}
	return nil
}

func validateServers(servers []MCPServer) error {
	for i, s := range servers {
		if err := s.validate(fmt.Sprintf("mcpServers[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

func (s MCPServer) validate(field string) error {
	if s.Name == "" {
		return ErrInvalidParams(field+".name", "missing required field "+field+".name")
	}
	switch s.Type {
	case "":
		// The schema requires args and env; clients that omit them are
		// accepted (acp-agent.md §4.13 #6), absent means empty.
		return absPath(field+".command", s.Command)
	case "http", "sse":
		if s.URL == "" {
			return ErrInvalidParams(field+".url", "missing required field "+field+".url")
		}
		return nil
	case "acp":
		// MCP over ACP: only in the unstable schema; acpd does not
		// advertise mcpCapabilities.acp (decision in session/mcp).
		return ErrInvalidParams(field+".type", fmt.Sprintf("mcp server %q: MCP over ACP (type \"acp\") is not supported: it is unstable in ACP and acpd does not advertise mcpCapabilities.acp; give the server as stdio, http or sse", s.Name))
	default:
		return ErrInvalidParams(field+".type", fmt.Sprintf("unsupported MCP server type %q", s.Type))
	}
}

// Validate checks one content block of a prompt; field names the block.
func (b ContentBlock) validate(field string) error {
	req := func(name, v string) error {
		if v == "" {
			return ErrInvalidParams(field+"."+name, "missing required field "+field+"."+name)
		}
		return nil
	}
	switch b.Type {
	case ContentText:
		return nil
	case ContentImage, ContentAudio:
		if err := req("data", b.Data); err != nil {
			return err
		}
		return req("mimeType", b.MimeType)
	case ContentResourceLink:
		if err := req("uri", b.URI); err != nil {
			return err
		}
		return req("name", b.Name)
	case ContentResource:
		if b.Resource == nil {
			return ErrInvalidParams(field+".resource", "missing required field "+field+".resource")
		}
		if b.Resource.URI == "" {
			return ErrInvalidParams(field+".resource.uri", "missing required field "+field+".resource.uri")
		}
		if (b.Resource.Text == nil) == (b.Resource.Blob == nil) {
			return ErrInvalidParams(field+".resource", field+".resource needs exactly one of text and blob")
		}
		return nil
	case "":
		return ErrInvalidParams(field+".type", "missing required field "+field+".type")
	default:
		return ErrInvalidParams(field+".type", fmt.Sprintf("unknown content block type %q", b.Type))
	}
}

// Validate checks the protocol version range.
func (r *InitializeRequest) Validate() error {
	if r.ProtocolVersion < 0 || r.ProtocolVersion > 65535 {
		return ErrInvalidParams("protocolVersion", fmt.Sprintf("protocolVersion %d out of range 0..65535", r.ProtocolVersion))
	}
	return nil
}

// Validate checks that methodId is set.
func (r *AuthenticateRequest) Validate() error { return needID("methodId", r.MethodID) }

// Validate accepts any logout params.
func (r *LogoutRequest) Validate() error { return nil }

// validateWorkspace checks what session/new, load and resume share: an
// absolute cwd and additional directories, and well-formed MCP servers.
func validateWorkspace(cwd string, extra []string, servers []MCPServer) error {
	if err := absPath("cwd", cwd); err != nil {
		return err
	}
	if err := absPaths("additionalDirectories", extra); err != nil {
		return err
	}
	return validateServers(servers)
}

// Validate checks cwd, additionalDirectories and mcpServers.
func (r *NewSessionRequest) Validate() error {
	return validateWorkspace(r.Cwd, r.AdditionalDirectories, r.MCPServers)
}

// Validate checks sessionId, cwd, additionalDirectories and mcpServers.
func (r *LoadSessionRequest) Validate() error {
	if err := needID("sessionId", r.SessionID); err != nil {
		return err
	}
	return validateWorkspace(r.Cwd, r.AdditionalDirectories, r.MCPServers)
}

// Validate checks sessionId, cwd, additionalDirectories and mcpServers.
func (r *ResumeSessionRequest) Validate() error {
	if err := needID("sessionId", r.SessionID); err != nil {
		return err
	}
	return validateWorkspace(r.Cwd, r.AdditionalDirectories, r.MCPServers)
}

// Validate checks sessionId, cwd, additionalDirectories and mcpServers.
func (r *ForkSessionRequest) Validate() error {
	if err := needID("sessionId", r.SessionID); err != nil {
		return err
	}
	return validateWorkspace(r.Cwd, r.AdditionalDirectories, r.MCPServers)
}

// Validate checks that the optional cwd filter is absolute.
func (r *ListSessionsRequest) Validate() error {
	if r.Cwd != "" {
		return absPath("cwd", r.Cwd)
	}
	return nil
}

// Validate checks that sessionId is set.
func (r *SessionIDRequest) Validate() error { return needID("sessionId", r.SessionID) }

// Validate checks sessionId and modelId.
func (r *SetSessionModelRequest) Validate() error {
	if err := needID("sessionId", r.SessionID); err != nil {
		return err
	}
	return needID("modelId", r.ModelID)
}

// Validate checks sessionId and modeId.
func (r *SetSessionModeRequest) Validate() error {
	if err := needID("sessionId", r.SessionID); err != nil {
		return err
	}
	return needID("modeId", r.ModeID)
}

// Validate checks ids and that value matches type: a string for select
// options (type absent), a boolean for type "boolean".
func (r *SetSessionConfigOptionRequest) Validate() error {
	if err := needID("sessionId", r.SessionID); err != nil {
		return err
	}
	if err := needID("configId", r.ConfigID); err != nil {
		return err
	}
	v := bytes.TrimSpace(r.Value)
	switch r.Type {
	case "":
		var s string
		if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
			return ErrInvalidParams("value", "value must be a string (or a boolean with type \"boolean\")")
		}
	case "boolean":
		if string(v) != "true" && string(v) != "false" {
			return ErrInvalidParams("value", "value must be a boolean when type is \"boolean\"")
		}
	default:
		return ErrInvalidParams("type", fmt.Sprintf("unknown config value type %q", r.Type))
	}
	return nil
}

// Validate checks sessionId and every content block of the prompt.
func (r *PromptRequest) Validate() error {
	if err := needID("sessionId", r.SessionID); err != nil {
		return err
	}
	if r.Prompt == nil {
		return ErrInvalidParams("prompt", "prompt must be an array of content blocks")
	}
	for i, b := range r.Prompt {
		if err := b.validate(fmt.Sprintf("prompt[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks that requestId is a string, an integer or null.
func (r *CancelRequestNotification) Validate() error {
	if _, ok := idKey(r.RequestID); !ok {
		return ErrInvalidParams("requestId", "requestId must be a string, an integer or null")
	}
	return nil
}

// idKey returns a canonical key for a JSON-RPC id and whether the id is
// valid (a string, an integer written without fraction or exponent, or null).
func idKey(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return "s:" + s, true
	case 'n':
		return "null", string(raw) == "null"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		digits := raw
		if digits[0] == '-' {
			digits = digits[1:]
		}
		if len(digits) == 0 {
			return "", false
		}
		for _, c := range digits {
			if c < '0' || c > '9' {
				return "", false
			}
		}
		if len(digits) > 1 && digits[0] == '0' {
			return "", false
		}
		if string(raw) == "-0" {
			return "n:0", true
		}
		return "n:" + string(raw), true
	}
	return "", false
}
