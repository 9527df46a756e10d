package htmlconv

import (
	"context"
	"errors"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func convert(t *testing.T, src, page string) Result {
	t.Helper()
	base, err := url.Parse(page)
	require.NoError(t, err)
	res, err := Convert(t.Context(), []byte(src), "text/html", base, Limits{})
	require.NoError(t, err)
	return res
}

// nestedQuotes is the page of the second attack: paragraphs inside depth
// nested <blockquote>s, size bytes in all.
func nestedQuotes(size, depth int) []byte {
	var b strings.Builder
	b.WriteString("<html><body>")
	b.WriteString(strings.Repeat("<blockquote>", depth))
	p := "<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.</p>\n"
	for b.Len() < size-depth*len("</blockquote>")-len(p) {
		b.WriteString(p)
	}
	b.WriteString(strings.Repeat("</blockquote>", depth))
	b.WriteString("</body></html>")
	return []byte(b.String())
}

// Links and images resolve against the page's own URL, not only its host.
func TestResolveAgainstPage(t *testing.T) {
	got := convert(t, `<a href="b.html">b</a> <a href="#s">s</a> <a href="/r">r</a> <img src="../i.png" alt="i">`,
		"https://example.com/docs/guide/a.html").Markdown
	assert.Equal(t, "[b](https://example.com/docs/guide/b.html) [s](https://example.com/docs/guide/a.html#s) "+
		"[r](https://example.com/r) ![i](https://example.com/docs/i.png)", got)
}

// Scripts, styles and the title are not text of the page.
func TestNotText(t *testing.T) {
	got := convert(t, `<title>T</title><style>p{}</style><script>document.write("<p>x</p>")</script><p>y</p>`, "https://example.com/").Markdown
	assert.Equal(t, "y", got)
}

// The charset comes from a byte order mark, the Content-Type, a <meta>,
// else UTF-8 when the bytes are valid UTF-8 and windows-1252 when not.
func TestCharset(t *testing.T) {
	base, _ := url.Parse("https://example.com/")
	for _, c := range []struct {
		name, ctype string
		body        []byte
		want        string
	}{
		{"utf-8 without declaration", "text/html", []byte("caf\xc3\xa9"), "café"},
		{"latin-1 without declaration reads as windows-1252", "text/html", []byte("caf\xe9 \x93q\x94"), "café “q”"},
		{"header charset", "text/html; charset=ISO-8859-1", []byte("\xe9"), "é"},
		{"meta charset", "text/html", []byte(`<meta charset="windows-1251"><p>` + "\xcf\xf0\xe8"), "При"},
		{"meta http-equiv", "text/html", []byte(`<meta http-equiv="Content-Type" content="text/html; charset=shift_jis">` + "\x82\xa0"), "あ"},
		{"bom wins over header", "text/html; charset=iso-8859-1", []byte("\xef\xbb\xbf\xc3\xa9"), "é"},
		{"utf-16le bom", "text/html", []byte("\xff\xfea\x00b\x00"), "ab"},
		{"unknown label", "text/html; charset=x-nonsense", []byte("ok"), "ok"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Convert(t.Context(), c.body, c.ctype, base, Limits{})
			require.NoError(t, err)
			assert.Equal(t, c.want, res.Markdown)
		})
	}
	assert.Equal(t, "é", DecodeText([]byte("\xe9"), "text/plain; charset=latin1"))
	assert.Equal(t, "a\uFFFDb", DecodeText([]byte("a\xffb"), "text/plain"))
}

// The attack's page: 2 MiB of paragraphs inside 99 nested <blockquote>s.
// Quotes past the eighth are left out, their paragraphs kept at the
// eighth level; the page is cut once its text passes the bound, and says
// so. (Its cost, time and memory, is BenchmarkConvertNestedQuotes'.)
func TestNestedQuotesBounded(t *testing.T) {
	res, err := Convert(t.Context(), nestedQuotes(2<<20, 99), "text/html", nil, Limits{})
	require.NoError(t, err)
	assert.True(t, res.Cut)
	assert.Equal(t, 99-DefaultMaxNesting, res.Flattened)
	assert.Contains(t, res.Markdown, strings.Repeat("> ", 8)+"Lorem ipsum")
	assert.NotContains(t, res.Markdown, strings.Repeat("> ", 9))
	assert.Less(t, len(res.Markdown), 4*DefaultMaxText)

	// A page under the bounds is converted whole, every level kept.
	res, err = Convert(t.Context(), nestedQuotes(4<<10, 3), "text/html", nil, Limits{})
	require.NoError(t, err)
	assert.False(t, res.Cut)
	assert.Zero(t, res.Flattened)
	assert.Contains(t, res.Markdown, "> > > Lorem ipsum")
}

// Elements nested a million deep (a page can be nothing else) are kept to
// maxDepth: the parser, the link walk and the converter's recursion stay
// bounded, and the text is kept.
func TestDeepNestingBounded(t *testing.T) {
	for _, tag := range []string{"div", "span", "ul><li", "table><tr><td"} {
		src := strings.Repeat("<"+tag+">", 1<<20/len(tag)) + "deep text"
		res, err := Convert(t.Context(), []byte(src), "text/html", nil, Limits{MaxInput: 4 << 20})
		require.NoError(t, err, tag)
		assert.Contains(t, res.Markdown, "deep text", tag)
		assert.Positive(t, res.Flattened, tag)
	}
}

// The converter's own time is bounded, and a cancelled turn does not wait
// for it: with the input bounds raised far past web_fetch's, Convert still
// returns at the timeout, or at once when ctx ends, and the conversion it
// abandoned stops too (unchecked, it would run on for minutes).
func TestTimeoutAndCancel(t *testing.T) {
	page := nestedQuotes(8<<20, 99)
	huge := Limits{MaxText: 1 << 30, MaxInput: 1 << 30, MaxNesting: 1000, Timeout: 200 * time.Millisecond}
	before := runtime.NumGoroutine()
	_, err := Convert(t.Context(), page, "text/html", nil, huge)
	require.ErrorIs(t, err, ErrTimeout)
	// (Polled here: require.Eventually runs its condition on a goroutine.)
	for deadline := time.Now().Add(20 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the abandoned conversion goes on")
	}

	huge.Timeout = time.Hour
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() {
		_, err := Convert(ctx, page, "text/html", nil, huge)
		done <- err
	}()
	select {
	case err := <-done:
		require.True(t, errors.Is(err, context.Canceled), "%v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Convert did not return when its context ended")
	}
}
