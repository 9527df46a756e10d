package acp

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// refToolCallContent and refToolCall encode through encoding/json alone,
// as acp did before the hand-written encoders: the reference they must
// match byte for byte.
type refToolCallContent ToolCallContent

func (c refToolCallContent) MarshalJSON() ([]byte, error) {
	var block *refContentBlock
	if c.Content != nil {
		b := refContentBlock(*c.Content)
		block = &b
	}
	switch c.Type {
	case ToolContentContent:
		if c.Content == nil {
			return nil, fmt.Errorf("acp: tool call content without content")
		}
		return json.Marshal(struct {
			Type    string           `json:"type"`
			Content *refContentBlock `json:"content"`
		}{c.Type, block})
	case ToolContentDiff:
		newText := ""
		if c.NewText != nil {
			newText = *c.NewText
		}
		return json.Marshal(struct {
			Type    string  `json:"type"`
			Path    string  `json:"path"`
			OldText *string `json:"oldText,omitempty"`
			NewText string  `json:"newText"`
		}{c.Type, c.Path, c.OldText, newText})
	case ToolContentTerminal:
		return json.Marshal(struct {
			Type       string `json:"type"`
			TerminalID string `json:"terminalId"`
		}{c.Type, c.TerminalID})
	}
	return nil, fmt.Errorf("acp: unknown tool call content type %q", c.Type)
}

type refContentBlock ContentBlock

func (b refContentBlock) MarshalJSON() ([]byte, error) { return ContentBlock(b).marshalVariant() }

func refUpdate(kind string, id string, title *string, tk ToolKind, st ToolCallStatus, content []ToolCallContent, locs []ToolCallLocation, in, out any, meta Meta) ([]byte, error) {
	rc := make([]refToolCallContent, len(content))
	for i, c := range content {
		rc[i] = refToolCallContent(c)
	}
	return json.Marshal(struct {
		Kind       string               `json:"sessionUpdate"`
		ToolCallID string               `json:"toolCallId"`
		Title      *string              `json:"title,omitempty"`
		ToolKind   ToolKind             `json:"kind,omitempty"`
		Status     ToolCallStatus       `json:"status,omitempty"`
		Content    []refToolCallContent `json:"content,omitempty"`
		Locations  []ToolCallLocation   `json:"locations,omitempty"`
		RawInput   any                  `json:"rawInput,omitempty"`
		RawOutput  any                  `json:"rawOutput,omitempty"`
		Meta       Meta                 `json:"_meta,omitempty"`
	}{kind, id, title, tk, st, rc, locs, in, out, meta})
}

var awkwardStrings = []string{"", "plain", "line\nline\r\n\ttab", `quote " back \ slash`, "<b>&amp;</b>", "héllo ✓ 日本",
	"bad \xff\xfe utf8", "\u2028\u2029", "\x00\x01\x1f\x7f", "emoji 🎉", "trunc \xe2\x82", "\b\f\v", "/path/with spaces/f.go"}

// TestFastEncoders_MatchMarshal compares the hand-written tool-call
// encoders with encoding/json on random frames built from awkward parts.
func TestFastEncoders_MatchMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return awkwardStrings[rng.IntN(len(awkwardStrings))] }
	line := 7
	for i := range 3000 {
		var content []ToolCallContent
		for range rng.IntN(3) {
			switch rng.IntN(6) {
			case 0:
				content = append(content, TextContent(pick()))
			case 1:
				old := pick()
				content = append(content, DiffContent(pick(), &old, pick()))
			case 2:
				content = append(content, DiffContent(pick(), nil, pick()))
			case 3:
				content = append(content, ToolCallContent{Type: ToolContentDiff, Path: pick()})
			case 4:
				content = append(content, TerminalContent(pick()))
			case 5:
				b := ContentBlock{Type: ContentText, Text: pick(), Meta: Meta{"k": pick()}}
				content = append(content, ToolCallContent{Type: ToolContentContent, Content: &b})
			}
		}
		var locs []ToolCallLocation
		for range rng.IntN(3) {
			l := ToolCallLocation{Path: pick()}
			if rng.IntN(2) == 0 {
				l.Line = &line
			}
			locs = append(locs, l)
		}
		raws := []any{nil, json.RawMessage(`{ "file_path" : "/a/b.txt", "n": [1, 2 ] }`), json.RawMessage(`{"html":"<&>"}`),
			json.RawMessage("{\"sep\":\"\u2028\"}"), map[string]any{"k": pick()}, json.RawMessage(nil), "a string"}
		in, out := raws[rng.IntN(len(raws))], raws[rng.IntN(len(raws))]
		var meta Meta
		if rng.IntN(3) == 0 {
			meta = Meta{"toolName": pick()}
		}
		title := pick()
		kinds := []ToolKind{"", KindRead, KindEdit, ToolKind(pick())}
		stats := []ToolCallStatus{"", StatusPending, StatusCompleted, ToolCallStatus(pick())}
		tk, st := kinds[rng.IntN(len(kinds))], stats[rng.IntN(len(stats))]
		id := pick()

		tc := ToolCall{ToolCallID: id, Title: title, Kind: tk, Status: st, Content: content, Locations: locs, RawInput: in, RawOutput: out, Meta: meta}
		got, err := SessionUpdate{Kind: UpdateToolCall, ToolCall: &tc}.MarshalJSON()
		require.NoError(t, err)
		want, err := refUpdate(UpdateToolCall, id, &title, tk, st, content, locs, in, out, meta)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "case %d", i)

		var tp *string
		if rng.IntN(2) == 0 {
			tp = &title
		}
		tu := ToolCallUpdate{ToolCallID: id, Title: tp, Kind: tk, Status: st, Content: content, Locations: locs, RawInput: in, RawOutput: out, Meta: meta}
		got, err = SessionUpdate{Kind: UpdateToolCallUpdate, ToolCallUpdate: &tu}.MarshalJSON()
		require.NoError(t, err)
		want, err = refUpdate(UpdateToolCallUpdate, id, tp, tk, st, content, locs, in, out, meta)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "case %d", i)

		// Nested in encoding/json (the transcript records), too.
		got, err = json.Marshal(content)
		require.NoError(t, err)
		var rc []refToolCallContent
		for _, c := range content {
			rc = append(rc, refToolCallContent(c))
		}
		want, err = json.Marshal(rc)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "case %d", i)
	}
}

// Errors stay errors: bad unions and invalid raw JSON.
func TestFastEncoders_Errors(t *testing.T) {
	for _, tc := range []ToolCall{
		{ToolCallID: "a", Content: []ToolCallContent{{Type: "bogus"}}},
		{ToolCallID: "a", Content: []ToolCallContent{{Type: ToolContentContent}}},
		{ToolCallID: "a", RawInput: json.RawMessage(`{"unterminated`)},
		{ToolCallID: "a", Content: []ToolCallContent{{Type: ToolContentContent, Content: &ContentBlock{Type: "bogus"}}}},
	} {
		_, err := SessionUpdate{Kind: UpdateToolCall, ToolCall: &tc}.MarshalJSON()
		require.Error(t, err, "%+v", tc)
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range awkwardStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendJSONString(nil, s)))
	})
}

func BenchmarkToolCallUpdateMarshal(b *testing.B) {
	text := ""
	for range 20 {
		text += "    12\tline of text\n"
	}
	u := ToolCallUpdate{ToolCallID: "call_1", Status: StatusCompleted, Content: []ToolCallContent{TextContent(text)},
		Locations: []ToolCallLocation{{Path: "/tmp/x/f000_1.txt"}}}
	up := SessionUpdate{Kind: UpdateToolCallUpdate, ToolCallUpdate: &u}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := up.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}
