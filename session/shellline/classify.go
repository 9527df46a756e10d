package shellline

import (
	"path"
	"strings"
	"sync"
)

// Class is what plan mode makes of a command line.
type Class int

const (
	Unknown  Class = iota // must confirm in plan mode
	ReadOnly              // allowed in plan mode
	Write                 // blocked in plan mode
)

// String names the class as transcripts and logs show it.
func (c Class) String() string {
	switch c {
	case ReadOnly:
		return "read-only"
	case Write:
		return "write"
	}
	return "unknown"
}

// Plan mode runs, without asking, the commands it classifies read-only.
// "Read-only" must therefore hold for every flag and argument the command
// is given, not only for its name: `sed -n '1e touch x'` runs a program,
// `uniq a b` and `xxd -r a b` write b, `git -c core.fsmonitor=… status`
// runs whatever the setting names. So each read-only command has an
// allowlist of the options it may take (and how many operands), and a
// command given anything else is unknown: plan mode asks. A command named
// by a path is read-only only from a system folder: ./ls is the
// workspace's program.

// Classify decides what plan mode does with a command line: every simple
// command read-only → ReadOnly; any that writes → Write; otherwise Unknown.
func Classify(line string) Class { return Parse(line).Class() }

// Class is Classify's answer for a parsed line.
func (p Line) Class() Class {
	if len(p.Segments) == 0 {
		return Unknown
	}
	class := ReadOnly
	for _, s := range p.Segments {
		c := classifySegment(s)
		if c == Write {
			return Write
		}
		if c == Unknown {
			class = Unknown
		}
	}
	return class
}

func classifySegment(s Segment) Class {
	if s.WriteRedirect {
		return Write
	}
	assigns, w := splitCommand(s.Words)
	if len(w) == 0 {
		if s.Hidden {
			return Unknown
		}
		return ReadOnly
	}
	for _, a := range assigns {
		if !harmlessAssignment(a) {
			// PATH=., LD_PRELOAD=…, GIT_CONFIG_*…: a variable can make
			// any command run something else.
			return worst(Unknown, classifyWords(w))
		}
	}
	c := classifyWords(w)
	if c == ReadOnly && s.Hidden {
		return Unknown
	}
	return c
}

// HarmlessAssignment reports a VAR=value that only changes how output
// looks: the locale, the time zone, the terminal's size and colours. A
// permission rule that allows a command sees past it, and past no other.
func HarmlessAssignment(a string) bool { return harmlessAssignment(a) }

func harmlessAssignment(a string) bool {
	name, _, _ := strings.Cut(a, "=")
	switch name {
	case "LANG", "LANGUAGE", "TZ", "COLUMNS", "LINES", "NO_COLOR", "CLICOLOR", "FORCE_COLOR", "TERM":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// worst is the stricter of two classes: a write beats unknown, unknown
// beats read-only.
func worst(a, b Class) Class {
	if a == Write || b == Write {
		return Write
	}
	if a == Unknown || b == Unknown {
		return Unknown
	}
	return ReadOnly
}

// The classifier's tables are built on first use (sync.OnceValue): as
// package-level map literals, package initialization would build them on
// every start of acpd, before the editor's initialize is answered, though
// most sessions classify no shell command at all.

// systemDirs hold the programs a path may name and still be the command
// its name says.
var systemDirs = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"/bin": true, "/usr/bin": true, "/usr/local/bin": true, "/sbin": true, "/usr/sbin": true,
		"/opt/homebrew/bin": true,
	}
})

// options is a command's allowlist: the options it may be given and how
// many operands. A short option takes no value unless listed in shortArg;
// a long option is written without its dashes, and one that takes a value
// (--name=v or --name v) is listed in longArg.
type options struct {
	short, shortArg string
	long, longArg   []string
	maxOperands     int // -1: any number
}

// check classifies args against the allowlist: read-only when every
// option is allowed and the operands are few enough, else unknown. It
// returns the operands too.
func (o options) check(args []string) (Class, []string) {
	var operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case a == "-" || !strings.HasPrefix(a, "-"):
			operands = append(operands, a)
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			switch {
			case contains(o.longArg, name):
				if !hasValue {
					i++
				}
			case contains(o.long, name) && !hasValue:
			default:
				return Unknown, nil
			}
		default:
			for j := 1; j < len(a); j++ {
				c := a[j]
				if strings.IndexByte(o.shortArg, c) >= 0 {
					if j == len(a)-1 {
						i++ // the value is the next word
					}
					break
				}
				if strings.IndexByte(o.short, c) < 0 && !(o.short == "*" && isFlagChar(c)) {
					return Unknown, nil
				}
			}
		}
	}
	if o.maxOperands >= 0 && len(operands) > o.maxOperands {
		return Unknown, nil
	}
	return ReadOnly, operands
}

func isFlagChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// anyArgs is the allowlist of a command no option or operand of which
// writes or runs anything: every short option, any operands. Long options
// are still listed where the command has one that writes.
var anyArgs = options{short: "*", maxOperands: -1}

// readOnlyCommands are the commands plan mode runs without asking, each
// with its allowlist; nil means any option and operand (the command has
// none that writes or runs a program).
var readOnlyCommands = sync.OnceValue(func() map[string]*options {
	return map[string]*options{
		"ls": nil, "cat": nil, "head": nil, "tail": nil, "wc": nil, "pwd": nil, "echo": nil, "printf": nil,
		"which": nil, "whereis": nil, "type": nil, "stat": nil, "du": nil, "df": nil, "cut": nil, "diff": nil,
		"cmp": nil, "whoami": nil, "id": nil, "uname": nil, "basename": nil, "dirname": nil, "realpath": nil,
		"readlink": nil, "true": nil, "false": nil, "test": nil, "[": nil, "grep": nil, "egrep": nil, "fgrep": nil,
		"ag": nil, "nl": nil, "od": nil, "hexdump": nil, "md5sum": nil, "sha1sum": nil, "sha256sum": nil,
		"sha512sum": nil, "cksum": nil, "printenv": nil, "jq": nil, "column": nil, "tr": nil, "seq": nil,
		"comm": nil, "ps": nil, "pgrep": nil, "cd": nil, "sleep": nil, "lsof": nil, "tac": nil, "fold": nil,
		"fmt": nil, "expand": nil, "strings": nil, "uptime": nil, "more": nil,
		// file -C compiles a magic file (writes it).
		"file": {short: "bcdEhiklLNnprsSvz0", shortArg: "efFmP", long: []string{"brief", "checking-printout", "debug", "dereference", "extension", "keep-going", "list", "mime", "mime-type", "mime-encoding", "no-buffer", "no-dereference", "no-pad", "no-sandbox", "preserve-date", "print0", "raw", "special-files", "uncompress", "uncompress-noreport", "version", "help", "apple"}, longArg: []string{"exclude", "exclude-quiet", "files-from", "separator", "magic-file", "parameter"}, maxOperands: -1},
		// tree -o writes its listing to a file.
		"tree": {short: "adlfxACDFgGhiJNnpqrstuUvX", shortArg: "ILPH", long: []string{"noreport", "dirsfirst", "du", "si", "prune", "inodes", "device", "gitignore", "help", "version", "matchdirs", "ignore-case", "fromfile", "metafirst"}, longArg: []string{"charset", "filelimit", "timefmt", "sort", "hintro", "houtro"}, maxOperands: -1},
		// date -s and an operand other than +FORMAT set the clock.
		"date": {short: "uRI", shortArg: "dfr", long: []string{"utc", "universal", "rfc-email", "rfc-2822", "help", "version", "debug"}, longArg: []string{"date", "file", "reference", "iso-8601", "rfc-3339"}, maxOperands: 1},
		// hostname NAME and -F FILE set the host name.
		"hostname": {short: "aAdfiIsy", long: []string{"alias", "all-fqdns", "domain", "fqdn", "long", "ip-address", "all-ip-addresses", "short", "yp", "nis", "help", "version"}, maxOperands: 0},
		// uniq's second operand is its output file.
		"uniq": {short: "cdDiuz", shortArg: "fsw", long: []string{"count", "repeated", "ignore-case", "unique", "zero-terminated", "help", "version"}, longArg: []string{"skip-fields", "skip-chars", "check-chars", "all-repeated", "group"}, maxOperands: 1},
		// xxd's second operand is its output file.
		"xxd": {short: "abCeEiprRuhv", shortArg: "cgloOsn", long: []string{"help", "version"}, maxOperands: 1},
		// sort -o writes; --compress-program runs a program.
		"sort": {short: "bcCdfghiMmnrRsuVz", shortArg: "kStT", long: []string{"ignore-leading-blanks", "dictionary-order", "ignore-case", "general-numeric-sort", "ignore-nonprinting", "month-sort", "human-numeric-sort", "numeric-sort", "random-sort", "reverse", "version-sort", "check", "debug", "merge", "stable", "unique", "zero-terminated", "help", "version"}, longArg: []string{"sort", "random-source", "key", "field-separator", "buffer-size", "temporary-directory", "parallel", "batch-size", "files0-from"}, maxOperands: -1},
		// rg --pre runs a program on every file searched.
		"rg": {short: "*", long: rgLong, longArg: rgLongArg, maxOperands: -1},
		// less -o and -O copy the input to a log file.
		"less": {short: "aAbBcCdeEfFgGiIJKLmMnNqQrRsSuUVwWXz~", shortArg: "bhjkpPtTxyz#", long: []string{"quit-at-eof", "QUIT-AT-EOF", "quit-if-one-screen", "ignore-case", "IGNORE-CASE", "LONG-PROMPT", "line-numbers", "LINE-NUMBERS", "quiet", "silent", "raw-control-chars", "RAW-CONTROL-CHARS", "squeeze-blank-lines", "chop-long-lines", "no-init", "mouse", "help", "version"}, longArg: []string{"pattern", "tag", "tabs", "shift", "window", "header"}, maxOperands: -1},
		// stty with settings changes the terminal.
		"stty": {short: "ag", long: []string{"all", "save", "help", "version"}, shortArg: "F", longArg: []string{"file"}, maxOperands: 0},
	}
})

// rg's long options, all read-only: everything but --pre (and the
// preprocessor's glob, meaningless without it).
var (
	rgLong = []string{"binary", "block-buffered", "byte-offset", "case-sensitive", "color", "column", "count", "count-matches",
		"crlf", "debug", "files", "files-with-matches", "files-without-match", "fixed-strings", "follow", "heading",
		"hidden", "ignore-case", "invert-match", "json", "line-buffered", "line-number", "line-regexp", "multiline",
		"multiline-dotall", "no-filename", "no-heading", "no-ignore", "no-ignore-vcs", "no-ignore-dot", "no-ignore-parent",
		"no-line-number", "no-messages", "null", "null-data", "only-matching", "passthru", "pcre2", "pretty", "quiet",
		"search-zip", "smart-case", "sort-files", "stats", "text", "trim", "unrestricted", "vimgrep", "with-filename",
		"word-regexp", "help", "version", "no-config", "files-with-matches", "hyperlink-format"}
	rgLongArg = []string{"after-context", "before-context", "context", "glob", "iglob", "max-count", "max-depth",
		"max-filesize", "regexp", "file", "type", "type-not", "type-add", "replace", "sort", "sortr", "threads",
		"encoding", "engine", "colors", "context-separator", "field-context-separator", "field-match-separator",
		"path-separator", "max-columns", "ignore-file", "dfa-size-limit", "regex-size-limit"}
)

var writeCommands = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"rm": true, "rmdir": true, "mv": true, "cp": true, "mkdir": true, "touch": true, "chmod": true, "chown": true,
		"chgrp": true, "ln": true, "dd": true, "tee": true, "truncate": true, "install": true, "shred": true,
		"unlink": true, "kill": true, "pkill": true, "killall": true, "sudo": true, "su": true, "doas": true,
		"patch": true, "wget": true, "mkfifo": true, "mknod": true, "rsync": true, "scp": true, "reboot": true,
		"shutdown": true, "apt": true, "apt-get": true, "yum": true, "dnf": true, "apk": true, "brew": true,
		"mkfs": true, "mount": true, "umount": true, "crontab": true, "useradd": true, "passwd": true,
	}
})

// wrapperOptions are the options of the commands that run another one,
// so that the wrapped command is found after them (env -u NAME ls is ls).
var wrapperOptions = sync.OnceValue(func() map[string]options {
	return map[string]options{
		"env":     {short: "i0v", shortArg: "u", long: []string{"ignore-environment", "null", "debug", "help", "version"}, longArg: []string{"unset"}},
		"nice":    {shortArg: "n", longArg: []string{"adjustment"}},
		"nohup":   {},
		"timeout": {short: "v", shortArg: "sk", long: []string{"preserve-status", "foreground", "verbose"}, longArg: []string{"kill-after", "signal"}},
		"xargs":   {short: "0rtx", shortArg: "adEILnPs", long: []string{"null", "no-run-if-empty", "verbose", "exit"}, longArg: []string{"arg-file", "delimiter", "eof", "replace", "max-lines", "max-args", "max-procs", "max-chars"}},
		"time":    {short: "pv", long: []string{"portability", "verbose"}},
		"command": {short: "p"},
	}
})

func classifyWords(w []string) Class {
	name := path.Base(w[0])
	if strings.Contains(w[0], "/") && !systemDirs()[path.Dir(w[0])] {
		return Unknown // a program of the workspace, or of anywhere
	}
	args := w[1:]
	if o, ok := wrapperOptions()[name]; ok {
		if name == "command" && len(args) > 0 && (args[0] == "-v" || args[0] == "-V") {
			return ReadOnly // prints what a name is
		}
		rest, ok := wrapped(o, args, name == "env")
		switch {
		case !ok:
			return Unknown
		case name == "timeout":
			if len(rest) == 0 || !isDuration(rest[0]) {
				return Unknown
			}
			rest = rest[1:]
		}
		if len(rest) == 0 {
			if name == "env" {
				return ReadOnly // prints the environment
			}
			return Unknown
		}
		return classifyWords(rest)
	}
	switch name {
	case "git":
		return classifyGit(args)
	case "find":
		return classifyFind(args)
	case "sed":
		return classifySed(args)
	case "npm":
		if len(args) > 0 {
			switch args[0] {
			case "ls", "list", "view", "outdated", "why", "--version", "-v":
				return ReadOnly
			case "install", "i", "add", "uninstall", "remove", "rm", "publish", "ci", "update", "upgrade", "link", "unlink":
				return Write
			}
		}
		return Unknown
	case "pnpm", "yarn":
		// Both run the project's own code to start: yarn a yarnPath of
		// .yarnrc.yml, pnpm its .pnpmfile.cjs.
		if len(args) > 0 {
			switch args[0] {
			case "install", "i", "add", "remove", "rm", "publish", "update", "upgrade", "link", "unlink":
				return Write
			}
		}
		return Unknown
	case "go":
		return classifyGo(args)
	}
	if o, ok := readOnlyCommands()[name]; ok {
		if o == nil {
			return ReadOnly
		}
		c, operands := o.check(args)
		if c == ReadOnly && name == "date" && len(operands) == 1 && !strings.HasPrefix(operands[0], "+") {
			return Write // date MMDDhhmm sets the clock
		}
		return c
	}
	if writeCommands()[name] {
		return Write
	}
	return Unknown
}

// Unwrap returns the command that the wrapper command w runs (nice,
// nohup, timeout and its duration, time, command, xargs, env with
// harmless assignments): the words after the wrapper and its options;
// false when w is not such a wrapper, or gives it an option this package
// does not know or an assignment that may change what runs.
func Unwrap(w []string) ([]string, bool) {
	if len(w) == 0 {
		return nil, false
	}
	name := path.Base(w[0])
	o, ok := wrapperOptions()[name]
	if !ok || (name == "command" && len(w) > 1 && (w[1] == "-v" || w[1] == "-V")) {
		return nil, false
	}
	rest, ok := wrapped(o, w[1:], name == "env")
	if ok && name == "timeout" {
		if len(rest) == 0 || !isDuration(rest[0]) {
			return nil, false
		}
		rest = rest[1:]
	}
	if !ok || len(rest) == 0 {
		return nil, false
	}
	return rest, true
}

// IsWrapper reports a command that runs the command given after it (sudo,
// env, xargs, watch, …), whether or not Unwrap knows its options.
func IsWrapper(name string) bool { return wrapperCommands()[path.Base(name)] }

// wrapped returns the command a wrapper runs: the words after its
// options (and, for env, its VAR=value assignments); false when an option
// is not allowed.
func wrapped(o options, args []string, assigns bool) ([]string, bool) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		if c, _ := o.check([]string{a}); c != ReadOnly {
			// An option taking its value in the next word.
			if c2, _ := o.check(args[i : i+min(2, len(args)-i)]); c2 != ReadOnly || i+1 >= len(args) {
				return nil, false
			}
			i++
			continue
		}
		if strings.HasPrefix(a, "--") {
			continue
		}
		if last := a[len(a)-1]; strings.IndexByte(o.shortArg, last) >= 0 {
			i++ // -n 5
		}
	}
	rest := args[min(i, len(args)):]
	for assigns && len(rest) > 0 && isAssignment(rest[0]) {
		if !harmlessAssignment(rest[0]) {
			return nil, false // env VAR=… cmd: the variable may change what cmd runs
		}
		rest = rest[1:]
	}
	return rest, true
}

// findPrimaries are find's read-only primaries, with whether each takes
// an argument; -exec, -ok, -delete, -fprint… are not among them.
var findPrimaries = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"-name": true, "-iname": true, "-path": true, "-ipath": true, "-wholename": true, "-iwholename": true,
		"-lname": true, "-ilname": true, "-regex": true, "-iregex": true, "-regextype": true, "-type": true,
		"-xtype": true, "-size": true, "-perm": true, "-user": true, "-group": true, "-uid": true, "-gid": true,
		"-links": true, "-inum": true, "-samefile": true, "-newer": true, "-anewer": true, "-cnewer": true,
		"-mtime": true, "-atime": true, "-ctime": true, "-mmin": true, "-amin": true, "-cmin": true,
		"-maxdepth": true, "-mindepth": true, "-fstype": true, "-printf": true, "-used": true, "-context": true,
		"-print": false, "-print0": false, "-ls": false, "-prune": false, "-quit": false, "-true": false,
		"-false": false, "-not": false, "-and": false, "-or": false, "-a": false, "-o": false, "-empty": false,
		"-readable": false, "-writable": false, "-executable": false, "-nouser": false, "-nogroup": false,
		"-xdev": false, "-mount": false, "-depth": false, "-d": false, "-follow": false, "-noleaf": false,
		"-daystart": false, "-ignore_readdir_race": false, "-noignore_readdir_race": false, "-warn": false,
		"-nowarn": false, "-L": false, "-H": false, "-P": false, "-E": false, "-X": false, "-s": false, "-x": false,
		"-help": false, "--help": false, "-version": false, "--version": false,
	}
})

func classifyFind(args []string) Class {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-delete" || strings.HasPrefix(a, "-fprint") || a == "-fls":
			return Write
		case !strings.HasPrefix(a, "-") || a == "-":
			// a path, or ( ) ! , of the expression
		case strings.HasPrefix(a, "-newer") && len(a) == 8:
			i++ // -newerXY reference
		default:
			takesArg, ok := findPrimaries()[a]
			if !ok {
				return Unknown // -exec, -ok, and whatever this list does not know
			}
			if takesArg {
				i++
			}
		}
	}
	return ReadOnly
}

// sedOptions are the options sed may take in plan mode: not -i (edits in
// place), not -f (a script this classifier has not read).
var sedOptions = options{short: "nrEsuz", shortArg: "el", long: []string{"quiet", "silent", "regexp-extended", "separate", "unbuffered", "null-data", "posix", "debug", "sandbox", "help", "version"}, longArg: []string{"expression", "line-length"}, maxOperands: -1}

func classifySed(args []string) Class {
	var scripts []string
	var files []string
	hasE := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-i" || strings.HasPrefix(a, "-i") || strings.HasPrefix(a, "--in-place"):
			return Write
		case a == "-e" || a == "--expression":
			if i+1 >= len(args) {
				return Unknown
			}
			scripts = append(scripts, args[i+1])
			hasE = true
			i++
		case strings.HasPrefix(a, "--expression="):
			scripts = append(scripts, strings.TrimPrefix(a, "--expression="))
			hasE = true
		case strings.HasPrefix(a, "-") && a != "-":
			if c, _ := sedOptions.check([]string{a}); c != ReadOnly {
				if strings.HasPrefix(a, "-") && strings.HasSuffix(a, "e") && !strings.HasPrefix(a, "--") {
					// -ne SCRIPT
					if c, _ := sedOptions.check([]string{a[:len(a)-1]}); c == ReadOnly && i+1 < len(args) {
						scripts = append(scripts, args[i+1])
						hasE = true
						i++
						continue
					}
				}
				return Unknown
			}
			if strings.HasSuffix(a, "l") && !strings.HasPrefix(a, "--") {
				i++ // -l N
			}
		default:
			files = append(files, a)
		}
	}
	if !hasE {
		if len(files) == 0 {
			return Unknown
		}
		scripts = append(scripts, files[0])
	}
	for _, s := range scripts {
		if c := sedScriptClass(s); c != ReadOnly {
			return c
		}
	}
	return ReadOnly
}

// sedScriptClass reads a sed script: read-only when it only prints,
// deletes from the output, moves between lines and substitutes; a write
// with w/W (or the w flag of s); unknown with e (runs a command), r/R, the
// text commands a/i/c and anything this reader does not follow.
func sedScriptClass(s string) Class {
	i := 0
	// delimited reads a /…/-style part ending at delim, honouring \ escapes.
	delimited := func(delim byte) bool {
		for i < len(s) {
			c := s[i]
			i++
			if c == '\\' {
				i++
				continue
			}
			if c == delim {
				return true
			}
			if c == '\n' {
				return false
			}
		}
		return false
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '{' || c == '}' || c == '!' || c == ',' ||
			c == '$' || c == '~' || c == '+' || isDigit(c):
			i++
		case c == '/' || c == '\\':
			// an address: /re/ or \cREc, with an optional I or M after
			delim := byte('/')
			if c == '\\' {
				if i+1 >= len(s) {
					return Unknown
				}
				delim = s[i+1]
				i++
			}
			i++
			if !delimited(delim) {
				return Unknown
			}
			for i < len(s) && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
		case c == 's' || c == 'y':
			if i+1 >= len(s) || s[i+1] == '\\' || s[i+1] == '\n' {
				return Unknown
			}
			delim := s[i+1]
			i += 2
			if !delimited(delim) || !delimited(delim) {
				return Unknown
			}
			if c == 'y' {
				continue
			}
			for i < len(s) && strings.IndexByte("gpiImM0123456789", s[i]) >= 0 {
				i++
			}
			if i < len(s) && s[i] == 'w' {
				return Write
			}
			if i < len(s) && s[i] == 'e' {
				return Unknown
			}
		case strings.IndexByte("pPdDnNgGhHxlqQ=zF", c) >= 0:
			i++
			if (c == 'q' || c == 'Q' || c == 'l') && i < len(s) {
				for i < len(s) && (s[i] == ' ' || isDigit(s[i])) {
					i++ // an exit code or a line length
				}
			}
		case c == 'w' || c == 'W':
			return Write
		case c == '#' && i == 0 && !strings.HasPrefix(s, "#n"):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		default:
			// e, r, R, a, i, c, b, t, T, :label, v, …
			return Unknown
		}
	}
	return ReadOnly
}

// gitGlobal are git's options before the subcommand that change nothing
// about what runs; -c, --config-env, --exec-path, --git-dir, --work-tree,
// -p and the rest are not among them.
var gitGlobal = options{shortArg: "C", long: []string{"no-pager", "no-optional-locks", "literal-pathspecs", "no-replace-objects", "version", "help"}, maxOperands: 0}

// gitReadOnly are git's read-only subcommands, each with the options it
// must not be given: --output writes, --ext-diff and --textconv run the
// configured diff programs, --open-files-in-pager and --show-signature
// other programs, --filters the filter drivers.
var gitReadOnly = sync.OnceValue(func() map[string][]string {
	return map[string][]string{
		"status":      nil,
		"diff":        {"--output", "--ext-diff", "--textconv"},
		"log":         {"--output", "--ext-diff", "--textconv", "--show-signature"},
		"show":        {"--output", "--ext-diff", "--textconv", "--show-signature"},
		"whatchanged": {"--output", "--ext-diff", "--textconv", "--show-signature"},
		"shortlog":    nil,
		"rev-parse":   nil,
		"rev-list":    nil,
		"ls-files":    nil,
		"ls-tree":     nil,
		"blame":       {"--textconv", "--contents"},
		"grep":        {"--open-files-in-pager", "-O", "--textconv"},
		"describe":    nil,
		"cat-file":    {"--textconv", "--filters"},
		"merge-base":  nil,
		"show-ref":    nil,
		"version":     nil,
	}
})

var gitWrite = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"commit": true, "push": true, "add": true, "rm": true, "mv": true, "reset": true, "checkout": true,
		"switch": true, "restore": true, "merge": true, "rebase": true, "pull": true, "fetch": true, "clean": true,
		"cherry-pick": true, "revert": true, "init": true, "clone": true, "am": true, "apply": true, "gc": true,
		"prune": true, "submodule": true, "worktree": true, "notes": true, "filter-branch": true, "update-ref": true,
	}
})

func classifyGit(args []string) Class {
	// Global options before the subcommand.
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		if args[i] == "-C" {
			i++
			continue
		}
		if c, _ := gitGlobal.check(args[i : i+1]); c != ReadOnly {
			return Unknown // -c, --exec-path, --git-dir, -p, …
		}
	}
	if i >= len(args) {
		return ReadOnly
	}
	sub, rest := args[i], args[i+1:]
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
				if a == f || strings.HasPrefix(a, f+"=") || (len(f) == 2 && f[1] != '-' && strings.HasPrefix(a, f) && !strings.HasPrefix(a, "--")) {
					return true
				}
			}
		}
		return false
	}
	if denied, ok := gitReadOnly()[sub]; ok {
		switch {
		case hasFlag("--output"):
			return Write
		case hasFlag(denied...):
			return Unknown
		}
		return ReadOnly
	}
	if gitWrite()[sub] {
		return Write
	}
	switch sub {
	case "branch":
		if hasFlag("-d", "-D", "-m", "-M", "-c", "-C", "--delete", "--move", "--copy", "--set-upstream-to", "-u", "--unset-upstream", "-f", "--force", "--edit-description") {
			return Write
		}
		if positional() && !hasFlag("--list", "-l", "--contains", "--merged", "--no-merged", "--points-at") {
			return Write
		}
		return ReadOnly
	case "tag":
		if hasFlag("-v", "--verify") {
			return Unknown // runs gpg.program
		}
		if positional() && !hasFlag("-l", "--list", "--contains", "--points-at") || hasFlag("-d", "--delete", "-a", "-s", "-f", "-u", "-m", "-F") {
			return Write
		}
		return ReadOnly
	case "stash":
		if len(rest) > 0 && rest[0] == "list" {
			return ReadOnly
		}
		if len(rest) > 0 && rest[0] == "show" {
			if hasFlag("--output") {
				return Write
			}
			if hasFlag("--ext-diff", "--textconv") {
				return Unknown
			}
			return ReadOnly
		}
		return Write
	case "remote":
		// "remote show NAME" asks the remote (a configured program may
		// answer); -v and get-url only read the configuration.
		if len(rest) == 0 || (len(rest) == 1 && (rest[0] == "-v" || rest[0] == "--verbose")) || (len(rest) > 0 && rest[0] == "get-url") {
			return ReadOnly
		}
		if len(rest) > 0 && rest[0] == "show" {
			return Unknown
		}
		return Write
	case "config":
		if hasFlag("--get", "--get-all", "--list", "-l", "--get-regexp") && !hasFlag("--edit", "-e") {
			return ReadOnly
		}
		return Write
	case "reflog":
		if len(rest) == 0 || rest[0] == "show" {
			return ReadOnly
		}
		return Write
	}
	// ls-remote (runs --upload-pack or a transport), help (a browser or
	// man viewer from the configuration), and the rest.
	return Unknown
}

// classifyGo: go version, go env (not -w/-u), go doc and go list without
// the flags that build or run a program.
func classifyGo(args []string) Class {
	if len(args) == 0 {
		return Unknown
	}
	rest := args[1:]
	switch args[0] {
	case "version", "doc":
		return ReadOnly
	case "env":
		for _, a := range rest {
			if a == "-w" || a == "-u" || strings.HasPrefix(a, "-w=") || strings.HasPrefix(a, "-u=") {
				return Write
			}
		}
		return ReadOnly
	case "list":
		for i := 0; i < len(rest); i++ {
			a := rest[i]
			if !strings.HasPrefix(a, "-") {
				continue
			}
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			switch name {
			case "json", "m", "e", "deps", "find", "test", "u", "versions", "retracted":
			case "f", "tags", "mod":
				if !hasValue {
					i++
				}
			default:
				return Unknown // -export and -compiled build, -toolexec runs a program, …
			}
		}
		return ReadOnly
	case "get", "install", "mod":
		return Write
	}
	return Unknown
}
