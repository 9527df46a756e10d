package httptransport

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// refParse is the routing parse done with encoding/json, the reference the
// scanner must agree with on every valid JSON object.
func refParse(line []byte) (message, bool) {
	// Keys match exactly, as acp.Conn's map decoding does (a struct would
	// match "Id" too).
	var env map[string]json.RawMessage
	if t := bytes.TrimSpace(line); len(t) == 0 || t[0] != '{' || json.Unmarshal(line, &env) != nil {
		return message{}, false // null decodes, but is no message
	}
	sid := func(raw json.RawMessage) string {
		var v map[string]json.RawMessage
		if json.Unmarshal(raw, &v) != nil {
			return ""
		}
		var s string
		if json.Unmarshal(v["sessionId"], &s) != nil {
			return ""
		}
		return s
	}
	m := message{id: string(env["id"])}
	if meth, ok := env["method"]; ok {
		m.hasMethod = true
		_ = json.Unmarshal(meth, &m.method)
		m.sessionID = sid(env["params"])
	} else {
		m.resultSID = sid(env["result"])
		e, ok := env["error"]
		m.isError = ok && string(e) != "null"
	}
	return m, true
}

var parseSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"a}\"{"}]}}`,
	`{"jsonrpc":"2.0","id":"x\"y","result":{"sessionId":"s\u00e9","modes":{"sessionId":"inner"}}}`,
	`{"id":null,"error":{"code":-32600,"message":"m"}}`,
	`{"method":null,"params":[1,{"sessionId":"no"}]}`,
	`{"method":"m","params":{"sessionId":7},"id":-12}`,
	`{"method":"a","method":"b","params":{"sessionId":"1","sessionId":"2"}}`,
	` { "id" : 3 , "result" : null , "error" : null } `,
	`{"\u0069d":5,"result":{}}`,
	`{}`, `[]`, `"s"`, `{"a":[[[{"b":"]}"}]]],"id":true}`,
}

func TestParseMessageMatchesReference(t *testing.T) {
	for _, s := range parseSeeds {
		got, err := parseMessage([]byte(s))
		want, ok := refParse([]byte(s))
		require.Equal(t, ok, err == nil, s)
		if ok {
			// The reference keeps raw ids as written; compare on compact input.
			require.Equal(t, want, got, s)
		}
	}
}

// FuzzParseMessage: on any valid compact JSON the scanner agrees with
// encoding/json; on anything else it returns without panicking.
func FuzzParseMessage(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseMessage([]byte(s)) // must not panic
		if !json.Valid([]byte(s)) {
			return
		}
		line, cerr := compactLine([]byte(s))
		if cerr != nil {
			t.Fatal(cerr)
		}
		line = line[:len(line)-1]
		got, err := parseMessage(line)
		want, ok := refParse(line)
		if ok != (err == nil) {
			t.Fatalf("ok=%v err=%v for %q", ok, err, line)
		}
		if ok && want != got {
			t.Fatalf("%q: got %+v want %+v", line, got, want)
		}
	})
}
