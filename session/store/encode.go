package store

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/acpd/acpd/acp"
)

// encode is json.Marshal(r), with the records every tool call writes
// (tool_call and tool_result) written by hand: encoding/json would scan
// each content block's output a second time. The output is byte for byte
// the same (TestEncode_MatchesMarshal).
func (r *Record) encode(b []byte) ([]byte, error) {
	if !r.toolOnly() || r.T.Year() < 0 || r.T.Year() > 9999 {
		j, err := json.Marshal(r)
		return append(b, j...), err
	}
	var err error
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(r.V), 10)
	b = append(b, `,"t":"`...)
	b = r.T.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","kind":`...)
	b = acp.AppendJSONString(b, string(r.Kind))
	if r.Parent != "" {
		b = append(b, `,"parent":`...)
		b = acp.AppendJSONString(b, r.Parent)
	}
	b = append(b, `,"tool":{"toolCallId":`...)
	t := r.Tool
	b = acp.AppendJSONString(b, t.ToolCallID)
	str := func(name, v string) {
		if v != "" {
			b = append(b, `,"`...)
			b = append(b, name...)
			b = append(b, `":`...)
			b = acp.AppendJSONString(b, v)
		}
	}
	str("name", t.Name)
	str("title", t.Title)
	str("kind", string(t.Kind))
	str("status", string(t.Status))
	str("resultHash", t.ResultHash)
	if len(t.Locations) > 0 {
		b = append(b, `,"locations":`...)
		b = acp.AppendToolCallLocations(b, t.Locations)
	}
	for _, raw := range []struct {
		name string
		v    json.RawMessage
	}{{"rawInput", t.RawInput}, {"rawOutput", t.RawOutput}} {
		if len(raw.v) > 0 {
			b = append(b, `,"`...)
			b = append(b, raw.name...)
			b = append(b, `":`...)
			if b, err = acp.AppendJSONValue(b, raw.v); err != nil {
				return b, err
			}
		}
	}
	if len(t.Content) > 0 {
		b = append(b, `,"content":`...)
		if b, err = acp.AppendToolCallContents(b, t.Content); err != nil {
			return b, err
		}
	}
	str("modelText", t.ModelText)
	if len(t.Decisions) > 0 {
		// Rare (a call something other than the approval mode decided),
		// so encoded the ordinary way.
		j, err := json.Marshal(t.Decisions)
		if err != nil {
			return b, err
		}
		b = append(b, `,"decisions":`...)
		b = append(b, j...)
	}
	return append(b, "}}"...), nil
}

// toolOnly reports a record whose only payload is Tool.
func (r *Record) toolOnly() bool {
	return r.Tool != nil && r.Meta == nil && len(r.Prompt) == 0 && r.Text == "" && r.MessageID == "" &&
		len(r.ToolCalls) == 0 && len(r.Plan) == 0 && r.ModeID == "" && r.ModelID == "" && r.Loop == nil &&
		r.Title == "" && r.StopReason == "" && r.Error == "" && r.Usage == nil && len(r.Data) == 0 &&
		r.Compaction == nil && r.Agent == nil && r.Rewind == nil
}
