package htmlmd

import (
	"net/url"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

func convert(t *testing.T, src, page string) string {
	t.Helper()
	base, err := url.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	return Convert(src, base)
}

func TestResolveAgainstPage(t *testing.T) {
	got := convert(t, `<a href="b.html">b</a> <a href="#s">s</a> <a href="/r">r</a> <img src="../i.png" alt="i">`,
		"https://example.com/docs/guide/a.html")
	want := "[b](https://example.com/docs/guide/b.html) [s](https://example.com/docs/guide/a.html#s) " +
		"[r](https://example.com/r) ![i](https://example.com/docs/i.png)"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestElements(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"raw text holds markup", `<script>document.write("<p>x</p>")</script><p>y</p>`, "y"},
		{"style dropped", `<style>p{}</style>a`, "a"},
		{"title dropped", `<title>T &amp; U</title><p>b</p>`, "b"},
		{"uppercase tags and attrs", `<P>one</P><A HREF="/x">two</A>`, "one\n\n[two](https://example.com/x)"},
		{"unterminated comment", `a<!-- never closed <p>b`, "a"},
		{"lone less-than", `a < b and <3`, "a &lt; b and &lt;3"},
		{"void without slash", `a<br>b<hr>c`, "a  \nb\n\n* * *\n\nc"},
		{"self-closing", `a<br/>b<img src="x.png" alt="x"/>`, "a  \nb![x](https://example.com/x.png)"},
		{"pre lang on pre", `<pre class="lang-sh">ls</pre>`, "```sh\nls\n```"},
		{"fence longer than content", "<pre>a\n```\nb</pre>", "````\na\n```\nb\n````"},
		{"code with backtick", "<code>a`b</code>", "``a`b``"},
		{"ol start", `<ol start="7"><li>x<li>y</ol>`, "7. x\n8. y"},
		{"unclosed li and p", `<ul><li><p>a<li>b</ul>`, "- a\n- b"},
		{"table uneven rows", `<table><tr><td>a<td>b|c<tr><td>d</table>`, "| a | b\\|c |\n| --- | --- |\n| d |  |"},
		{"empty link dropped", `<a href="/x"></a>z`, "z"},
		{"unquoted attribute with entity", `<a href=/a?x=1&amp;y=2>q</a>`, "[q](https://example.com/a?x=1&y=2)"},
		{"emphasis keeps outer spaces", `a<em> b </em>c`, "a *b* c"},
		{"escapes: only a mark that could open emphasis", "*x* _y_ `z` [w]", `\*x* \_y_ \` + "`z\\` \\[w]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := convert(t, c.in, "https://example.com/"); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestDecodeHTML(t *testing.T) {
	for _, c := range []struct {
		name, ctype string
		body        []byte
		want        string
	}{
		{"utf-8 without declaration", "text/html", []byte("caf\xc3\xa9"), "café"},
		{"latin-1 without declaration reads as windows-1252", "text/html", []byte("caf\xe9 \x93q\x94"), "café “q”"},
		{"header charset", "text/html; charset=ISO-8859-1", []byte("\xe9"), "é"},
		{"meta charset", "text/html", []byte(`<meta charset="windows-1251"><p>` + "\xcf\xf0\xe8"), `<meta charset="windows-1251"><p>При`},
		{"meta http-equiv", "text/html", []byte(`<meta http-equiv="Content-Type" content="text/html; charset=shift_jis">` + "\x82\xa0"),
			`<meta http-equiv="Content-Type" content="text/html; charset=shift_jis">あ`},
		{"bom wins over header", "text/html; charset=iso-8859-1", []byte("\xef\xbb\xbf\xc3\xa9"), "é"},
		{"utf-16le bom", "text/html", []byte("\xff\xfea\x00b\x00"), "ab"},
		{"unknown label", "text/html; charset=x-nonsense", []byte("ok"), "ok"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := DecodeHTML(c.body, c.ctype); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestDeepNestingBounded(t *testing.T) {
	in := strings.Repeat("<ul><li><blockquote>", 5000) + "x"
	out := convert(t, in, "https://example.com/")
	if !strings.Contains(out, "x") || len(out) > 64*len(in) {
		t.Fatalf("%d bytes out of %d in", len(out), len(in))
	}
}

func FuzzHTMLToMarkdown(f *testing.F) {
	for _, name := range []string{"01-article", "02-lists", "07-malformed", "09-nav"} {
		b, err := os.ReadFile("testdata/golden/" + name + ".html")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("<a href='x")
	f.Add("<pre><code class=language-")
	f.Add("<table><tr><td><ul><li><table>")
	base, _ := url.Parse("https://example.com/a/")
	f.Fuzz(func(t *testing.T, in string) {
		out := Convert(in, base)
		// Output grows with nesting (list indentation, quote marks), which
		// maxDepth bounds, and with resolved URLs.
		if limit := 256*len(in) + 64; len(out) > limit {
			t.Fatalf("%d bytes of Markdown from %d of HTML", len(out), len(in))
		}
		if utf8.ValidString(in) && !utf8.ValidString(out) {
			t.Fatalf("valid UTF-8 in, invalid out: %q", out)
		}
	})
}

func BenchmarkConvertBig(b *testing.B) {
	src, err := os.ReadFile("testdata/golden/15-big.html")
	if err != nil {
		b.Fatal(err)
	}
	base, _ := url.Parse("https://example.com/")
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		Convert(DecodeHTML(src, "text/html"), base)
	}
}
