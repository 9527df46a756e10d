package docs

import (
	"regexp"
	"strconv"
	"strings"
)

// shellLangs are the fence tags whose blocks hold commands.
var shellLangs = map[string]bool{"sh": true, "shell": true, "bash": true, "console": true}

// command is one logical command line of a shell block (continuation lines
// joined, heredoc bodies left out).
type command struct {
	text string // as written, continuation lines joined
	line int    // 0-based line in the block where it starts
	last int    // 0-based line where it ends
}

var heredocRE = regexp.MustCompile(`<<-?\s*(?:'(\w+)'|"(\w+)"|(\w+))`)

// commands splits a shell block into its command lines. In a console block
// only the lines after a "$ " prompt are commands; the rest is output.
func commands(b block) []command {
	var out []command
	console := b.lang == "console"
	for i := 0; i < len(b.body); i++ {
		l := b.body[i]
		if console {
			c, ok := strings.CutPrefix(l, "$ ")
			if !ok {
				continue
			}
			l = c
		}
		c := command{text: l, line: i, last: i}
		for strings.HasSuffix(c.text, `\`) && c.last+1 < len(b.body) {
			c.last++
			c.text = strings.TrimSuffix(c.text, `\`) + " " + strings.TrimSpace(b.body[c.last])
		}
		i = c.last
		if m := heredocRE.FindStringSubmatch(c.text); m != nil {
			delim := m[1] + m[2] + m[3]
			for i+1 < len(b.body) {
				i++
				if strings.TrimSpace(b.body[i]) == delim {
					break
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// blankQuotes replaces the contents of quoted strings and the comment of a
// shell line with spaces, so that what is left is the line's syntax.
func blankQuotes(s string) string {
	r := []byte(s)
	var quote byte
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				if c == '\\' && quote == '"' && i+1 < len(r) {
					r[i] = ' '
					i++
				}
				r[i] = ' '
			}
		case c == '\\' && i+1 < len(r):
			i++
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || r[i-1] == ' ' || r[i-1] == '\t'):
			return string(r[:i])
		}
	}
	return string(r)
}

// acpdCallRE finds acpd in command position: at the start, after an
// operator, in a command substitution, after variable assignments. The
// first group is a path before the name (./acpd, /tmp/acpd).
var acpdCallRE = regexp.MustCompile("(?:^|[;&|(`]|\\$\\()\\s*(?:[A-Za-z_][A-Za-z0-9_]*=\\S*\\s+)*(\\S*/)?acpd(?:\\s|$|\\)|;)")

// acpdCalls reports how many times a command line runs acpd and the paths
// it gives before the name.
func acpdCalls(c command) (n int, paths []string) {
	for _, m := range acpdCallRE.FindAllStringSubmatch(blankQuotes(c.text), -1) {
		n++
		if m[1] != "" {
			paths = append(paths, m[1]+"acpd")
		}
	}
	return n, paths
}

var exitRE = regexp.MustCompile(`#\s*exit (\d+)\b`)

// expectedExit is the exit status a command line says it has, in a
// "# exit N" comment on its last line or the line after it; 0 otherwise.
func expectedExit(b block, c command) int {
	for _, i := range []int{c.last, c.last + 1} {
		if i >= len(b.body) {
			continue
		}
		l := b.body[i]
		if b.lang == "console" && i > c.last {
			continue // output, not a comment
		}
		if m := exitRE.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return 0
}

// shellWords splits a command into words the way a shell would for the
// simple commands the docs show: quotes group, backslashes escape.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
