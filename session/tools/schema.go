package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
)

// toolSpec is the model-facing half every built-in tool shares: its name,
// kind, description and compiled parameter schema.
type toolSpec struct {
	name string
	kind acp.ToolKind
	desc string
	// params is the schema's text, kept as the string constant it is:
	// converting it to bytes here copied every tool's schema at start-up.
	params string
	// schema compiles the parameter schema on first use: nothing of it
	// need run before a process (`acpd --version`, an editor's initialize)
	// has answered.
	schema func() *jsonschema.Resolved
}

// mustSpec describes a tool whose parameter schema is compiled on first
// use. The schemas are constants of this package, so a failure to compile is
// a programming error: it panics, and TestBuiltinSchemasCompile catches it.
func mustSpec(name string, kind acp.ToolKind, desc, params string) toolSpec {
	return toolSpec{name: name, kind: kind, desc: desc, params: params,
		schema: sync.OnceValue(func() *jsonschema.Resolved { return compileSchema(name, params) })}
}

func compileSchema(name, params string) *jsonschema.Resolved {
	sch, err := compileParams(params)
	if err != nil {
		panic(fmt.Sprintf("tools: schema of %s: %v", name, err))
	}
	return sch
}

func (s *toolSpec) Name() string       { return s.name }
func (s *toolSpec) Kind() acp.ToolKind { return s.kind }

func (s *toolSpec) Spec() model.ToolSpec {
	return model.ToolSpec{Name: s.name, Description: s.desc, Parameters: json.RawMessage(s.params)}
}

// decode validates args against the schema and then unmarshals them into v.
// Its errors name the offending parameter; they go back to the model.
func (s *toolSpec) decode(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	var inst any
	if err := json.Unmarshal(args, &inst); err != nil {
		return fmt.Errorf("invalid parameters for %s: arguments are not valid JSON: %v", s.name, err)
	}
	if err := CheckArgs(s.compiled(), inst); err != nil {
		return fmt.Errorf("invalid parameters for %s: %w", s.name, err)
	}
	if err := json.Unmarshal(args, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("invalid parameters for %s: params/%s: must be %s", s.name, te.Field, te.Type)
		}
		return fmt.Errorf("invalid parameters for %s: %v", s.name, err)
	}
	return nil
}

// compiled is the compiled parameter schema (compiling it now if needed).
func (s *toolSpec) compiled() *jsonschema.Resolved { return s.schema() }

// Schema is a compiled parameter schema for a tool defined outside this
// package (the agent tool): its arguments are validated, and its errors
// worded, as a built-in tool's.
type Schema struct{ spec toolSpec }

// NewSchema compiles params (JSON Schema) on first use, for the tool named
// name. The schema is the caller's constant: a failure to compile panics.
func NewSchema(name, params string) *Schema {
	return &Schema{spec: mustSpec(name, "", "", params)}
}

// Params is the schema as the model is offered it.
func (s *Schema) Params() json.RawMessage { return json.RawMessage(s.spec.params) }

// Decode validates args against the schema and unmarshals them into v; its
// errors name the offending parameter and go back to the model.
func (s *Schema) Decode(args json.RawMessage, v any) error { return s.spec.decode(args, v) }
