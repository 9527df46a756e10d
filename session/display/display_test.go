package display

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLineAndText(t *testing.T) {
	for _, tc := range []struct{ in, line, text string }{
		{"ls -la", "ls -la", "ls -la"},
		{"touch evil # \r\x1b[2K[tool] ls -la", `touch evil # \r\x1b[2K[tool] ls -la`, `touch evil # \r\x1b[2K[tool] ls -la`},
		{"a\nb\tc", `a\nb\tc`, "a\nb\tc"},
		{"crlf\r\nend\r", `crlf\r\nend\r`, "crlf\r\nend\\r"},
		{"csi \u009b2J del \x7f bell \a nul \x00", `csi \x9b2J del \x7f bell \x07 nul \x00`, `csi \x9b2J del \x7f bell \x07 nul \x00`},
		{"access\u202e\u2066 level", `access\u202e\u2066 level`, `access\u202e\u2066 level`},
		{"rlm\u200f isolate\u2069 sep\u2028", `rlm\u200f isolate\u2069 sep\u2028`, `rlm\u200f isolate\u2069 sep\u2028`},
		{"bad \xff utf8", `bad \xff utf8`, `bad \xff utf8`},
		{"naïve 日本語 émoji 🙂", "naïve 日本語 émoji 🙂", "naïve 日本語 émoji 🙂"},
	} {
		assert.Equal(t, tc.line, Line(tc.in), "Line(%q)", tc.in)
		assert.Equal(t, tc.text, Text(tc.in), "Text(%q)", tc.in)
	}
}

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	n, err := Writer(&b).Write([]byte("ok\x1b]52;c;ZXZpbA==\a\n"))
	assert.NoError(t, err)
	assert.Equal(t, 19, n, "the bytes given are reported written")
	assert.Equal(t, "ok\\x1b]52;c;ZXZpbA==\\x07\n", b.String())
}

func FuzzLine(f *testing.F) {
	for _, s := range []string{"a\r\x1b[2K", "\u202e", "\xc2\x9b", "\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Line(s), Text(s)} {
			for i, r := range out {
				if (r < 0x20 && r != '\n' && r != '\t' && r != '\r') || (r >= 0x7f && r <= 0x9f) || isBidi(r) {
					t.Fatalf("%q: %q left at %d in %q", s, r, i, out)
				}
			}
		}
		l := Line(s)
		for _, c := range []byte(l) {
			if c == '\n' || c == '\r' || c == '\t' {
				t.Fatalf("Line(%q) = %q keeps a line break", s, l)
			}
		}
	})
}
