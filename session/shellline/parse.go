// Package shellline reads a shell command line the way acpd decides about
// it: Parse splits it into simple commands, Classify says whether plan mode
// may run it without asking, AlwaysLabel names what an "always allow" of it
// covers. Plan mode, "always allow", the permission rules and acpd guard
// read command lines through it, so they cannot disagree about what a line
// runs. The parsing is mvdan.cc/sh's; what the classifier cannot follow
// (a substitution, a line sh would refuse) is reported (Segment.Hidden,
// Line.Opaque), never guessed.
package shellline

import (
	"path"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
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

// Parse reads a command line as sh does, with mvdan.cc/sh's parser (bash's
// grammar, a superset of what sh -c accepts), and lists its simple
// commands: those of pipelines, lists, compound commands and function
// bodies, and those inside command and process substitutions, so that
// their roots show. A segment holding a substitution, ANSI-C quoting or
// a here-document that expands one is Hidden (the classifier cannot see
// what runs), and the line is Opaque. A line the parser refuses (an
// unterminated quote or here-document, a redirect with no target, …) is
// Opaque too; its unread text is split crudely at the separators into
// Hidden segments, so that a deny rule still sees the commands it names.
func Parse(line string) (out Line) {
	p := &parser{src: line}
	read := 0
	defer func() {
		// The parser reads untrusted text: should it ever panic, the line
		// is one it could not read, not the end of the daemon.
		if recover() != nil {
			p.unparsed(line[min(read, len(line)):])
			out = p.out
		}
	}()
	failed := false
	// Every statement is consumed, also after an error: leaving the
	// iteration early makes v3.14.1's iterator yield again and panic.
	for s, err := range syntax.NewParser(syntax.Variant(syntax.LangBash)).StmtsSeq(strings.NewReader(line)) {
		if err != nil || failed || s == nil {
			failed = true // a statement that comes with an error is incomplete
			continue
		}
		p.stmt(s)
		read = max(read, int(s.End().Offset()))
	}
	if failed {
		p.unparsed(line[min(read, len(line)):])
	}
	return p.out
}

// parser turns the syntax tree of src into segments.
type parser struct {
	src string
	out Line
}

func (p *parser) stmts(ss []*syntax.Stmt) {
	for _, s := range ss {
		p.stmt(s)
	}
}

// stmt adds the segments of one statement: a simple command's own, or
// those of the commands a compound one holds (then its own segment has only
// the compound's redirects), followed by those of the substitutions in its
// words.
func (p *parser) stmt(s *syntax.Stmt) {
	var (
		seg   Segment
		inner []*syntax.Stmt
	)
	// own looks into a node of this statement for substitutions.
	own := func(n syntax.Node) {
		syntax.Walk(n, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.CmdSubst:
				seg.Hidden = true
				inner = append(inner, n.Stmts...)
				return false
			case *syntax.ProcSubst:
				seg.Hidden = true
				inner = append(inner, n.Stmts...)
				return false
			case *syntax.SglQuoted:
				// $'…': the text sh sees is decided by its escapes.
				seg.Hidden = seg.Hidden || n.Dollar
			case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.LetClause, *syntax.CStyleLoop:
				// bash evaluates a variable's value as arithmetic, and
				// an array subscript in it runs a command substitution:
				// x='a[$(cmd)]'; echo $((x)).
				seg.Hidden = true
			case *syntax.ParamExp:
				// ${a[i]}: the subscript is arithmetic, as above.
				seg.Hidden = seg.Hidden || n.Index != nil
			}
			return true
		})
	}
	switch c := s.Cmd.(type) {
	case nil: // redirects alone
	case *syntax.CallExpr:
		for _, a := range c.Assigns {
			seg.Words = append(seg.Words, p.assign(a))
			own(a)
		}
		for _, w := range c.Args {
			seg.Words = append(seg.Words, p.word(w))
			own(w)
		}
	case *syntax.DeclClause:
		seg.Words = append(seg.Words, c.Variant.Value)
		for _, a := range c.Args {
			seg.Words = append(seg.Words, p.assign(a))
			own(a)
		}
	case *syntax.BinaryCmd:
		p.stmt(c.X)
		p.stmt(c.Y)
	case *syntax.Block:
		p.stmts(c.Stmts)
	case *syntax.Subshell:
		p.stmts(c.Stmts)
	case *syntax.IfClause:
		for ic := c; ic != nil; ic = ic.Else {
			p.stmts(ic.Cond)
			p.stmts(ic.Then)
		}
	case *syntax.WhileClause:
		p.stmts(c.Cond)
		p.stmts(c.Do)
	case *syntax.ForClause:
		own(c.Loop)
		p.stmts(c.Do)
	case *syntax.CaseClause:
		own(c.Word)
		for _, it := range c.Items {
			for _, w := range it.Patterns {
				own(w)
			}
			p.stmts(it.Stmts)
		}
	case *syntax.FuncDecl:
		// What runs when the function is called.
		p.stmt(c.Body)
	case *syntax.TimeClause:
		if c.Stmt != nil {
			p.stmt(c.Stmt)
		}
	case *syntax.CoprocClause:
		if c.Name != nil {
			own(c.Name)
		}
		p.stmt(c.Stmt)
	default:
		// [[ … ]], (( … )), let: a command the classifier does not
		// know, its words as written.
		seg.Words = strings.Fields(p.text(c))
		own(c)
	}
	for _, r := range s.Redirs {
		own(r)
		switch r.Op {
		case syntax.RdrIn:
			seg.Inputs = append(seg.Inputs, p.word(r.Word))
		case syntax.DplIn, syntax.DplOut:
			// <&2, >&1, >&-: a descriptor duplicated or closed; >&file
			// sends both streams to the file.
			if w := p.word(r.Word); !isFdWord(w) {
				if r.Op == syntax.DplIn {
					seg.Inputs = append(seg.Inputs, w)
				} else {
					p.write(&seg, w)
				}
			}
		case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
			// Data, not a file; a substitution in it was found above.
		default: // >, >>, >|, &>, &>>, <> and the like: opened for writing
			p.write(&seg, p.word(r.Word))
		}
	}
	p.add(seg)
	p.stmts(inner)
}

// write records a redirect that writes target.
func (p *parser) write(seg *Segment, target string) {
	if target != "/dev/null" {
		seg.WriteRedirect = true
		seg.Targets = append(seg.Targets, target)
	}
}

func (p *parser) add(s Segment) {
	if s.Hidden || s.WriteRedirect {
		p.out.Opaque = true
	}
	if len(s.Words) > 0 || s.WriteRedirect || s.Hidden || len(s.Inputs) > 0 {
		p.out.Segments = append(p.out.Segments, s)
	}
}

// unparsed reads, crudely, the text the parser refused: each part between
// separators is a Hidden segment of its blank-separated words (quote
// characters dropped), writing when it holds a '>'. sh refuses such a line
// too, or runs only what came before; the segments only let a deny rule
// see what the text names.
func (p *parser) unparsed(rest string) {
	p.out.Opaque = true
	n := len(p.out.Segments)
	for _, part := range strings.FieldsFunc(rest, func(r rune) bool { return strings.ContainsRune(";&|()`\n", r) }) {
		words := strings.FieldsFunc(part, func(r rune) bool { return strings.ContainsRune(" \t\r<>'\"", r) })
		redirect := strings.Contains(part, ">")
		if len(words) > 0 || redirect {
			p.out.Segments = append(p.out.Segments, Segment{Words: words, Hidden: true, WriteRedirect: redirect})
		}
	}
	if len(p.out.Segments) == n {
		p.out.Segments = append(p.out.Segments, Segment{Hidden: true})
	}
}

// text is a node as written.
func (p *parser) text(n syntax.Node) string {
	start, end := int(n.Pos().Offset()), int(n.End().Offset())
	if start < 0 || end > len(p.src) || start > end {
		return ""
	}
	return p.src[start:end]
}

// word is a word with its quotes removed; expansions and substitutions
// stay as written ($HOME, $(date)), which the deciders treat as unknown.
func (p *parser) word(w *syntax.Word) string {
	var b strings.Builder
	p.parts(&b, w.Parts, false)
	return b.String()
}

func (p *parser) parts(b *strings.Builder, parts []syntax.WordPart, quoted bool) {
	for _, part := range parts {
		switch x := part.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(x.Value, quoted))
		case *syntax.SglQuoted:
			if x.Dollar {
				b.WriteString(p.text(x))
			} else {
				b.WriteString(x.Value)
			}
		case *syntax.DblQuoted:
			p.parts(b, x.Parts, true)
		default:
			b.WriteString(p.text(x))
		}
	}
}

// assign is an assignment as a word: NAME=value, quotes removed.
func (p *parser) assign(a *syntax.Assign) string {
	switch {
	case a.Naked && a.Value != nil:
		return p.word(a.Value)
	case a.Naked:
		return a.Name.Value
	case a.Index != nil || a.Array != nil:
		return p.text(a)
	}
	op := "="
	if a.Append {
		op = "+="
	}
	v := ""
	if a.Value != nil {
		v = p.word(a.Value)
	}
	return a.Name.Value + op + v
}

// unescape removes the backslashes sh removes: before any character
// outside quotes, before $ ` " \ and newline inside double quotes; an
// escaped newline joins two lines.
func unescape(s string, quoted bool) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (!quoted || strings.IndexByte("$`\"\\\n", s[i+1]) >= 0) {
			i++
			if s[i] != '\n' {
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isFdWord reports a descriptor word: digits, or '-', or digits then '-'
// (moved).
func isFdWord(s string) bool {
	d := strings.TrimSuffix(s, "-")
	return s == "-" || isDigits(d)
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
