// Package shellline reads a shell command line the way acpd decides about
// it: Parse splits it into simple commands, Classify says whether plan mode
// may run it without asking, AlwaysLabel names what an "always allow" of it
// covers. Plan mode, "always allow", the permission rules and acpd guard
// read command lines through it, so they cannot disagree about what a line
// runs. It is a classifier's view of sh, not a full parser: whatever it
// cannot follow is reported (Segment.Hidden, Line.Opaque), never guessed.
package shellline

import (
	"path"
	"strings"
	"sync"
)

// Segment is one simple command of a shell line: its words (quotes
// removed) and what the parser saw around it.
type Segment struct {
	Words []string
	// WriteRedirect: '>' or '>>' to something other than /dev/null or an fd.
	WriteRedirect bool
	// Hidden: $(…), `…` or <(…), content the classifier cannot see.
	Hidden bool
	// Targets are the files the segment's '>' and '>>' redirects write,
	// as written (quotes removed); a '>' without a target word adds none
	// but still sets WriteRedirect. Inputs are the files its '<'
	// redirects read. A permission rule judges them as writes and reads.
	Targets, Inputs []string
}

// Command splits the segment's words into its leading VAR=value
// assignments and the command with its arguments, dropping the reserved
// words of compound commands (if, then, do, {, …). A segment that names no
// command (for x in …, a lone fi) has no command words.
func (s Segment) Command() (assigns, cmd []string) { return splitCommand(s.Words) }

// Line is a parsed command line.
type Line struct {
	Segments []Segment
	// Opaque says that the line holds something its command roots do not
	// show: a command substitution (`…`, $(…), quoted or not, or inside an
	// unquoted here-document), a process substitution, ANSI-C quoting, an
	// unterminated quote or here-document, a redirect into a file, a
	// command named by an expansion. An "always allow" never covers it.
	Opaque bool
}

// metaChars end an unquoted word.
const metaChars = " \t\r\n;&|()<>"

// hereDoc is a here-document whose body follows the next newline.
type hereDoc struct {
	delim  string
	dash   bool // <<-: leading tabs are stripped from body lines
	quoted bool // the delimiter was quoted: the body is not expanded
}

// Parse splits a command line into simple commands at ;, &&, ||, |, &,
// newlines and parentheses, honouring quotes and backslashes. It is a
// classifier's view of sh, not a full parser: anything it cannot follow is
// reported through Hidden (so the caller treats the command as unknown) and
// Opaque (so no "always allow" covers the line). The text of a command
// substitution is parsed as commands of its own, so their roots show.
func Parse(line string) Line {
	var (
		out      Line
		cur      Segment
		word     strings.Builder
		inWord   bool
		redirect bool // the next word is a '>' target
		input    bool // the next word is a '<' source or a here-string
		// hereString: the input word is a here-string's data, not a file.
		hereString bool
		pending    []hereDoc
	)
	hidden := func() { cur.Hidden, out.Opaque = true, true }
	endWord := func() {
		if !inWord {
			return
		}
		w := word.String()
		word.Reset()
		inWord = false
		switch {
		case redirect:
			redirect = false
			if w != "/dev/null" {
				cur.WriteRedirect = true
				cur.Targets = append(cur.Targets, w)
			}
		case input:
			input = false
			if hereString {
				hereString = false
			} else {
				cur.Inputs = append(cur.Inputs, w)
			}
		default:
			cur.Words = append(cur.Words, w)
		}
	}
	endSeg := func() {
		endWord()
		if redirect { // '>' with no target word
			cur.WriteRedirect = true
			redirect = false
		}
		input, hereString = false, false
		if cur.WriteRedirect {
			out.Opaque = true
		}
		if len(cur.Words) > 0 || cur.WriteRedirect || cur.Hidden {
			out.Segments = append(out.Segments, cur)
		}
		cur = Segment{}
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\\':
			inWord = true
			if i+1 < len(line) {
				i++
				if line[i] != '\n' {
					word.WriteByte(line[i])
				}
			}
		case ch == '$' && i+1 < len(line) && line[i+1] == '\'':
			// $'…' (bash's ANSI-C quoting) ends at a quote its own
			// escapes decide: not followed here.
			hidden()
			inWord = true
			word.WriteByte(ch)
		case ch == '\'':
			inWord = true
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				word.WriteString(line[i+1:])
				hidden() // unterminated quote
				i = len(line)
				break
			}
			word.WriteString(line[i+1 : i+1+j])
			i += j + 1
		case ch == '"':
			inWord = true
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				switch {
				case line[i] == '\\' && i+1 < len(line):
					i++
					word.WriteByte(line[i])
				case line[i] == '`' || (line[i] == '$' && i+1 < len(line) && line[i+1] == '('):
					hidden()
					word.WriteByte(line[i])
				default:
					word.WriteByte(line[i])
				}
			}
			if i >= len(line) {
				hidden() // unterminated quote
			}
		case ch == '`' || (ch == '$' && i+1 < len(line) && line[i+1] == '('):
			hidden()
			inWord = true
			word.WriteByte(ch)
		case (ch == '<' || ch == '>') && i+1 < len(line) && line[i+1] == '(':
			hidden() // process substitution
			endWord()
		case ch == '>' || (ch == '&' && i+1 < len(line) && line[i+1] == '>'):
			// A preceding fd number ("2>") belongs to the redirect, not the command.
			if inWord && isDigits(word.String()) {
				word.Reset()
				inWord = false
			}
			endWord()
			if ch == '&' {
				i++ // &> and &>>: both streams to a file
			}
			if i+1 < len(line) && (line[i+1] == '>' || line[i+1] == '|') {
				i++
			}
			if ch == '>' && i+1 < len(line) && line[i+1] == '&' && isFdWord(line[i+2:]) {
				i++ // >&2, 2>&1, >&-: duplicates or closes a descriptor
				for i+1 < len(line) && (isDigit(line[i+1]) || line[i+1] == '-') {
					i++
				}
				break
			}
			if ch == '>' && i+1 < len(line) && line[i+1] == '&' {
				i++ // >&file: both streams to a file
			}
			redirect = true
		case ch == '<':
			if inWord && isDigits(word.String()) {
				word.Reset()
				inWord = false
			}
			endWord()
			switch {
			case strings.HasPrefix(line[i:], "<<<"):
				i += 2
				input, hereString = true, true // a here-string: data, not an argument
			case strings.HasPrefix(line[i:], "<<"):
				h := hereDoc{dash: strings.HasPrefix(line[i:], "<<-")}
				i++
				if h.dash {
					i++
				}
				var ok bool
				h.delim, h.quoted, i, ok = hereDocWord(line, i+1)
				i--
				if !ok {
					hidden() // not a here-document sh would accept
				} else {
					pending = append(pending, h)
				}
			case strings.HasPrefix(line[i:], "<>"):
				i++
				redirect = true // opened for writing too
			case strings.HasPrefix(line[i:], "<&") && isFdWord(line[i+2:]):
				i++
				for i+1 < len(line) && (isDigit(line[i+1]) || line[i+1] == '-') {
					i++
				}
			default:
				input = true
			}
		case ch == '\n' && len(pending) > 0:
			endSeg()
			// Here-document bodies are data, not commands; an unquoted
			// delimiter's body is expanded, so a substitution in it runs.
			for _, h := range pending {
				found := false
				for !found && i+1 < len(line) {
					end := strings.IndexByte(line[i+1:], '\n')
					var l string
					if end < 0 {
						l, i = line[i+1:], len(line)
					} else {
						l, i = line[i+1:i+1+end], i+1+end
					}
					if h.dash {
						l = strings.TrimLeft(l, "\t")
					}
					found = l == h.delim
					if !found && !h.quoted && (strings.Contains(l, "$(") || strings.Contains(l, "`")) {
						out.Segments = append(out.Segments, Segment{Hidden: true})
						out.Opaque = true
					}
				}
				if !found {
					// An unterminated body: do not guess what sh makes of it.
					out.Segments = append(out.Segments, Segment{Hidden: true})
					out.Opaque = true
				}
			}
			pending = nil
		case ch == ';' || ch == '&' || ch == '|' || ch == '\n' || ch == '(' || ch == ')':
			endSeg()
		case ch == ' ' || ch == '\t' || ch == '\r':
			endWord()
		case ch == '#' && !inWord:
			for i < len(line) && line[i] != '\n' {
				i++
			}
			i--
		default:
			inWord = true
			word.WriteByte(ch)
		}
	}
	endSeg()
	if len(pending) > 0 {
		// A here-document with no body at all.
		out.Segments = append(out.Segments, Segment{Hidden: true})
		out.Opaque = true
	}
	return out
}

// hereDocWord reads the delimiter word of a here-document starting at
// line[i] (after blanks): the word with its quotes removed, whether any
// part of it was quoted (then the body is not expanded), the index after
// it, and false when there is no acceptable word.
func hereDocWord(line string, i int) (delim string, quoted bool, next int, ok bool) {
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	start := i
	var d strings.Builder
	for i < len(line) && !strings.ContainsRune(metaChars, rune(line[i])) {
		switch c := line[i]; c {
		case '\'':
			quoted = true
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return "", true, len(line), false
			}
			d.WriteString(line[i+1 : i+1+j])
			i += j + 2
		case '"':
			quoted = true
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("$`\"\\\n", line[i+1]) >= 0 {
					i++
				}
				d.WriteByte(line[i])
			}
			if i >= len(line) {
				return "", true, len(line), false
			}
			i++
		case '\\':
			quoted = true
			if i+1 < len(line) {
				d.WriteByte(line[i+1])
			}
			i += 2
		case '$', '`':
			// An expansion in a delimiter: sh does not expand it, and
			// nothing here guesses what was meant.
			return "", quoted, i, false
		default:
			d.WriteByte(c)
			i++
		}
	}
	if i == start {
		return "", false, i, false
	}
	return d.String(), quoted, min(i, len(line)), true
}

// isFdWord reports whether s starts with a descriptor word (digits or
// '-') that ends where a word ends: "2", "-", "1;".
func isFdWord(s string) bool {
	n := 0
	for n < len(s) && (isDigit(s[n]) || s[n] == '-') {
		n++
	}
	return n > 0 && (n == len(s) || strings.IndexByte(metaChars, s[n]) >= 0)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// isAssignment reports a VAR=value word.
func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		c := w[i]
		if !(c == '_' || isDigit(c) && i > 0 || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// isPrefixKeyword: the word may stand before a command without changing
// which command runs; isCloserKeyword: it ends a compound command;
// isHeaderKeyword: it starts a segment that names no command (the word
// list of for/select, the subject of case, a function's name). Switches,
// not maps: a package-level map is built by package initialization, on
// every start of acpd, shell command or not.
func isPrefixKeyword(w string) bool {
	switch w {
	case "if", "then", "else", "elif", "do", "while", "until", "{", "!", "time":
		return true
	}
	return false
}

func isCloserKeyword(w string) bool {
	switch w {
	case "fi", "done", "esac", "}":
		return true
	}
	return false
}

func isHeaderKeyword(w string) bool {
	switch w {
	case "for", "select", "case", "function":
		return true
	}
	return false
}

// splitCommand splits a segment's words into its leading VAR=value
// assignments and the command with its arguments, dropping the reserved
// words of compound commands (if, then, do, {, …). A segment that names
// no command (for x in …, a lone fi) has no command words.
func splitCommand(words []string) (assigns, cmd []string) {
	for len(words) > 0 {
		switch w := words[0]; {
		case isPrefixKeyword(w):
			words = words[1:]
		case isCloserKeyword(w):
			words = words[1:]
		case isHeaderKeyword(w) && len(assigns) == 0:
			return nil, nil
		case isAssignment(w):
			assigns = append(assigns, w)
			words = words[1:]
		default:
			return assigns, words
		}
	}
	return assigns, nil
}

// subcommandTools take a subcommand that belongs in the "always allow"
// label: "npm test" is not "npm publish".
var subcommandTools = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"git": true, "npm": true, "pnpm": true, "yarn": true, "bun": true, "go": true, "cargo": true,
		"docker": true, "kubectl": true, "pip": true, "pip3": true, "uv": true, "make": true,
		"gh": true, "dotnet": true, "mvn": true, "gradle": true, "poetry": true, "deno": true,
	}
})

// wrapperCommands run the command that follows them: the label names both
// ("xargs rm", not "xargs").
var wrapperCommands = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"env": true, "command": true, "builtin": true, "exec": true, "nice": true, "nohup": true,
		"time": true, "timeout": true, "xargs": true, "sudo": true, "doas": true, "stdbuf": true,
		"setsid": true, "ionice": true, "chrt": true, "taskset": true, "flock": true, "watch": true,
		"strace": true, "ltrace": true, "unbuffer": true, "busybox": true,
	}
})

// AlwaysLabel is what an "always allow" for the command line covers: the
// command root of every simple command, deduplicated, in order, joined by
// ", " ("npm test, git push"); false when no "always" may cover the line
// (Line.Opaque, a wrapper given options, a command word that is an
// expansion or a pattern, or no command at all). A root keeps the command
// as written, its path and its VAR=value prefixes included: "./ls" is not
// "ls", and "LD_PRELOAD=x ls" is not "ls".
func AlwaysLabel(line string) (string, bool) { return Parse(line).AlwaysLabel() }

// AlwaysLabel is the package function's answer for a parsed line.
func (p Line) AlwaysLabel() (string, bool) {
	roots, ok := p.AlwaysRoots()
	if !ok {
		return "", false
	}
	labels := make([]string, len(roots))
	for i, r := range roots {
		labels[i] = strings.Join(r, " ")
	}
	return strings.Join(labels, ", "), true
}

// AlwaysRoots are the command roots AlwaysLabel names, each as its words
// (a persisted "always allow" rule quotes them itself); false when no
// "always" may cover the line.
func (p Line) AlwaysRoots() ([][]string, bool) {
	if p.Opaque {
		return nil, false
	}
	var roots [][]string
	seen := map[string]bool{}
	for _, s := range p.Segments {
		if s.Hidden || s.WriteRedirect {
			return nil, false
		}
		root, ok := segmentRoot(s.Words)
		if !ok {
			return nil, false
		}
		if key := strings.Join(root, " "); len(root) > 0 && !seen[key] {
			seen[key] = true
			roots = append(roots, root)
		}
	}
	if len(roots) == 0 {
		return nil, false
	}
	return roots, true
}

// segmentRoot is the root of one simple command, as its words; none for
// a segment that names none; false when it cannot be labelled faithfully.
func segmentRoot(words []string) ([]string, bool) {
	assigns, w := splitCommand(words)
	if len(w) == 0 {
		return nil, true
	}
	if strings.ContainsAny(w[0], "$`*?[~") {
		return nil, false // the command is decided when the line runs
	}
	root := []string{w[0]}
	name := path.Base(w[0])
	switch {
	case wrapperCommands()[name]:
		rest := w[1:]
		if name == "env" {
			for len(rest) > 0 && isAssignment(rest[0]) {
				root = append(root, rest[0])
				rest = rest[1:]
			}
		}
		if name == "timeout" && len(rest) > 0 && isDuration(rest[0]) {
			root = append(root, rest[0])
			rest = rest[1:]
		}
		if len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			return nil, false // an option may take the next word: no faithful label
		}
		if len(rest) > 0 {
			inner, ok := segmentRoot(rest)
			if !ok || len(inner) == 0 {
				return nil, false
			}
			root = append(root, inner...)
		}
	case subcommandTools()[name]:
		if len(w) > 1 && !strings.HasPrefix(w[1], "-") {
			root = append(root, w[1])
		}
	}
	if len(assigns) > 0 {
		root = append(append([]string(nil), assigns...), root...)
	}
	return root, true
}

func isDuration(s string) bool {
	s = strings.TrimRight(s, "smhd")
	return isDigits(strings.Replace(s, ".", "", 1))
}
