// Command badserver is a hand-written stdio MCP server for the session/mcp
// tests of what a broken server does to the client. It answers initialize
// and tools/list properly, then misbehaves in tools/call as the called tool
// says: bad JSON, a line past the client's size limit, dying mid-call, never
// answering. Its "ask" tool first sends the client requests of its own
// (ping, roots/list, sampling) and returns what came back.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
)

type msg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

var out = bufio.NewWriter(os.Stdout)

func send(v any) {
	b, _ := json.Marshal(v)
	out.Write(b)
	out.WriteByte('\n')
	out.Flush()
}

func reply(id json.RawMessage, result any) {
	send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func main() {
	muteInit := flag.Bool("mute-initialize", false, "never answer initialize")
	flag.Parse()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	var asked []string // what the client answered to our requests
	next := 0
	pending := map[string]string{}
	var askID json.RawMessage
	for in.Scan() {
		var m msg
		if err := json.Unmarshal(in.Bytes(), &m); err != nil {
			fmt.Fprintln(os.Stderr, "badserver: bad line:", err)
			continue
		}
		if m.Method == "" {
			// An answer to one of our requests.
			method := pending[string(m.ID)]
			if m.Error != nil {
				asked = append(asked, method+" error "+string(m.Error))
			} else {
				asked = append(asked, method+" "+string(m.Result))
			}
			if len(asked) == len(pending) {
				reply(askID, map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Join(asked, "\n")}}})
			}
			continue
		}
		switch m.Method {
		case "initialize":
			if *muteInit {
				continue
			}
			reply(m.ID, map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "badserver", "version": "0"}})
		case "tools/list":
			var list []any
			for _, name := range []string{"ok", "badjson", "huge", "die", "mute", "ask", "notjsonrpc"} {
				list = append(list, map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}})
			}
			reply(m.ID, map[string]any{"tools": list})
		case "tools/call":
			var p struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(m.Params, &p)
			switch p.Name {
			case "ok":
				// A notification first: the client must not mistake it for the answer.
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
				reply(m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "fine"}}})
			case "badjson":
				out.WriteString(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{` + "\n")
				out.Flush()
			case "notjsonrpc":
				out.WriteString("starting up...\n")
				out.Flush()
			case "huge":
				out.WriteString(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"`)
				out.WriteString(strings.Repeat("x", 17<<20))
				out.WriteString("\"}]}}\n")
				out.Flush()
			case "die":
				os.Exit(7)
			case "mute":
			case "ask":
				askID = m.ID
				for _, method := range []string{"ping", "roots/list", "sampling/createMessage"} {
					next++
					id := fmt.Sprintf("%q", fmt.Sprintf("s%d", next))
					pending[id] = method
					send(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": map[string]any{}})
				}
			}
		case "notifications/cancelled":
			fmt.Fprintln(os.Stderr, "badserver: cancelled", string(m.Params))
		}
	}
}
