package acp

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

// FuzzReadLine feeds arbitrary stdin bytes through the line stream: it must
// never panic, and everything it hands to jsonrpc2 must decode.
func FuzzReadLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n",
		`{"jsonrpc":"2.0","id":-1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}` + "\n{}\n[]\n",
		`{"jsonrpc":"2.0","id":"acpd-1","result":{"outcome":{"outcome":"cancelled"}}}` + "\n",
		`{"jsonrpc":"2.0","id":"acpd-2","error":{"code":"x"}}` + "\n",
		`{"jsonrpc":"2.0","id":1.5,"method":"x"}` + "\n{not json\n\n",
		"\xff\xfe\n" + `{"id":null,"method":"m","jsonrpc":"2.0"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := NewConn(bytes.NewReader(data), io.Discard, Options{MaxLineBytes: 256})
		s := c.stream
		_ = s.Close() // ReadObject returns at EOF instead of waiting
		for range 1000 {
			var v json.RawMessage
			if err := s.ReadObject(&v); err != nil {
				return
			}
			if !json.Valid(v) {
				t.Fatalf("stream produced invalid JSON %q", v)
			}
		}
	})
}

// FuzzDecodeParams decodes arbitrary params for every agent method: it must
// never panic, and every failure must be a -32602 *Error.
func FuzzDecodeParams(f *testing.F) {
	methods := []string{
		MethodInitialize, MethodAuthenticate, MethodLogout, MethodSessionNew, MethodSessionLoad,
		MethodSessionResume, MethodSessionList, MethodSessionClose, MethodSessionDelete,
		MethodSessionSetMode, MethodSessionSetConfigOption, MethodSessionPrompt, MethodSessionCancel,
		MethodCancelRequest,
	}
	seeds := []string{
		`{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}`,
		`{"cwd":"/w","mcpServers":[{"name":"a","command":"/a","args":[],"env":[]},{"type":"http","name":"h","url":"u","headers":[]}]}`,
		`{"sessionId":"s","prompt":[{"type":"text","text":"x"},{"type":"resource","resource":{"uri":"u","blob":"AA"}}]}`,
		`{"sessionId":"s","configId":"c","type":"boolean","value":true}`,
		`{"requestId":"a"}`, `null`, `[]`, `{"SESSIONID":1}`,
	}
	for i := range methods {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, mi uint8, data []byte) {
		method := methods[int(mi)%len(methods)]
		var p Params
		switch method {
		case MethodInitialize:
			p = new(InitializeRequest)
		case MethodAuthenticate:
			p = new(AuthenticateRequest)
		case MethodLogout:
			p = new(LogoutRequest)
		case MethodSessionNew:
			p = new(NewSessionRequest)
		case MethodSessionLoad:
			p = new(LoadSessionRequest)
		case MethodSessionResume:
			p = new(ResumeSessionRequest)
		case MethodSessionList:
			p = new(ListSessionsRequest)
		case MethodSessionSetMode:
			p = new(SetSessionModeRequest)
		case MethodSessionSetConfigOption:
			p = new(SetSessionConfigOptionRequest)
		case MethodSessionPrompt:
			p = new(PromptRequest)
		case MethodCancelRequest:
			p = new(CancelRequestNotification)
		default:
			p = new(SessionIDRequest)
		}
		err := DecodeParams(method, data, p)
		if err == nil {
			return
		}
		e, ok := err.(*Error)
		if !ok || e.Code != CodeInvalidParams {
			t.Fatalf("%s: error %T %v is not -32602", method, err, err)
		}
	})
}
