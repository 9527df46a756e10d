// Package acptest holds test helpers for ACP agents: an in-memory pipe to a
// real acp.Conn, a fake editor client, a raw line client for processes, and a
// schema conformance checker for every line an agent writes.
package acptest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaJSON is the official ACP v1 schema (release 1.21.0), vendored.
//
//go:embed testdata/schema.json
var schemaJSON []byte

const schemaURL = "acp-v1.json"

// Validator checks agent output against the ACP schema, dispatching on the
// method and side of each message to the specific $defs entry (the root
// schema alone accepts almost anything, acp-agent.md §7.2).
type Validator struct {
	mu       sync.Mutex // guards compiler and cache
	compiler *jsonschema.Compiler
	root     *jsonschema.Schema
	cache    map[string]*jsonschema.Schema
	index    map[string]string // "side|method|params|result" -> def name
	defs     map[string]json.RawMessage
	keys     map[string]map[string]bool // def name -> allowed property names
}

// unstableJSON is the same release's unstable schema (session/fork and
// the other methods not yet in the spec), vendored.
//
//go:embed testdata/schema.unstable.json
var unstableJSON []byte

var (
	unstableOnce sync.Once
	unstableV    *Validator
	unstableErr  error
)

// UnstableValidator returns a shared Validator over the unstable schema,
// for wires that use its methods.
func UnstableValidator() (*Validator, error) {
	unstableOnce.Do(func() { unstableV, unstableErr = NewValidator(unstableJSON) })
	return unstableV, unstableErr
}

var (
	defaultOnce sync.Once
	defaultV    *Validator
	defaultErr  error
)

// DefaultValidator returns a shared Validator over the vendored schema.
func DefaultValidator() (*Validator, error) {
	defaultOnce.Do(func() { defaultV, defaultErr = NewValidator(schemaJSON) })
	return defaultV, defaultErr
}

// NewValidator compiles the given schema document.
func NewValidator(schema []byte) (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("decode schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("add schema: %w", err)
	}
	root, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	var meta struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(schema, &meta); err != nil {
		return nil, err
	}
	v := &Validator{compiler: c, root: root, cache: map[string]*jsonschema.Schema{}, index: map[string]string{}, defs: meta.Defs, keys: map[string]map[string]bool{}}
	for name, raw := range meta.Defs {
		var d struct {
			Method string `json:"x-method"`
			Side   string `json:"x-side"`
		}
		if json.Unmarshal(raw, &d) != nil || d.Method == "" {
			continue
		}
		kind := "params"
		if strings.HasSuffix(name, "Response") {
			kind = "result"
		}
		v.index[d.Side+"|"+d.Method+"|"+kind] = name
	}
	return v, nil
}

func (v *Validator) def(name string) (*jsonschema.Schema, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.cache[name]; ok {
		return s, nil
	}
	s, err := v.compiler.Compile(schemaURL + "#/$defs/" + name)
	if err != nil {
		return nil, err
	}
	v.cache[name] = s
	return s, nil
}

// ValidateDef validates a payload (not an envelope) against one $defs entry.
func (v *Validator) ValidateDef(name string, payload []byte) error {
	s, err := v.def(name)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// CheckAgentLine validates one line written by the agent. sentRequests maps
// the raw JSON ids of requests the client sent (e.g. `1`, `"abc"`) to their
// methods, to find the schema of a response. It applies the schema and the
// stateless semantic checks: absolute paths and no unknown root keys.
func (v *Validator) CheckAgentLine(line []byte, sentRequests map[string]string) error {
	_, err := v.checkAgentLine(line, func(id string) string { return sentRequests[id] })
	return err
}

// agentMsg is what checkAgentLine learned about a line, for stateful checks.
type agentMsg struct {
	ID     string // raw JSON id, "" when absent
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage
}

func (v *Validator) checkAgentLine(line []byte, sentMethod func(id string) string) (*agentMsg, error) {
	if bytes.Contains(bytes.TrimRight(line, "\n"), []byte("\n")) {
		return nil, fmt.Errorf("line contains a raw newline")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if err := v.root.Validate(inst); err != nil {
		return nil, fmt.Errorf("envelope: %w", err)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(line, &env); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	m := &agentMsg{Params: env["params"], Result: env["result"], Error: env["error"]}
	if id, ok := env["id"]; ok {
		m.ID = string(id)
	}
	if raw, ok := env["method"]; ok {
		if err := json.Unmarshal(raw, &m.Method); err != nil {
			return nil, fmt.Errorf("method is not a string")
		}
	}
	for k := range env {
		switch k {
		case "jsonrpc", "id", "method", "params", "result", "error":
		default:
			return nil, fmt.Errorf("unknown envelope key %q", k)
		}
	}
	if string(env["jsonrpc"]) != `"2.0"` {
		return nil, fmt.Errorf(`jsonrpc must be "2.0"`)
	}
	var def string
	var payload json.RawMessage
	switch {
	case strings.HasPrefix(m.Method, "_"):
		return m, nil // extension: out of the schema's scope
	case m.Method != "":
		side := "client"
		if strings.HasPrefix(m.Method, "$/") {
			side = "protocol"
		}
		def, payload = v.index[side+"|"+m.Method+"|params"], m.Params
		if def == "" {
			return nil, fmt.Errorf("no schema for method %q", m.Method)
		}
	case env["error"] != nil:
		if _, ok := env["result"]; ok {
			return nil, fmt.Errorf("response has both result and error")
		}
		def, payload = "Error", m.Error
	default:
		if _, ok := env["result"]; !ok {
			return nil, fmt.Errorf("message has neither method, result nor error")
		}
		method := sentMethod(m.ID)
		if strings.HasPrefix(method, "_") {
			return m, nil // the answer to an extension request: out of the schema's scope
		}
		def = v.index["agent|"+method+"|result"]
		if def == "" {
			return nil, fmt.Errorf("no schema for the response to id %s (method %q)", m.ID, method)
		}
		payload = m.Result
	}
	if payload == nil {
		payload = json.RawMessage("null")
	}
	if err := v.ValidateDef(def, payload); err != nil {
		return nil, err
	}
	if def != "Error" {
		if err := v.checkKeys(def, payload); err != nil {
			return nil, err
		}
		if err := checkPaths("", payload); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// checkKeys flags root keys of a spec type that the schema does not define
// (the schema itself allows them), and does the same for session/update's
// update object against its variant.
func (v *Validator) checkKeys(def string, payload json.RawMessage) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(payload, &obj) != nil {
		return nil
	}
	allowed := v.allowedKeys(def)
	for k := range obj {
		if !allowed[k] {
			return fmt.Errorf("%s: unknown key %q (custom data belongs in _meta)", def, k)
		}
	}
	if def == "SessionNotification" {
		var upd map[string]json.RawMessage
		if json.Unmarshal(obj["update"], &upd) != nil {
			return nil
		}
		var kind string
		_ = json.Unmarshal(upd["sessionUpdate"], &kind)
		allowed := v.variantKeys("SessionUpdate", "sessionUpdate", kind)
		for k := range upd {
			if !allowed[k] {
				return fmt.Errorf("session update %s: unknown key %q", kind, k)
			}
		}
	}
	return nil
}

func (v *Validator) allowedKeys(def string) map[string]bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.keys[def]; ok {
		return k
	}
	k := map[string]bool{"_meta": true}
	v.collect(v.defs[def], k, 0)
	v.keys[def] = k
	return k
}

// variantKeys returns the keys allowed in the oneOf branch of def whose
// discriminator prop has the constant value kind.
func (v *Validator) variantKeys(def, prop, kind string) map[string]bool {
	var u struct {
		OneOf []json.RawMessage `json:"oneOf"`
	}
	_ = json.Unmarshal(v.defs[def], &u)
	k := map[string]bool{"_meta": true, prop: true}
	for _, br := range u.OneOf {
		var b struct {
			Properties map[string]struct {
				Const string `json:"const"`
			} `json:"properties"`
		}
		if json.Unmarshal(br, &b) == nil && b.Properties[prop].Const == kind {
			v.mu.Lock()
			v.collect(br, k, 0)
			v.mu.Unlock()
		}
	}
	return k
}

// collect adds the property names of a schema node, following $ref, allOf,
// anyOf and oneOf.
func (v *Validator) collect(node json.RawMessage, into map[string]bool, depth int) {
	if depth > 8 || node == nil {
		return
	}
	var n struct {
		Ref        string                     `json:"$ref"`
		Properties map[string]json.RawMessage `json:"properties"`
		AllOf      []json.RawMessage          `json:"allOf"`
		AnyOf      []json.RawMessage          `json:"anyOf"`
		OneOf      []json.RawMessage          `json:"oneOf"`
	}
	if json.Unmarshal(node, &n) != nil {
		return
	}
	for p := range n.Properties {
		into[p] = true
	}
	if name, ok := strings.CutPrefix(n.Ref, "#/$defs/"); ok {
		v.collect(v.defs[name], into, depth+1)
	}
	for _, list := range [][]json.RawMessage{n.AllOf, n.AnyOf, n.OneOf} {
		for _, s := range list {
			v.collect(s, into, depth+1)
		}
	}
}

// pathKeys are the keys whose string values must be absolute paths.
var pathKeys = map[string]bool{"cwd": true, "path": true, "additionalDirectories": true}

// checkPaths walks a payload (skipping rawInput, rawOutput and _meta, which
// are free-form) and checks every path-valued key.
func checkPaths(where string, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			val := obj[k]
			switch {
			case k == "rawInput" || k == "rawOutput" || k == "_meta":
				continue
			case pathKeys[k]:
				var one string
				var many []string
				if json.Unmarshal(val, &one) == nil {
					many = []string{one}
				} else if json.Unmarshal(val, &many) != nil {
					continue
				}
				for _, p := range many {
					if !filepath.IsAbs(p) {
						return fmt.Errorf("%s%s: path %q is not absolute", where, k, p)
					}
				}
			default:
				if err := checkPaths(where+k+".", val); err != nil {
					return err
				}
			}
		}
	case '[':
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil {
			return nil
		}
		for i, el := range arr {
			if err := checkPaths(fmt.Sprintf("%s%d.", where, i), el); err != nil {
				return err
			}
		}
	}
	return nil
}
