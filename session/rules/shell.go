package rules

import (
	"path"
	"strings"

	"github.com/acpd/acpd/session/shellline"
)

// shellPattern is a command pattern: literal text with '*' standing for
// any text. Decisions, from Claude Code's matching:
//   - without '*' the command must be exactly the text;
//   - `cmd:*` (only at the end) is `cmd *`, and a trailing " *" that is
//     the pattern's only wildcard matches the bare command too: `ls *`
//     matches `ls` and `ls -la`, not `lsof`;
//   - a trailing '*' matches any text;
//   - a '*' before the end stands only for words that are not options:
//     `git * main` matches `git diff main`, not `git -c
//     core.fsmonitor=./x diff main`, which Claude Code lets through and
//     only warns about at start-up.
type shellPattern struct {
	parts []string // the literal text around each '*'
	// prefix: the only wildcard is a trailing " *".
	prefix bool
}

// compileShell compiles a command pattern; warn says when a '*' before
// the end makes the rule weaker than it reads.
func compileShell(spec string) (*shellPattern, string) {
	s := spec
	if strings.HasSuffix(s, ":*") {
		s = strings.TrimSuffix(s, ":*") + " *"
	}
	p := &shellPattern{parts: strings.Split(s, "*")}
	p.prefix = len(p.parts) == 2 && strings.HasSuffix(p.parts[0], " ") && p.parts[1] == ""
	warn := ""
	if n := len(p.parts); n > 2 || n == 2 && p.parts[1] != "" {
		warn = "a '*' before the end of a command stands only for words that are not options"
	}
	return p, warn
}

// match reports whether a command, rendered by render, matches.
func (p *shellPattern) match(cmd string) bool {
	parts := p.parts
	switch {
	case len(parts) == 1:
		return cmd == parts[0]
	case p.prefix:
		base := parts[0][:len(parts[0])-1]
		return cmd == base || strings.HasPrefix(cmd, parts[0])
	}
	if !strings.HasPrefix(cmd, parts[0]) {
		return false
	}
	return wild(parts[1:], cmd, len(parts[0]))
}

// wild matches cmd[pos:] against "*" + parts[0] + "*" + parts[1] …: the
// text a '*' before the last part stands for holds no option word.
func wild(parts []string, cmd string, pos int) bool {
	if len(parts) == 1 && parts[0] == "" {
		return true // a trailing '*': anything
	}
	for i := pos; i <= len(cmd); i++ {
		if i > pos && cmd[i-1] == '-' && (i-1 == 0 || cmd[i-2] == ' ') {
			return false // the span holds an option: so would every longer one
		}
		if !strings.HasPrefix(cmd[i:], parts[0]) {
			continue
		}
		end := i + len(parts[0])
		if len(parts) == 1 {
			if end == len(cmd) {
				return true
			}
			continue
		}
		if wild(parts[1:], cmd, end) {
			return true
		}
	}
	return false
}

// render is a command's words as one line for matching: each word as it
// reads once its quotes are removed, a word holding blanks or quotes
// single-quoted, so `"go test" x` does not read as `go test x`.
func render(words []string) string {
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		if w == "" || strings.ContainsAny(w, " \t\n\r'\"") {
			b.WriteByte('\'')
			b.WriteString(strings.ReplaceAll(w, "'", `'\''`))
			b.WriteByte('\'')
			continue
		}
		b.WriteString(w)
	}
	return b.String()
}

// Limits past which a command line is never allowed by a rule (it asks):
// what a person reading the question cannot check either.
const (
	maxCommandLen      = 10000
	maxSegments        = 50
	maxNesting         = 4
	maxRestrictiveView = 256
)

// shells are the interpreters whose -c script is read as commands.
func isShell(name string) bool {
	switch path.Base(name) {
	case "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox":
		return true
	}
	return false
}

// inlineScript returns the script of `sh -c SCRIPT …` or `eval ARGS…`;
// false when cmd is neither.
func inlineScript(cmd []string) (string, bool) {
	if len(cmd) < 2 {
		return "", false
	}
	if cmd[0] == "eval" {
		return strings.Join(cmd[1:], " "), true
	}
	if !isShell(cmd[0]) {
		return "", false
	}
	args := cmd[1:]
	if path.Base(cmd[0]) == "busybox" {
		if len(args) < 2 || !isShell(args[0]) || args[0] == "busybox" {
			return "", false
		}
		args = args[1:]
	}
	for i, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			return "", false // a script file or stdin: not inline
		}
		if strings.HasPrefix(a, "--") {
			continue
		}
		if strings.Contains(a, "c") && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// dynamic reports text whose meaning is decided when the line runs: an
// expansion or a substitution.
func dynamic(s string) bool { return strings.ContainsAny(s, "$`") }

// eachCommand calls visit with every command a deny or ask rule must
// see in a simple command's words: the command without its assignments,
// by its base name when it was named by a path, what wrappers run (sudo,
// env, xargs, timeout, …), find's -exec commands and the commands of an
// inline script (sh -c, eval). It stops when visit returns true and
// reports whether it did.
func eachCommand(words []string, depth int, n *int, visit func(cmd []string) bool) bool {
	if depth > maxNesting || *n > maxRestrictiveView {
		return false
	}
	*n++
	_, cmd := shellline.Segment{Words: words}.Command()
	if len(cmd) == 0 {
		return false
	}
	if visit(cmd) {
		return true
	}
	if strings.Contains(cmd[0], "/") {
		base := append([]string{path.Base(cmd[0])}, cmd[1:]...)
		if visit(base) {
			return true
		}
		cmd = base
	}
	if inner, ok := shellline.Unwrap(cmd); ok {
		if eachCommand(inner, depth+1, n, visit) {
			return true
		}
	} else if shellline.IsWrapper(cmd[0]) {
		// Options this package does not know: every later word that is
		// not an option may be the command it runs. Looking at too many
		// costs a deny rule nothing but a needless refusal.
		for i := 1; i < len(cmd); i++ {
			if !strings.HasPrefix(cmd[i], "-") && eachCommand(cmd[i:], depth+1, n, visit) {
				return true
			}
		}
	}
	if cmd[0] == "find" {
		for i := 1; i < len(cmd); i++ {
			switch cmd[i] {
			case "-exec", "-execdir", "-ok", "-okdir":
				j := i + 1
				for j < len(cmd) && cmd[j] != ";" && cmd[j] != "+" {
					j++
				}
				if eachCommand(cmd[i+1:j], depth+1, n, visit) {
					return true
				}
				i = j
			}
		}
	}
	if script, ok := inlineScript(cmd); ok {
		for _, s := range shellline.Parse(script).Segments {
			if eachCommand(s.Words, depth+1, n, visit) {
				return true
			}
		}
	}
	return false
}

// fileReaders are commands whose operands are files they read: a Read
// deny rule refuses them on those files, as Claude Code does for its
// recognised file commands. Arbitrary programs are not followed.
func fileReader(name string) bool {
	switch path.Base(name) {
	case "cat", "head", "tail", "less", "more", "tac", "nl", "strings", "base64", "xxd", "od", "source", ".":
		return true
	}
	return false
}

// shellFiles are the files a command line reads and writes that a path
// rule judges: redirect targets (writes), redirect sources and the
// operands of the file readers (reads), as written.
func shellFiles(line *shellline.Line) (reads, writes []string, cd bool) {
	var walk func(segs []shellline.Segment, depth int)
	walk = func(segs []shellline.Segment, depth int) {
		for _, s := range segs {
			writes = append(writes, s.Targets...)
			reads = append(reads, s.Inputs...)
			_, cmd := s.Command()
			if len(cmd) == 0 {
				continue
			}
			switch cmd[0] {
			case "cd", "pushd", "popd":
				cd = true
			}
			if fileReader(cmd[0]) {
				for _, a := range cmd[1:] {
					if !strings.HasPrefix(a, "-") {
						reads = append(reads, a)
					}
				}
			}
			if script, ok := inlineScript(cmd); ok && depth < maxNesting {
				walk(shellline.Parse(script).Segments, depth+1)
			}
		}
	}
	walk(line.Segments, 0)
	return reads, writes, cd
}

// CommandRule is the shell rule that allows a command root (its words, as
// an "always allow" question names it: `npm test`) with any arguments:
// `Bash(npm test:*)`. Assignments that only change how output looks are
// left out, as the rules look past them. "" when no rule can spell the
// root (it holds a '*', which a rule reads as a wildcard).
func CommandRule(root []string) string {
	for len(root) > 0 && strings.Contains(root[0], "=") && shellline.HarmlessAssignment(root[0]) {
		root = root[1:]
	}
	s := render(root)
	if s == "" || strings.Contains(s, "*") {
		return ""
	}
	return "Bash(" + s + ":*)"
}
