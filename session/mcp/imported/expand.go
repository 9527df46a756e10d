package imported

import (
	"fmt"
	"strings"
)

// Environment variables in imported entries.
//
// Decision: each agent's own syntax, in the fields Claude Code documents
// (command, args, env values, url, headers) and Gemini's cwd. Claude Code's
// files take ${VAR} and ${VAR:-default} (a bare $VAR stays as written, as
// Claude Code leaves it); Gemini CLI's take $VAR and ${VAR} (and the
// default form too, which costs nothing). Values come from acpd's own
// environment when the session starts. A variable that is unset and has
// no default keeps the server off, with a problem naming the variable:
// starting it with the literal text (what Claude Code was seen to do)
// would send "${API_KEY}" as a credential to the server.

// lookupFunc finds an environment variable.
type lookupFunc func(string) (string, bool)

// Expand returns s with the variables its fields name replaced, or an
// error naming the first unset one.
func Expand(s Server, lookup lookupFunc) (Server, error) {
	var missing []string
	x := func(v string) string {
		out, miss := expand(v, s.Agent == Gemini, lookup)
		missing = append(missing, miss...)
		return out
	}
	s.Command = x(s.Command)
	s.Args = append([]string(nil), s.Args...)
	for i := range s.Args {
		s.Args[i] = x(s.Args[i])
	}
	s.Env = append(s.Env[:0:0], s.Env...)
	for i := range s.Env {
		s.Env[i].Value = x(s.Env[i].Value)
	}
	s.URL = x(s.URL)
	s.Headers = append(s.Headers[:0:0], s.Headers...)
	for i := range s.Headers {
		s.Headers[i].Value = x(s.Headers[i].Value)
	}
	s.Dir = x(s.Dir)
	if len(missing) > 0 {
		return s, fmt.Errorf("mcp server %q (%s): environment variable %s is not set and has no default", s.Name, s.File, missing[0])
	}
	return s, nil
}

// vars are the variables an entry's fields name.
func vars(s Server) []string {
	var out []string
	none := func(string) (string, bool) { return "", false }
	add := func(v string) {
		_, miss := expand(v, s.Agent == Gemini, none)
		for _, m := range miss {
			if !contains(out, m) {
				out = append(out, m)
			}
		}
		// Variables with a default are named too.
		for rest := v; ; {
			i := strings.Index(rest, "${")
			if i < 0 {
				break
			}
			j := strings.IndexByte(rest[i:], '}')
			if j < 0 {
				break
			}
			if name, _, ok := strings.Cut(rest[i+2:i+j], ":-"); ok && validName(name) && !contains(out, name) {
				out = append(out, name)
			}
			rest = rest[i+j:]
		}
	}
	add(s.Command)
	for _, a := range s.Args {
		add(a)
	}
	for _, e := range s.Env {
		add(e.Value)
	}
	add(s.URL)
	for _, h := range s.Headers {
		add(h.Value)
	}
	add(s.Dir)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// expand replaces ${VAR} and ${VAR:-default} (and $VAR when bare) in v; it
// returns the names of the unset variables without a default, which are
// left as written.
func expand(v string, bare bool, lookup lookupFunc) (string, []string) {
	if !strings.Contains(v, "$") {
		return v, nil
	}
	var b strings.Builder
	var missing []string
	for i := 0; i < len(v); {
		c := v[i]
		if c != '$' || i+1 >= len(v) {
			b.WriteByte(c)
			i++
			continue
		}
		if v[i+1] == '{' {
			end := strings.IndexByte(v[i+2:], '}')
			if end < 0 {
				b.WriteString(v[i:])
				break
			}
			inner := v[i+2 : i+2+end]
			name, def, hasDef := strings.Cut(inner, ":-")
			if !validName(name) {
				b.WriteString(v[i : i+3+end])
				i += 3 + end
				continue
			}
			if val, ok := lookup(name); ok && (val != "" || !hasDef) {
				b.WriteString(val)
			} else if hasDef {
				b.WriteString(def)
			} else {
				missing = append(missing, name)
				b.WriteString(v[i : i+3+end])
			}
			i += 3 + end
			continue
		}
		if !bare {
			b.WriteByte(c)
			i++
			continue
		}
		j := i + 1
		for j < len(v) && (isAlpha(v[j]) || v[j] == '_' || j > i+1 && isDigit(v[j])) {
			j++
		}
		if j == i+1 {
			b.WriteByte(c)
			i++
			continue
		}
		name := v[i+1 : j]
		if val, ok := lookup(name); ok {
			b.WriteString(val)
		} else {
			missing = append(missing, name)
			b.WriteString(v[i:j])
		}
		i = j
	}
	return b.String(), missing
}

func validName(n string) bool {
	if n == "" || isDigit(n[0]) {
		return false
	}
	for i := 0; i < len(n); i++ {
		if !isAlpha(n[i]) && !isDigit(n[i]) && n[i] != '_' {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
