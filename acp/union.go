package acp

import (
	"encoding/json"
	"fmt"
)

// Content block types (ContentBlock.Type).
const (
	ContentText         = "text"
	ContentImage        = "image"
	ContentAudio        = "audio"
	ContentResourceLink = "resource_link"
	ContentResource     = "resource"
)

// Tool-call content types (ToolCallContent.Type).
const (
	ToolContentContent  = "content"
	ToolContentDiff     = "diff"
	ToolContentTerminal = "terminal"
)

// MarshalJSON writes only the fields of the variant selected by Type, and
// always writes the variant's required fields (text may be empty).
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	return appendContentBlock(nil, &b)
}

// marshalVariant is MarshalJSON through encoding/json.
func (b ContentBlock) marshalVariant() ([]byte, error) {
	switch b.Type {
	case ContentText:
		return json.Marshal(struct {
			Type        string          `json:"type"`
			Text        string          `json:"text"`
			Annotations json.RawMessage `json:"annotations,omitempty"`
			Meta        Meta            `json:"_meta,omitempty"`
		}{b.Type, b.Text, b.Annotations, b.Meta})
	case ContentImage:
		return json.Marshal(struct {
			Type        string          `json:"type"`
			Data        string          `json:"data"`
			MimeType    string          `json:"mimeType"`
			URI         string          `json:"uri,omitempty"`
			Annotations json.RawMessage `json:"annotations,omitempty"`
			Meta        Meta            `json:"_meta,omitempty"`
		}{b.Type, b.Data, b.MimeType, b.URI, b.Annotations, b.Meta})
	case ContentAudio:
		return json.Marshal(struct {
			Type        string          `json:"type"`
			Data        string          `json:"data"`
			MimeType    string          `json:"mimeType"`
			Annotations json.RawMessage `json:"annotations,omitempty"`
			Meta        Meta            `json:"_meta,omitempty"`
		}{b.Type, b.Data, b.MimeType, b.Annotations, b.Meta})
	case ContentResourceLink:
		return json.Marshal(struct {
			Type        string          `json:"type"`
			URI         string          `json:"uri"`
			Name        string          `json:"name"`
			MimeType    string          `json:"mimeType,omitempty"`
			Title       string          `json:"title,omitempty"`
			Description string          `json:"description,omitempty"`
			Size        *int64          `json:"size,omitempty"`
			Annotations json.RawMessage `json:"annotations,omitempty"`
			Meta        Meta            `json:"_meta,omitempty"`
		}{b.Type, b.URI, b.Name, b.MimeType, b.Title, b.Description, b.Size, b.Annotations, b.Meta})
	case ContentResource:
		if b.Resource == nil {
			return nil, fmt.Errorf("acp: resource content block without resource")
		}
		return json.Marshal(struct {
			Type        string            `json:"type"`
			Resource    *EmbeddedResource `json:"resource"`
			Annotations json.RawMessage   `json:"annotations,omitempty"`
			Meta        Meta              `json:"_meta,omitempty"`
		}{b.Type, b.Resource, b.Annotations, b.Meta})
	default:
		return nil, fmt.Errorf("acp: unknown content block type %q", b.Type)
	}
}

// MarshalJSON writes the text or the blob variant; exactly one must be set.
func (r EmbeddedResource) MarshalJSON() ([]byte, error) {
	if (r.Text == nil) == (r.Blob == nil) {
		return nil, fmt.Errorf("acp: embedded resource %q needs exactly one of text and blob", r.URI)
	}
	type plain EmbeddedResource
	return json.Marshal(plain(r))
}

// MarshalJSON writes only the fields of the variant selected by Type.
func (c ToolCallContent) MarshalJSON() ([]byte, error) {
	return appendToolCallContent(nil, &c)
}

// MarshalJSON writes the stdio variant (Type "", with args and env always
// present) or the http/sse variant (with headers always present).
func (s MCPServer) MarshalJSON() ([]byte, error) {
	switch s.Type {
	case "":
		return json.Marshal(struct {
			Name    string        `json:"name"`
			Command string        `json:"command"`
			Args    []string      `json:"args"`
			Env     []EnvVariable `json:"env"`
			Meta    Meta          `json:"_meta,omitempty"`
		}{s.Name, s.Command, nonNil(s.Args), nonNil(s.Env), s.Meta})
	case "http", "sse":
		return json.Marshal(struct {
			Type    string       `json:"type"`
			Name    string       `json:"name"`
			URL     string       `json:"url"`
			Headers []HTTPHeader `json:"headers"`
			Meta    Meta         `json:"_meta,omitempty"`
		}{s.Type, s.Name, s.URL, nonNil(s.Headers), s.Meta})
	default:
		return nil, fmt.Errorf("acp: unknown MCP server type %q", s.Type)
	}
}

// UnmarshalJSON decodes the variant named by `sessionUpdate`. It is used by
// test clients; an unknown (e.g. unstable) variant is an error.
func (u *SessionUpdate) UnmarshalJSON(data []byte) error {
	var head struct {
		Kind string `json:"sessionUpdate"`
		Meta Meta   `json:"_meta"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return err
	}
	*u = SessionUpdate{Kind: head.Kind}
	switch head.Kind {
	case UpdateUserMessageChunk, UpdateAgentMessageChunk, UpdateAgentThoughtChunk:
		var v struct {
			Content   *ContentBlock `json:"content"`
			MessageID string        `json:"messageId"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		if v.Content == nil {
			return fmt.Errorf("acp: %s without content", head.Kind)
		}
		u.Content, u.MessageID, u.Meta = v.Content, v.MessageID, head.Meta
	case UpdateToolCall:
		u.ToolCall = new(ToolCall)
		return json.Unmarshal(data, u.ToolCall)
	case UpdateToolCallUpdate:
		u.ToolCallUpdate = new(ToolCallUpdate)
		return json.Unmarshal(data, u.ToolCallUpdate)
	case UpdatePlan, UpdateAvailableCommands, UpdateCurrentMode, UpdateConfigOption, UpdateSessionInfo, UpdateUsage:
		var v struct {
			Entries           []PlanEntry           `json:"entries"`
			AvailableCommands []AvailableCommand    `json:"availableCommands"`
			CurrentModeID     string                `json:"currentModeId"`
			ConfigOptions     []SessionConfigOption `json:"configOptions"`
			Title             *string               `json:"title"`
			UpdatedAt         *string               `json:"updatedAt"`
			Used              uint64                `json:"used"`
			Size              uint64                `json:"size"`
			Cost              *Cost                 `json:"cost"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		u.Entries, u.AvailableCommands, u.CurrentModeID, u.ConfigOptions = v.Entries, v.AvailableCommands, v.CurrentModeID, v.ConfigOptions
		u.Title, u.UpdatedAt, u.Used, u.Size, u.Cost, u.Meta = v.Title, v.UpdatedAt, v.Used, v.Size, v.Cost, head.Meta
	case UpdateNotice:
		u.Notice, u.Meta = new(Notice), head.Meta
		return json.Unmarshal(data, u.Notice)
	case UpdateCompaction:
		u.Compaction, u.Meta = new(CompactionUpdate), head.Meta
		return json.Unmarshal(data, u.Compaction)
	case UpdateCompactionChunk:
		var v struct {
			CompactionID string        `json:"compactionId"`
			Content      *ContentBlock `json:"content"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		if v.Content == nil {
			return fmt.Errorf("acp: %s without content", head.Kind)
		}
		u.CompactionID, u.Content, u.Meta = v.CompactionID, v.Content, head.Meta
	default:
		return fmt.Errorf("acp: unknown session update kind %q", head.Kind)
	}
	return nil
}

// The MarshalJSON methods below keep required arrays `[]` instead of null.

// MarshalJSON writes authMethods as an array even when empty.
func (r InitializeResponse) MarshalJSON() ([]byte, error) {
	type plain InitializeResponse
	p := plain(r)
	p.AuthMethods = nonNil(p.AuthMethods)
	return json.Marshal(p)
}

// MarshalJSON writes availableModes as an array even when empty.
func (s SessionModeState) MarshalJSON() ([]byte, error) {
	type plain SessionModeState
	p := plain(s)
	p.AvailableModes = nonNil(p.AvailableModes)
	return json.Marshal(p)
}

// MarshalJSON writes options as an array even when empty, and a boolean
// option with its boolean currentValue and no options.
func (o SessionConfigOption) MarshalJSON() ([]byte, error) {
	if o.Type == "boolean" {
		return json.Marshal(struct {
			ID           string `json:"id"`
			Name         string `json:"name"`
			Description  string `json:"description,omitempty"`
			Category     string `json:"category,omitempty"`
			Type         string `json:"type"`
			CurrentValue bool   `json:"currentValue"`
		}{o.ID, o.Name, o.Description, o.Category, o.Type, o.Bool})
	}
	type plain SessionConfigOption
	p := plain(o)
	p.Options = nonNil(p.Options)
	return json.Marshal(p)
}

// UnmarshalJSON reads a select or a boolean option.
func (o *SessionConfigOption) UnmarshalJSON(data []byte) error {
	type plain SessionConfigOption
	var v struct {
		plain
		CurrentValue json.RawMessage `json:"currentValue"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*o = SessionConfigOption(v.plain)
	if o.Type == "boolean" {
		return json.Unmarshal(v.CurrentValue, &o.Bool)
	}
	if len(v.CurrentValue) > 0 {
		return json.Unmarshal(v.CurrentValue, &o.CurrentValue)
	}
	return nil
}

// MarshalJSON writes sessions as an array even when empty.
func (r ListSessionsResponse) MarshalJSON() ([]byte, error) {
	type plain ListSessionsResponse
	p := plain(r)
	p.Sessions = nonNil(p.Sessions)
	return json.Marshal(p)
}

// MarshalJSON writes configOptions as an array even when empty.
func (r SetSessionConfigOptionResponse) MarshalJSON() ([]byte, error) {
	type plain SetSessionConfigOptionResponse
	p := plain(r)
	p.ConfigOptions = nonNil(p.ConfigOptions)
	return json.Marshal(p)
}

// MarshalJSON writes options as an array even when empty.
func (r RequestPermissionRequest) MarshalJSON() ([]byte, error) {
	type plain RequestPermissionRequest
	p := plain(r)
	p.Options = nonNil(p.Options)
	return json.Marshal(p)
}
