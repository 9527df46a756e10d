package loopdetect

import (
	"strings"
	"unicode/utf8"
)

// isJSSpace reports whether r is in JavaScript's \s class (white space and
// line terminators), which String.prototype.trim and the reference regexes use.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// jsTrim trims as String.prototype.trim does.
func jsTrim(s string) string {
	return strings.TrimFunc(s, isJSSpace)
}

// spaceLen returns the length of the run of JavaScript white space at the start of s.
func spaceLen(s string) int {
	for i, r := range s {
		if !isJSSpace(r) {
			return i
		}
	}
	return len(s)
}

// isGitOverviewInspection reports whether every segment of a shell command
// chain is an overview-style `git status`, `git diff` or `git ls-files`. A
// chain that also stages, commits, runs another tool or diffs specific files
// is progress and must not feed the stagnation streak.
func isGitOverviewInspection(command string) bool {
	segments := 0
	for seg := range strings.FieldsFuncSeq(command, func(r rune) bool {
		return r == ';' || r == '&' || r == '|' || r == '\n'
	}) {
		seg = jsTrim(seg)
		if seg == "" {
			continue
		}
		segments++
		sub, rest, ok := matchGitInspection(seg)
		if !ok {
			return false
		}
		if sub == "diff" && !isOverviewGitDiff(rest) {
			return false
		}
	}
	return segments > 0
}

// matchGitInspection mirrors the reference regex
// /^git(?:\s+(?:-C\s+\S+|--no-pager))*\s+(status|diff|ls-files)\b/i,
// including its greedy-then-backtrack choice of match, and returns the
// lower-cased subcommand and the text after the match.
func matchGitInspection(seg string) (sub, rest string, ok bool) {
	if len(seg) < 3 || !strings.EqualFold(seg[:3], "git") {
		return "", "", false
	}
	return matchGitOptions(seg, 3)
}

func matchGitOptions(seg string, pos int) (string, string, bool) {
	ws := spaceLen(seg[pos:])
	if ws == 0 {
		return "", "", false
	}
	at := pos + ws
	rest := seg[at:]
	// One more option first (the * is greedy), then the subcommand.
	if hasPrefixFold(rest, "-C") {
		if ws2 := spaceLen(rest[2:]); ws2 > 0 {
			argStart := at + 2 + ws2
			argEnd := argStart
			for argEnd < len(seg) {
				r, size := utf8.DecodeRuneInString(seg[argEnd:])
				if isJSSpace(r) {
					break
				}
				argEnd += size
			}
			if argEnd > argStart {
				if sub, after, ok := matchGitOptions(seg, argEnd); ok {
					return sub, after, true
				}
			}
		}
	}
	if hasPrefixFold(rest, "--no-pager") {
		if sub, after, ok := matchGitOptions(seg, at+len("--no-pager")); ok {
			return sub, after, true
		}
	}
	for _, name := range [...]string{"status", "diff", "ls-files"} {
		if hasPrefixFold(rest, name) && wordBoundary(rest, len(name)) {
			return name, rest[len(name):], true
		}
	}
	return "", "", false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// wordBoundary reports a regex \b after s[:i], whose last byte is a word
// character: the next byte must not be an ASCII word character.
func wordBoundary(s string, i int) bool {
	if i >= len(s) {
		return true
	}
	c := s[i]
	return !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
}

// isOverviewGitDiff reports whether the arguments of `git diff` only select
// revisions and options, not paths.
func isOverviewGitDiff(args string) bool {
	args = jsTrim(args)
	if args == "" {
		return true
	}
	tokens := strings.FieldsFunc(args, isJSSpace)
	for i, tok := range tokens {
		if tok == "--" && i < len(tokens)-1 {
			return false
		}
	}
	for _, tok := range tokens {
		if !strings.HasPrefix(tok, "-") && !isGitRevision(tok) {
			return false
		}
	}
	return true
}

// isGitRevision matches HEAD, @, HEAD~2/@^ style ancestry, 7–40 hex
// characters, or an X..Y / X...Y range.
func isGitRevision(tok string) bool {
	if tok == "HEAD" || tok == "@" {
		return true
	}
	if rest, ok := strings.CutPrefix(tok, "HEAD"); ok && isAncestrySuffix(rest) {
		return true
	}
	if rest, ok := strings.CutPrefix(tok, "@"); ok && isAncestrySuffix(rest) {
		return true
	}
	if len(tok) >= 7 && len(tok) <= 40 {
		hex := true
		for i := 0; i < len(tok); i++ {
			c := tok[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				hex = false
				break
			}
		}
		if hex {
			return true
		}
	}
	// [^\s]+\.{2,3}[^\s]+ on a token without spaces: ".." with something on both sides.
	for i := 1; i+2 < len(tok); i++ {
		if tok[i] == '.' && tok[i+1] == '.' {
			return true
		}
	}
	return false
}

// isAncestrySuffix matches (?:[~^]\d*)+ exactly.
func isAncestrySuffix(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); {
		if s[i] != '~' && s[i] != '^' {
			return false
		}
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return true
}
