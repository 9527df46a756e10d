package tck

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	acptest.RemoveAcpd()
	os.Exit(code)
}

// check is one of the kit's tests: the requirements it decides and how.
type check struct {
	name string
	ids  []string
	run  func(t *testing.T, e *env, r *report)
}

// TestConformance runs every check against acpd with the scripted model,
// each on an acpd of its own, then judges the run as acp-tck does: no
// MANDATORY requirement failed or untested, no advertised CAPABILITY
// failed. acpd also wants every ADVISORY requirement and its own to pass.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built acpd")
	}
	rep := newReport()
	t.Run("checks", func(t *testing.T) {
		for _, c := range checks {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				defer func() {
					if t.Failed() {
						for _, id := range c.ids {
							rep.record(id, fail, "the check %s failed (see its log)", c.name)
						}
					}
				}()
				c.run(t, newEnv(t), rep)
			})
		}
	})
	rep.finish()
	table, conformant, wanting := rep.verdict()
	t.Log("\n" + table)
	if !conformant {
		t.Errorf("acp-tck v1 would find acpd NOT CONFORMANT: %v", wanting)
	} else if len(wanting) > 0 {
		t.Errorf("conformant, but these requirements are not met: %v", wanting)
	}
}

// TestRequirementsChecked: every requirement is decided by a check, and a
// check names only requirements that exist (the kit's registry rule).
func TestRequirementsChecked(t *testing.T) {
	known := map[string]bool{}
	for _, q := range requirements {
		require.False(t, known[q.id], "%s twice", q.id)
		known[q.id] = true
	}
	covered := map[string]bool{"ACP-TRANSPORT-001": true, "ACP-TRANSPORT-002": true, "ACP-JSONRPC-002": true,
		"ACP-SCHEMA-001": true, "ACP-SCHEMA-002": true, "ACP-ERROR-001": true, "ACP-STDERR-001": true} // judged over every line
	for _, c := range checks {
		for _, id := range c.ids {
			require.True(t, known[id], "check %s names %s, not a requirement", c.name, id)
			covered[id] = true
		}
	}
	for _, q := range requirements {
		require.True(t, covered[q.id], "no check decides %s", q.id)
	}
	mandatoryCount := 0
	for _, q := range requirements {
		if q.tier == mandatory {
			mandatoryCount++
		}
	}
	require.Equal(t, 21, mandatoryCount, "the kit's v1 suite has 21 mandatory requirements")
}

// result decodes a response's result (failing the check on an error).
func result(t *testing.T, x exchange) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(x.resp.msg.Result, &m), "not a result object: %s", x.resp.raw)
	return m
}

// errorCode is a response's error code, 0 without an error.
func errorCode(x exchange) int {
	if x.resp.msg.Error == nil {
		return 0
	}
	return x.resp.msg.Error.Code
}

func stopReason(x exchange) string { return jsonString(x.resp.msg.Result, "stopReason") }

// updatesOf are the session/update lines of session among ls.
func updatesOf(ls []line, session string) []line {
	var out []line
	for _, l := range ls {
		if l.isUpdate() && l.sessionID() == session {
			out = append(out, l)
		}
	}
	return out
}

func kinds(ls []line) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.updateKind())
	}
	return out
}

var checks = []check{
	{"initialize", []string{"ACP-INIT-001", "ACP-INIT-002", "ACP-INIT-004", "ACP-JSONRPC-001", "ACP-AUTH-001", "ACP-AUTH-002", "ACP-AUTH-005"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		id := a.request("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, "tck-init")
		x := a.wait(id, nil)
		r.check("ACP-JSONRPC-001", string(x.resp.msg.ID) == `"tck-init"`, "string id came back as %s", x.resp.msg.ID)
		var res struct {
			ProtocolVersion *json.Number `json:"protocolVersion"`
			AgentInfo       *struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"agentInfo"`
			AuthMethods []map[string]any `json:"authMethods"`
		}
		require.NoError(t, json.Unmarshal(x.resp.msg.Result, &res), "initialize: %s", x.resp.raw)
		r.check("ACP-INIT-001", res.ProtocolVersion != nil && !strings.Contains(res.ProtocolVersion.String(), "."), "protocolVersion %v", res.ProtocolVersion)
		r.check("ACP-INIT-002", res.ProtocolVersion != nil && res.ProtocolVersion.String() == "1", "answered %v to 1", res.ProtocolVersion)
		r.check("ACP-INIT-004", res.AgentInfo != nil && res.AgentInfo.Name != "" && res.AgentInfo.Version != "", "agentInfo %v", res.AgentInfo)
		ids := map[string]bool{}
		unique, terminal := true, false
		for _, m := range res.AuthMethods {
			id, _ := m["id"].(string)
			unique = unique && !ids[id]
			ids[id] = true
			terminal = terminal || m["type"] == "terminal"
		}
		r.check("ACP-AUTH-001", unique, "duplicate authMethods ids: %v", res.AuthMethods)
		r.check("ACP-AUTH-002", !terminal, "a terminal auth method to a client without auth.terminal: %v", res.AuthMethods)
		if len(res.AuthMethods) > 0 {
			r.record("ACP-AUTH-005", skipped, "authMethods is not empty")
		} else {
			_, nx := a.newSession(e.cwd)
			r.check("ACP-AUTH-005", errorCode(nx) != -32000, "session/new refused for authentication")
		}
		// Integer ids come back as sent too.
		x = a.wait(a.request("session/list", map[string]any{}, 424242), nil)
		r.check("ACP-JSONRPC-001", string(x.resp.msg.ID) == "424242", "integer id came back as %s", x.resp.msg.ID)
	}},

	{"unsupported version", []string{"ACP-INIT-003"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		x := a.call("initialize", map[string]any{"protocolVersion": 65535, "clientCapabilities": map[string]any{},
			"info": map[string]any{"name": "acp-tck", "version": "0"}})
		var res struct {
			ProtocolVersion *json.Number `json:"protocolVersion"`
		}
		_ = json.Unmarshal(x.resp.msg.Result, &res)
		v := ""
		if res.ProtocolVersion != nil {
			v = res.ProtocolVersion.String()
		}
		// Not the version asked for, and at least what a v1 request gets
		// (acpd speaks only 1).
		r.check("ACP-INIT-003", v == "1", "answered %q to 65535: %s", v, x.resp.raw)
	}},

	{"sessions", []string{"ACP-SESSION-001", "ACP-SESSION-002", "ACPD-NEW-001", "ACP-MODES-001", "ACP-CONFIG-001", "ACP-CONFIG-003"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		a.initialize()
		s1, x1 := a.newSession(e.cwd)
		s2, x2 := a.newSession(e.cwd)
		r.check("ACP-SESSION-001", s1 != "", "no sessionId")
		r.check("ACP-SESSION-002", s1 != s2, "the same sessionId twice: %s", s1)
		// Each session's updates, before its own session/new response and
		// after it (the first session's may come while the second is
		// being made). Each gets its commands announced, after.
		before := append(updatesOf(x1.updates, s1), updatesOf(x2.updates, s2)...)
		rest := a.quiet(quietPeriod)
		after1 := append(updatesOf(x2.updates, s1), updatesOf(rest, s1)...)
		after2 := updatesOf(rest, s2)
		r.check("ACPD-NEW-001", len(before) == 0 && len(after1) > 0 && len(after2) > 0,
			"before the session/new responses: %v; after: %v and %v", kinds(before), kinds(after1), kinds(after2))
		res := result(t, x1)
		if modes, ok := res["modes"].(map[string]any); ok {
			cur, _ := modes["currentModeId"].(string)
			var offered []string
			for _, m := range modes["availableModes"].([]any) {
				offered = append(offered, m.(map[string]any)["id"].(string))
			}
			r.check("ACP-MODES-001", slices.Contains(offered, cur), "currentModeId %q not among %v", cur, offered)
		} else {
			r.record("ACP-MODES-001", skipped, "session/new returned no modes")
		}
		opts, _ := res["configOptions"].([]any)
		if len(opts) == 0 {
			r.record("ACP-CONFIG-001", skipped, "session/new returned no configOptions")
		}
		noBoolean := true
		for _, o := range opts {
			m := o.(map[string]any)
			switch m["type"] {
			case "boolean":
				noBoolean = false
				_, isBool := m["currentValue"].(bool)
				r.check("ACP-CONFIG-001", isBool, "boolean option %v", m["id"])
			case "select":
				var values []any
				for _, opt := range m["options"].([]any) {
					om := opt.(map[string]any)
					if g, ok := om["options"].([]any); ok { // a group
						for _, gv := range g {
							values = append(values, gv.(map[string]any)["value"])
						}
						continue
					}
					values = append(values, om["value"])
				}
				r.check("ACP-CONFIG-001", slices.Contains(values, m["currentValue"]), "option %v: currentValue %v not among %v", m["id"], m["currentValue"], values)
			}
		}
		r.check("ACP-CONFIG-003", noBoolean, "a boolean config option to a client that did not accept them")
	}},

	{"prompt", []string{"ACP-PROMPT-001", "ACP-PROMPT-002", "ACP-PROMPT-003", "ACP-META-001", "ACP-PROMPTCAP-001", "ACP-PROMPTCAP-002", "ACP-PROMPTCAP-003"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		init := a.initialize()
		caps, _ := init["agentCapabilities"].(map[string]any)
		pc, _ := caps["promptCapabilities"].(map[string]any)
		sid, _ := a.newSession(e.cwd)
		x := a.prompt(sid, "Say hello.", nil)
		r.check("ACP-PROMPT-001", stopReasons[stopReason(x)], "stopReason %q: %s", stopReason(x), x.resp.raw)
		ok := true
		for _, u := range x.updates {
			ok = ok && u.sessionID() == sid
		}
		r.check("ACP-PROMPT-002", ok && len(x.updates) > 0, "updates %v", kinds(x.updates))

		ask := func(id string, blocks ...map[string]any) {
			all := append([]any{map[string]any{"type": "text", "text": "Look at this."}}, toAny(blocks)...)
			x := a.wait(a.request("session/prompt", map[string]any{"sessionId": sid, "prompt": all}), nil)
			r.check(id, stopReasons[stopReason(x)], "stopReason %q: %s", stopReason(x), x.resp.raw)
		}
		ask("ACP-PROMPT-003", map[string]any{"type": "resource_link", "name": "notes.txt", "uri": "file://" + filepath.Join(e.cwd, "notes.txt")})
		x = a.wait(a.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "Traced."}},
			"_meta": map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}), nil)
		r.check("ACP-META-001", stopReasons[stopReason(x)], "stopReason %q: %s", stopReason(x), x.resp.raw)
		gate := func(id, capName string, block map[string]any) {
			if pc[capName] != true {
				r.record(id, skipped, "promptCapabilities.%s not advertised", capName)
				return
			}
			ask(id, block)
		}
		const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
		gate("ACP-PROMPTCAP-001", "image", map[string]any{"type": "image", "mimeType": "image/png", "data": png})
		gate("ACP-PROMPTCAP-002", "audio", map[string]any{"type": "audio", "mimeType": "audio/wav", "data": "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="})
		gate("ACP-PROMPTCAP-003", "embeddedContext", map[string]any{"type": "resource", "resource": map[string]any{
			"uri": "file://" + filepath.Join(e.cwd, "notes.txt"), "mimeType": "text/plain", "text": "hello\n"}})
	}},

	{"cancel", []string{"ACP-CANCEL-001", "ACP-CANCEL-002"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		a.initialize()
		sid, _ := a.newSession(e.cwd)
		sent := false
		x := a.prompt(sid, "TCK-SLEEP: run the long command", func(line) {
			if !sent {
				sent = true
				a.notify("session/cancel", map[string]any{"sessionId": sid})
			}
		})
		if !sent {
			r.record("ACP-CANCEL-001", skipped, "cancellation not exercised: the turn ended first")
			return
		}
		r.check("ACP-CANCEL-001", stopReason(x) == "cancelled", "stopReason %q: %s", stopReason(x), x.resp.raw)
		late := updatesOf(a.quiet(quietPeriod), sid)
		r.check("ACP-CANCEL-002", len(late) == 0, "updates after the cancelled turn's response: %v", kinds(late))
	}},

	{"load and resume", []string{"ACP-LOAD-001", "ACP-LOAD-002", "ACP-LOAD-003", "ACP-RESUME-001", "ACP-RESUME-002"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		init := a.initialize()
		sid, _ := a.newSession(e.cwd)
		a.prompt(sid, "Say hello.", nil)
		a.close()
		caps, _ := init["agentCapabilities"].(map[string]any)
		if caps["loadSession"] != true {
			r.record("ACP-LOAD-001", skipped, "loadSession not advertised")
		} else {
			b := start(t, e, r)
			b.initialize()
			x := b.call("session/load", map[string]any{"sessionId": sid, "cwd": e.cwd, "mcpServers": []any{}})
			r.check("ACP-LOAD-001", x.resp.msg.Error == nil && len(x.resp.msg.Result) > 0, "session/load: %s", x.resp.raw)
			r.check("ACP-LOAD-003", strings.HasPrefix(strings.TrimSpace(string(x.resp.msg.Result)), "{"), "result %s", x.resp.msg.Result)
			r.check("ACP-LOAD-002", len(updatesOf(x.updates, sid)) > 0, "no replay before the response")
			late := updatesOf(b.quiet(quietPeriod), sid)
			r.check("ACP-LOAD-002", len(late) == 0, "updates after the session/load response: %v", kinds(late))
			b.close()
		}
		sc, _ := caps["sessionCapabilities"].(map[string]any)
		if sc["resume"] == nil {
			r.record("ACP-RESUME-001", skipped, "resume not advertised")
			return
		}
		c := start(t, e, r)
		c.initialize()
		x := c.call("session/resume", map[string]any{"sessionId": sid, "cwd": e.cwd})
		r.check("ACP-RESUME-001", x.resp.msg.Error == nil && strings.HasPrefix(string(x.resp.msg.Result), "{"), "session/resume: %s", x.resp.raw)
		var history []string
		for _, u := range updatesOf(x.updates, sid) {
			if k := u.updateKind(); strings.HasSuffix(k, "_chunk") {
				history = append(history, k)
			}
		}
		r.check("ACP-RESUME-002", len(history) == 0, "history before the session/resume response: %v", history)
	}},

	{"list, delete, close", []string{"ACP-LIST-001", "ACP-LIST-002", "ACP-DELETE-001", "ACP-DELETE-002", "ACP-CLOSE-001", "ACP-CLOSE-002", "ACP-ADDDIRS-001"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		init := a.initialize()
		caps, _ := init["agentCapabilities"].(map[string]any)
		sc, _ := caps["sessionCapabilities"].(map[string]any)
		sid, _ := a.newSession(e.cwd)
		a.prompt(sid, "Say hello.", nil)
		empty := func(x exchange) bool {
			return x.resp.msg.Error == nil && strings.TrimSpace(string(x.resp.msg.Result)) == "{}"
		}
		if sc["list"] == nil {
			r.record("ACP-LIST-001", skipped, "list not advertised")
		} else {
			x := a.call("session/list", map[string]any{})
			_, isList := result(t, x)["sessions"].([]any)
			r.check("ACP-LIST-001", isList, "session/list: %s", x.resp.raw)
			x = a.call("session/list", map[string]any{"cwd": filepath.Join(e.dir, "nobody-works-here")})
			list, isList := result(t, x)["sessions"].([]any)
			r.check("ACP-LIST-002", isList && len(list) == 0, "session/list of an unused cwd: %s", x.resp.raw)
		}
		if sc["additionalDirectories"] == nil {
			r.record("ACP-ADDDIRS-001", skipped, "additionalDirectories not advertised")
		} else {
			extra := filepath.Join(e.dir, "extra")
			require.NoError(t, os.MkdirAll(extra, 0o755))
			x := a.call("session/new", map[string]any{"cwd": e.cwd, "mcpServers": []any{}, "additionalDirectories": []any{extra}})
			r.check("ACP-ADDDIRS-001", jsonString(x.resp.msg.Result, "sessionId") != "", "session/new: %s", x.resp.raw)
		}
		if sc["close"] == nil {
			r.record("ACP-CLOSE-001", skipped, "close not advertised")
		} else {
			other, _ := a.newSession(e.cwd)
			r.check("ACP-CLOSE-001", empty(a.call("session/close", map[string]any{"sessionId": other})), "session/close of an idle session")
			busy, _ := a.newSession(e.cwd)
			var closeID string
			x := a.prompt(busy, "TCK-SLEEP: run the long command", func(line) {
				if closeID == "" {
					closeID = a.request("session/close", map[string]any{"sessionId": busy})
				}
			})
			r.check("ACP-CLOSE-002", stopReason(x) == "cancelled", "the prompt ended %q after session/close: %s", stopReason(x), x.resp.raw)
			if closeID != "" {
				r.check("ACP-CLOSE-002", empty(a.wait(closeID, nil)), "session/close of a busy session failed")
			}
		}
		if sc["delete"] == nil {
			r.record("ACP-DELETE-001", skipped, "delete not advertised")
		} else {
			r.check("ACP-DELETE-001", empty(a.call("session/delete", map[string]any{"sessionId": sid})), "session/delete")
			x := a.call("session/delete", map[string]any{"sessionId": sid})
			r.check("ACP-DELETE-002", empty(x), "deleting it again: %s", x.resp.raw)
			x = a.call("session/delete", map[string]any{"sessionId": "TCKNEVERCREATED"})
			r.check("ACP-DELETE-002", empty(x), "deleting a session that never was: %s", x.resp.raw)
		}
	}},

	{"modes and config options", []string{"ACP-MODES-002", "ACP-CONFIG-002", "ACPD-SETMODEL-001"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		a.initialize()
		sid, nx := a.newSession(e.cwd)
		res := result(t, nx)
		modes := res["modes"].(map[string]any)
		cur := modes["currentModeId"].(string)
		var target string
		for _, m := range modes["availableModes"].([]any) {
			if id := m.(map[string]any)["id"].(string); id != cur {
				target = id
				break
			}
		}
		x := a.call("session/set_mode", map[string]any{"sessionId": sid, "modeId": target})
		r.check("ACP-MODES-002", x.resp.msg.Error == nil, "session/set_mode %s: %s", target, x.resp.raw)

		var before []string
		for _, o := range res["configOptions"].([]any) {
			before = append(before, o.(map[string]any)["id"].(string))
		}
		x = a.call("session/set_config_option", map[string]any{"sessionId": sid, "configId": "mode", "value": "plan"})
		var after []string
		changed := false
		for _, o := range result(t, x)["configOptions"].([]any) {
			m := o.(map[string]any)
			after = append(after, m["id"].(string))
			changed = changed || (m["id"] == "mode" && m["currentValue"] == "plan")
		}
		r.check("ACP-CONFIG-002", changed && slices.Equal(before, after), "options %v then %v, mode changed %v", before, after, changed)

		// The legacy selector sets the model config option.
		x = a.call("session/set_model", map[string]any{"sessionId": sid, "modelId": "demo-large"})
		r.check("ACPD-SETMODEL-001", x.resp.msg.Error == nil && strings.TrimSpace(string(x.resp.msg.Result)) == "{}", "session/set_model: %s", x.resp.raw)
		x = a.call("session/set_config_option", map[string]any{"sessionId": sid, "configId": "mode", "value": "default"})
		model := ""
		for _, o := range result(t, x)["configOptions"].([]any) {
			if m := o.(map[string]any); m["id"] == "model" {
				model, _ = m["currentValue"].(string)
			}
		}
		r.check("ACPD-SETMODEL-001", model == "demo-large", "the model option after session/set_model: %q", model)
		x = a.call("session/set_model", map[string]any{"sessionId": sid, "modelId": "no-such-model"})
		r.check("ACPD-SETMODEL-001", errorCode(x) == -32602, "an unknown model: %s", x.resp.raw)
	}},

	{"client capabilities", []string{"ACP-CLIENTCAP-001", "ACP-CLIENTCAP-002", "ACP-CLIENTCAP-003"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		a.initialize()
		sid, _ := a.newSession(e.cwd)
		x := a.prompt(sid, "TCK-TOOLS: read notes.txt, run a command, ask me", nil)
		require.True(t, stopReasons[stopReason(x)], "the turn: %s", x.resp.raw)
		var fs, term, elicit []string
		for _, c := range x.calls {
			switch m := c.msg.Method; {
			case strings.HasPrefix(m, "fs/"):
				fs = append(fs, m)
			case strings.HasPrefix(m, "terminal/"):
				term = append(term, m)
			case m == "elicitation/create":
				elicit = append(elicit, m)
			}
		}
		tools := 0
		for _, u := range x.updates {
			if u.updateKind() == "tool_call" {
				tools++
			}
		}
		require.Equal(t, 3, tools, "the turn read a file, ran a command and asked a question: %v", kinds(x.updates))
		r.check("ACP-CLIENTCAP-001", len(fs) == 0, "called %v", fs)
		r.check("ACP-CLIENTCAP-002", len(term) == 0, "called %v", term)
		r.check("ACP-CLIENTCAP-003", len(elicit) == 0, "called %v", elicit)
	}},

	{"authentication", []string{"ACP-AUTH-003", "ACP-AUTH-004"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		init := a.initialize()
		methods, _ := init["authMethods"].([]any)
		if len(methods) == 0 {
			r.record("ACP-AUTH-003", skipped, "no authMethods")
		} else {
			// As with --auth-method: the first advertised method.
			id := methods[0].(map[string]any)["id"].(string)
			x := a.call("authenticate", map[string]any{"methodId": id})
			if x.resp.msg.Error != nil {
				r.record("ACP-AUTH-003", skipped, "authenticate %s failed: %s", id, x.resp.raw)
			} else {
				_, nx := a.newSession(e.cwd)
				r.check("ACP-AUTH-003", errorCode(nx) != -32000 && strings.HasPrefix(string(x.resp.msg.Result), "{"), "authenticate %s: %s", id, x.resp.raw)
			}
		}
		caps, _ := init["agentCapabilities"].(map[string]any)
		auth, _ := caps["auth"].(map[string]any)
		if auth["logout"] == nil {
			r.record("ACP-AUTH-004", skipped, "logout not advertised")
			return
		}
		// As with --allow-logout: acpd's logout revokes nothing of the
		// operator's.
		x := a.call("logout", map[string]any{})
		r.check("ACP-AUTH-004", x.resp.msg.Error == nil && strings.HasPrefix(string(x.resp.msg.Result), "{"), "logout: %s", x.resp.raw)
	}},

	{"json-rpc", []string{"ACP-JSONRPC-003", "ACP-JSONRPC-004", "ACP-JSONRPC-005", "ACP-EXT-001"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		a.initialize()
		a.notify("_tck/notification", map[string]any{"x": 1})
		a.notify("session/cancel", map[string]any{"sessionId": "TCKNOSUCHSESSION"})
		var replies []string
		for _, l := range a.quiet(quietPeriod) {
			if l.isResponse() {
				replies = append(replies, string(l.raw))
			}
		}
		r.check("ACP-JSONRPC-003", len(replies) == 0, "notifications answered: %v", replies)
		x := a.call("tck/does_not_exist", map[string]any{})
		r.check("ACP-JSONRPC-004", errorCode(x) == -32601, "an unknown method: %s", x.resp.raw)
		x = a.call("_tck/does_not_exist", map[string]any{})
		r.check("ACP-EXT-001", x.resp.msg.Error != nil || len(x.resp.msg.Result) > 0, "no response: %s", x.resp.raw)
		sid, _ := a.newSession(e.cwd)
		r.check("ACP-JSONRPC-005", sid != "", "session/new after the errors")
	}},

	{"informational", []string{"ACP-INFO-PARSE-001", "ACP-INFO-INVALIDREQ-001", "ACP-INFO-UNKNOWNSESSION-001"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		a.initialize()
		probe := func(id, sent string) {
			a.send(sent)
			got := "silent"
			for _, l := range a.quiet(quietPeriod) {
				if l.isResponse() {
					got = "replied " + string(l.raw)
				}
			}
			sid, _ := a.newSession(e.cwd)
			r.record(id, pass, "%s; connection after: usable (%s)", got, sid)
		}
		probe("ACP-INFO-PARSE-001", "this is not json")
		probe("ACP-INFO-INVALIDREQ-001", `{"foo":"bar"}`)
		x := a.wait(a.request("session/prompt", map[string]any{"sessionId": "TCKNOSUCHSESSION", "prompt": []any{map[string]any{"type": "text", "text": "hi"}}}), nil)
		r.record("ACP-INFO-UNKNOWNSESSION-001", pass, "error %d", errorCode(x))
	}},

	{"shutdown", []string{"ACP-SHUTDOWN-001"}, func(t *testing.T, e *env, r *report) {
		a := start(t, e, r)
		a.initialize()
		sid, _ := a.newSession(e.cwd)
		a.prompt(sid, "Say hello.", nil)
		a.mu.Lock()
		a.exited = true // this check ends the process itself
		a.mu.Unlock()
		require.NoError(t, a.stdin.Close())
		exited := make(chan error, 1)
		go func() { exited <- a.cmd.Wait() }()
		select {
		case err := <-exited:
			r.check("ACP-SHUTDOWN-001", err == nil, "exit: %v", err)
		case <-time.After(5 * time.Second):
			_ = a.cmd.Process.Kill()
			<-exited
			r.check("ACP-SHUTDOWN-001", false, "still running 5 s after stdin closed")
		}
		a.rc.Stop()
		r.stderrBytes(len(a.stderr.String()))
	}},
}

func toAny(ms []map[string]any) []any {
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}
