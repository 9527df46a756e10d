// Package display makes text from the model, the workspace or a command
// safe to show: in an editor's tool-call card, a permission request, a
// terminal. A control character can rewrite what a terminal shows — `\r`
// and ESC [2K erase the line and print a harmless title over `touch evil`
// — and a bidirectional override or isolate reorders what the eye reads
// (Trojan Source). Every string acpd shows that it did not write itself
// passes through Line (a title, a label, a name: one line) or Text (a
// body: line breaks and tabs kept).
//
// Each such character becomes a visible escape, in Go's notation: `\r`,
// `\x1b`, `\u202e`. Nothing is dropped, so what is shown still tells what
// is there.
package display

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Line is s made safe for one line of display: every C0 and C1 control
// character (line breaks and tabs included), DEL, and every bidirectional
// formatting character escaped.
func Line(s string) string { return escape(s, false) }

// Text is s made safe for a block of text: as Line, but line feeds and
// tabs are kept, and so is a carriage return right before a line feed
// (a CRLF line end); a lone carriage return is escaped.
func Text(s string) string { return escape(s, true) }

func escape(s string, block bool) string {
	i := firstUnsafe(s, block)
	if i < 0 {
		return s // the common case: no copy
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i]) // not UTF-8: shown as the byte it is
		case unsafeRune(r, block, s[i+size:]):
			switch r {
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				if r < 0x100 {
					fmt.Fprintf(&b, `\x%02x`, r)
				} else {
					fmt.Fprintf(&b, `\u%04x`, r)
				}
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstUnsafe is the index of the first byte to escape; -1 for none.
func firstUnsafe(s string, block bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if unsafeRune(rune(c), block, s[i+1:]) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r, block, s[i+size:]) {
			return i
		}
		i += size
	}
	return -1
}

// unsafeRune reports whether r must be escaped; rest is the text after it
// (a carriage return is kept in a block when a line feed follows).
func unsafeRune(r rune, block bool, rest string) bool {
	switch {
	case r == '\n' || r == '\t':
		return !block
	case r == '\r':
		return !block || !strings.HasPrefix(rest, "\n")
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true // C1: CSI (0x9b) starts an escape sequence as ESC [ does
	}
	return isBidi(r)
}

// isBidi reports the bidirectional formatting characters: the embeddings
// and overrides (U+202A–U+202E), the isolates (U+2066–U+2069), the marks
// (U+200E, U+200F, U+061C), and the line and paragraph separators, which
// break a line where none shows.
func isBidi(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// Writer returns a writer that passes everything through Text before w:
// for a terminal that shows a stream of text. Each Write must hold whole
// UTF-8 characters (a character cut in two is shown as its bytes).
func Writer(w io.Writer) io.Writer { return textWriter{w} }

type textWriter struct{ w io.Writer }

func (t textWriter) Write(p []byte) (int, error) {
	s := string(p)
	if firstUnsafe(s, true) < 0 {
		return t.w.Write(p)
	}
	if _, err := io.WriteString(t.w, Text(s)); err != nil {
		return 0, err
	}
	return len(p), nil
}
