package tools

import (
	"path"
	"strings"
)

// shellSegment is one simple command of a shell line: its words (quotes
// removed) and what the parser saw around it.
type shellSegment struct {
	words      []string
	writeRedir bool // '>' or '>>' to something other than /dev/null or an fd
	subst      bool // $(…), `…` or <(…): content the classifier cannot see
}

// parseShell splits a command line into simple commands at ;, &&, ||, |, &,
// newlines and parentheses, honouring quotes and backslashes. It is a
// classifier's view of sh, not a full parser: anything it cannot follow is
// reported through subst so the caller treats the line as unknown.
func parseShell(line string) []shellSegment {
	var (
		segs     []shellSegment
		cur      shellSegment
		word     strings.Builder
		inWord   bool
		redirect bool     // the next word is a '>' target
		pending  []string // here-doc delimiters awaiting their bodies
	)
	endWord := func() {
		if !inWord {
			return
		}
		w := word.String()
		word.Reset()
		inWord = false
		if redirect {
			redirect = false
			if w != "/dev/null" && !strings.HasPrefix(w, "&") {
				cur.writeRedir = true
			}
			return
		}
		cur.words = append(cur.words, w)
	}
	endSeg := func() {
		endWord()
		if redirect { // '>' with no target word
			cur.writeRedir = true
			redirect = false
		}
		if len(cur.words) > 0 || cur.writeRedir || cur.subst {
			segs = append(segs, cur)
		}
		cur = shellSegment{}
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
		case ch == '\'':
			inWord = true
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				word.WriteString(line[i+1:])
				cur.subst = true // unterminated quote
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
					cur.subst = true
					word.WriteByte(line[i])
				default:
					word.WriteByte(line[i])
				}
			}
			if i >= len(line) {
				cur.subst = true
			}
		case ch == '`' || (ch == '$' && i+1 < len(line) && line[i+1] == '('):
			cur.subst = true
			inWord = true
			word.WriteByte(ch)
		case (ch == '<' || ch == '>') && i+1 < len(line) && line[i+1] == '(':
			cur.subst = true // process substitution
			endWord()
		case ch == '>':
			// A preceding fd number ("2>") belongs to the redirect, not the command.
			if inWord && isDigits(word.String()) {
				word.Reset()
				inWord = false
			}
			endWord()
			if i+1 < len(line) && (line[i+1] == '>' || line[i+1] == '|') {
				i++
			}
			if i+1 < len(line) && line[i+1] == '&' {
				i++ // >&2, 2>&1: duplicates a descriptor
				for i+1 < len(line) && (isDigit(line[i+1]) || line[i+1] == '-') {
					i++
				}
				break
			}
			redirect = true
		case ch == '<':
			endWord()
			heredoc := strings.HasPrefix(line[i:], "<<") && !strings.HasPrefix(line[i:], "<<<")
			for i+1 < len(line) && (line[i+1] == '<' || line[i+1] == '-') {
				i++
			}
			// The input file or here-doc word is an argument of the redirect.
			j := i + 1
			for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
				j++
			}
			k := j
			for k < len(line) && !strings.ContainsRune(" \t\n;&|()<>", rune(line[k])) {
				k++
			}
			if heredoc {
				delim := strings.Trim(line[j:k], `'"\`)
				if delim == "" {
					cur.subst = true // not a here-doc sh would accept
				} else {
					pending = append(pending, delim)
				}
			}
			i = k - 1
		case ch == '\n' && len(pending) > 0:
			endSeg()
			// Skip here-document bodies: they are data, not commands.
			for _, delim := range pending {
				found := false
				for !found && i+1 < len(line) {
					end := strings.IndexByte(line[i+1:], '\n')
					var l string
					if end < 0 {
						l, i = line[i+1:], len(line)
					} else {
						l, i = line[i+1:i+1+end], i+1+end
					}
					found = strings.TrimLeft(l, "\t") == delim
				}
				if !found {
					// An unterminated body: do not guess what sh makes of it.
					segs = append(segs, shellSegment{subst: true})
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
	return segs
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

// commandWords strips leading VAR=value assignments.
func commandWords(words []string) []string {
	for len(words) > 0 {
		w := words[0]
		eq := strings.IndexByte(w, '=')
		if eq <= 0 || strings.ContainsAny(w[:eq], "/-.") {
			break
		}
		words = words[1:]
	}
	return words
}

// subcommandTools take a subcommand that belongs in the "always allow"
// label: "npm test" is not "npm publish".
var subcommandTools = map[string]bool{
	"git": true, "npm": true, "pnpm": true, "yarn": true, "bun": true, "go": true, "cargo": true,
	"docker": true, "kubectl": true, "pip": true, "pip3": true, "uv": true, "make": true,
	"gh": true, "dotnet": true, "mvn": true, "gradle": true, "poetry": true, "deno": true,
}

// commandRoots returns the command root of every simple command of line
// ("npm test", "ls", …), deduplicated, in order. It is the label an
// "always allow" for run_shell_command covers.
func commandRoots(line string) []string {
	var roots []string
	seen := map[string]bool{}
	for _, s := range parseShell(line) {
		w := commandWords(s.words)
		if len(w) == 0 {
			continue
		}
		root := path.Base(w[0])
		if subcommandTools[root] {
			for _, a := range w[1:] {
				if strings.HasPrefix(a, "-") {
					break
				}
				root += " " + a
				break
			}
		}
		if !seen[root] {
			seen[root] = true
			roots = append(roots, root)
		}
	}
	return roots
}

// classifyShell decides what plan mode does with a command line: every
// simple command read-only → ShellReadOnly; any that writes → ShellWrite;
// otherwise ShellUnknown.
func classifyShell(line string) ShellClass {
	segs := parseShell(line)
	if len(segs) == 0 {
		return ShellUnknown
	}
	class := ShellReadOnly
	for _, s := range segs {
		c := classifySegment(s)
		if c == ShellWrite {
			return ShellWrite
		}
		if c == ShellUnknown {
			class = ShellUnknown
		}
	}
	return class
}

var readOnlyCommands = map[string]bool{
	"ls": true, "cat": true, "head": true, "tail": true, "wc": true, "pwd": true, "echo": true, "printf": true,
	"which": true, "whereis": true, "type": true, "file": true, "stat": true, "du": true, "df": true, "tree": true,
	"uniq": true, "cut": true, "diff": true, "cmp": true, "date": true, "whoami": true, "id": true,
	"uname": true, "hostname": true, "basename": true, "dirname": true, "realpath": true, "readlink": true,
	"true": true, "false": true, "test": true, "[": true, "grep": true, "egrep": true, "fgrep": true, "rg": true,
	"ag": true, "less": true, "more": true, "nl": true, "od": true, "hexdump": true, "xxd": true, "md5sum": true,
	"sha1sum": true, "sha256sum": true, "printenv": true, "jq": true, "column": true, "tr": true, "seq": true,
	"comm": true, "ps": true, "pgrep": true, "cd": true, "sleep": true, "lsof": true, "stty": true, "tac": true,
	"fold": true, "fmt": true, "expand": true, "strings": true, "sha512sum": true, "cksum": true, "uptime": true,
}

var writeCommands = map[string]bool{
	"rm": true, "rmdir": true, "mv": true, "cp": true, "mkdir": true, "touch": true, "chmod": true, "chown": true,
	"chgrp": true, "ln": true, "dd": true, "tee": true, "truncate": true, "install": true, "shred": true,
	"unlink": true, "kill": true, "pkill": true, "killall": true, "sudo": true, "su": true, "doas": true,
	"patch": true, "wget": true, "mkfifo": true, "mknod": true, "rsync": true, "scp": true, "reboot": true,
	"shutdown": true, "apt": true, "apt-get": true, "yum": true, "dnf": true, "apk": true, "brew": true,
	"mkfs": true, "mount": true, "umount": true, "crontab": true, "useradd": true, "passwd": true,
}

var gitReadOnly = map[string]bool{
	"status": true, "diff": true, "log": true, "show": true, "rev-parse": true, "ls-files": true, "ls-tree": true,
	"blame": true, "grep": true, "describe": true, "shortlog": true, "cat-file": true, "whatchanged": true,
	"rev-list": true, "merge-base": true, "show-ref": true, "ls-remote": true, "help": true, "version": true,
}

var gitWrite = map[string]bool{
	"commit": true, "push": true, "add": true, "rm": true, "mv": true, "reset": true, "checkout": true,
	"switch": true, "restore": true, "merge": true, "rebase": true, "pull": true, "fetch": true, "clean": true,
	"cherry-pick": true, "revert": true, "init": true, "clone": true, "am": true, "apply": true, "gc": true,
	"prune": true, "submodule": true, "worktree": true, "notes": true, "filter-branch": true, "update-ref": true,
}

func classifySegment(s shellSegment) ShellClass {
	if s.writeRedir {
		return ShellWrite
	}
	w := commandWords(s.words)
	if len(w) == 0 {
		if s.subst {
			return ShellUnknown
		}
		return ShellReadOnly
	}
	c := classifyWords(w)
	if c == ShellReadOnly && s.subst {
		return ShellUnknown
	}
	return c
}

func classifyWords(w []string) ShellClass {
	name := path.Base(w[0])
	args := w[1:]
	switch name {
	case "git":
		return classifyGit(args)
	case "find":
		for _, a := range args {
			switch a {
			case "-delete", "-fprint", "-fprint0", "-fprintf", "-fls":
				return ShellWrite
			case "-exec", "-execdir", "-ok", "-okdir":
				return ShellUnknown
			}
		}
		return ShellReadOnly
	case "sed":
		for _, a := range args {
			if a == "-i" || strings.HasPrefix(a, "-i") || strings.HasPrefix(a, "--in-place") {
				return ShellWrite
			}
		}
		return ShellReadOnly
	case "sort":
		for _, a := range args {
			if a == "-o" || strings.HasPrefix(a, "--output") {
				return ShellWrite
			}
		}
		return ShellReadOnly
	case "env":
		rest := commandWords(args)
		for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return ShellReadOnly
		}
		return classifyWords(rest)
	case "xargs", "nice", "time", "timeout", "nohup", "command":
		rest := args
		for len(rest) > 0 && (strings.HasPrefix(rest[0], "-") || (name == "timeout" && isDuration(rest[0]))) {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return ShellReadOnly
		}
		return classifyWords(rest)
	case "npm", "pnpm", "yarn":
		if len(args) > 0 {
			switch args[0] {
			case "ls", "list", "view", "outdated", "why", "help", "--version", "-v":
				return ShellReadOnly
			case "install", "i", "add", "uninstall", "remove", "rm", "publish", "ci", "update", "upgrade", "link", "unlink":
				return ShellWrite
			}
		}
		return ShellUnknown
	case "go":
		if len(args) > 0 {
			switch args[0] {
			case "version", "env", "list", "doc":
				if args[0] == "env" && len(args) > 1 && strings.HasPrefix(args[1], "-w") {
					return ShellWrite
				}
				return ShellReadOnly
			case "get", "install", "mod":
				return ShellWrite
			}
		}
		return ShellUnknown
	}
	if readOnlyCommands[name] {
		return ShellReadOnly
	}
	if writeCommands[name] {
		return ShellWrite
	}
	return ShellUnknown
}

func isDuration(s string) bool {
	s = strings.TrimRight(s, "smhd")
	return isDigits(strings.Replace(s, ".", "", 1))
}

func classifyGit(args []string) ShellClass {
	// Global options before the subcommand.
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if args[0] == "-C" || args[0] == "-c" {
			if len(args) < 2 {
				return ShellUnknown
			}
			args = args[1:]
		}
		args = args[1:]
	}
	if len(args) == 0 {
		return ShellReadOnly
	}
	sub, rest := args[0], args[1:]
	positional := func() bool {
		for _, a := range rest {
			if !strings.HasPrefix(a, "-") {
				return true
			}
		}
		return false
	}
	hasFlag := func(flags ...string) bool {
		for _, a := range rest {
			for _, f := range flags {
				if a == f || strings.HasPrefix(a, f+"=") {
					return true
				}
			}
		}
		return false
	}
	switch {
	case gitReadOnly[sub]:
		if sub == "diff" && hasFlag("--output") {
			return ShellWrite
		}
		return ShellReadOnly
	case gitWrite[sub]:
		return ShellWrite
	}
	switch sub {
	case "branch":
		if hasFlag("-d", "-D", "-m", "-M", "-c", "-C", "--delete", "--move", "--copy", "--set-upstream-to", "-u", "--unset-upstream", "-f", "--force") {
			return ShellWrite
		}
		if positional() && !hasFlag("--list", "-l", "--contains", "--merged", "--no-merged", "--points-at") {
			return ShellWrite
		}
		return ShellReadOnly
	case "tag":
		if positional() && !hasFlag("-l", "--list", "--contains", "--points-at") || hasFlag("-d", "--delete", "-a", "-s", "-f") {
			return ShellWrite
		}
		return ShellReadOnly
	case "stash":
		if len(rest) > 0 && (rest[0] == "list" || rest[0] == "show") {
			return ShellReadOnly
		}
		return ShellWrite
	case "remote":
		if len(rest) == 0 || (len(rest) == 1 && rest[0] == "-v") || (len(rest) > 0 && (rest[0] == "show" || rest[0] == "get-url")) {
			return ShellReadOnly
		}
		return ShellWrite
	case "config":
		if hasFlag("--get", "--get-all", "--list", "-l", "--get-regexp") {
			return ShellReadOnly
		}
		return ShellWrite
	case "reflog":
		if len(rest) == 0 || rest[0] == "show" {
			return ShellReadOnly
		}
		return ShellWrite
	}
	return ShellUnknown
}
