// Package htmlconv turns a fetched HTML page into Markdown for web_fetch,
// with html-to-markdown v2 (base, CommonMark and GFM table plugins), inside
// bounds on what a page can make it cost.
//
// The converter renders each quote and list level by rendering what is
// inside it and prefixing every line again, so its work grows with the
// input times the nesting: a 2 MiB page of paragraphs inside 99 nested
// <blockquote>s took it 15.8 s and 7.6 GB of allocations (decisions.md).
// So the page goes through one streaming pass of the HTML tokenizer first,
// linear in its size, which hands the converter only
//
//   - the beginning of the page, up to MaxText bytes of text or MaxInput
//     bytes of HTML, whichever comes first: web_fetch returns the head of
//     the Markdown, cut to the output limit, so the rest would be converted
//     only to be dropped;
//   - quotes and lists nested at most MaxNesting deep, and other elements
//     that need an end tag at most maxDepth deep: deeper tags are left out
//     and their content stays, flattened into the deepest level kept.
//
// The conversion runs on a goroutine of its own and Convert returns as soon
// as ctx is done or Timeout passes; the converter then renders every element
// left as nothing, so the goroutine ends soon after.
package htmlconv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/transform"
)

// Defaults of Limits.
const (
	DefaultMaxText    = 256 << 10
	DefaultMaxInput   = 1 << 20
	DefaultMaxNesting = 8
	DefaultTimeout    = 10 * time.Second
)

// maxDepth bounds the nesting of the other elements that need an end tag
// (div, section, span, a, …): the parser, the link walk and the converter
// all go down the tree, the converter by recursion.
const maxDepth = 128

// Limits bound one conversion; a zero field takes its default.
type Limits struct {
	// MaxText is how much text (runs of white space counted once) is
	// converted; the page is cut after the element where it is reached.
	MaxText int
	// MaxInput bounds the HTML handed to the converter.
	MaxInput int
	// MaxNesting bounds nested <blockquote>, <ul>, <ol> and <dl>.
	MaxNesting int
	// Timeout bounds the conversion.
	Timeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxText <= 0 {
		l.MaxText = DefaultMaxText
	}
	if l.MaxInput <= 0 {
		l.MaxInput = DefaultMaxInput
	}
	if l.MaxNesting <= 0 {
		l.MaxNesting = DefaultMaxNesting
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	return l
}

// Result is a converted page.
type Result struct {
	Markdown string
	// Cut says the page went past MaxText or MaxInput: only its beginning
	// was converted.
	Cut bool
	// Flattened counts the tags left out for nesting past the bounds.
	Flattened int
}

// ErrTimeout is Convert's answer when the conversion outlasts the limit.
var ErrTimeout = errors.New("converting the page took too long")

// Convert decodes body (charset from a byte order mark, contentType, a
// <meta> in the first 1024 bytes, else UTF-8 if valid, else windows-1252)
// and converts it to Markdown, links and images resolved against page.
func Convert(ctx context.Context, body []byte, contentType string, page *url.URL, lim Limits) (Result, error) {
	lim = lim.withDefaults()
	src, res, err := prune(ctx, decoded(body, contentType), lim, false)
	if err != nil {
		return Result{}, err
	}
	doc, err := html.Parse(bytes.NewReader(src))
	if err != nil {
		// The parser holds at most 512 open elements; elements whose end
		// tag may be left out (<td> in nested tables, <li>) are not counted
		// towards maxDepth, so a page built of nothing else can pass it.
		// Such a page is pruned again counting every element.
		if src, res, err = prune(ctx, decoded(body, contentType), lim, true); err != nil {
			return Result{}, err
		}
		if doc, err = html.Parse(bytes.NewReader(src)); err != nil {
			return Result{}, fmt.Errorf("parsing the page: %w", err)
		}
	}
	resolveLinks(doc, page)

	type out struct {
		md  []byte
		err error
	}
	done := make(chan out, 1)
	// The converter carries the context to its handlers but never checks
	// it: a first handler that renders every element as nothing once the
	// conversion is abandoned makes the goroutine finish soon after.
	convCtx, stop := context.WithTimeout(ctx, lim.Timeout)
	defer stop()
	go func() {
		conv := converter.NewConverter(converter.WithPlugins(
			base.NewBasePlugin(), commonmark.NewCommonmarkPlugin(),
			// Minimal padding: aligned columns cost a model tokens for nothing.
			table.NewTablePlugin(table.WithCellPaddingBehavior(table.CellPaddingBehaviorMinimal))))
		conv.Register.Renderer(func(c converter.Context, _ converter.Writer, _ *html.Node) converter.RenderStatus {
			if c.Err() != nil {
				return converter.RenderSuccess
			}
			return converter.RenderTryNext
		}, 0)
		md, err := conv.ConvertNode(doc, converter.WithContext(convCtx))
		done <- out{md, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			return Result{}, fmt.Errorf("converting the page: %w", o.err)
		}
		res.Markdown = strings.ToValidUTF8(string(o.md), "\uFFFD")
		return res, nil
	case <-convCtx.Done():
		select {
		case o := <-done: // finished as the time ran out: the answer stands
			if o.err == nil {
				res.Markdown = strings.ToValidUTF8(string(o.md), "\uFFFD")
				return res, nil
			}
		default:
		}
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		return Result{}, fmt.Errorf("%w (%v)", ErrTimeout, lim.Timeout)
	}
}

// decoded reads body as UTF-8, without a byte order mark. The charset is
// what charset.DetermineEncoding finds (a byte order mark, the
// Content-Type, a <meta> in the first 1024 bytes), except that where it
// only guessed windows-1252 a body that is valid UTF-8 is read as UTF-8:
// it looks at the first 1024 bytes only, so a page whose first non-ASCII
// character comes later would otherwise be garbled.
func decoded(body []byte, contentType string) io.Reader {
	enc, name, certain := charset.DetermineEncoding(body, contentType)
	var r io.Reader = bytes.NewReader(body)
	if !(name == "utf-8" || (!certain && name == "windows-1252" && utf8.Valid(body))) {
		r = transform.NewReader(r, enc.NewDecoder())
	}
	br := bufio.NewReader(r)
	if b, err := br.Peek(3); err == nil && string(b) == "\ufeff" {
		_, _ = br.Discard(3)
	}
	return br
}

// nestingTags are the containers the converter prefixes or indents every
// line of per level.
func nestingTag(a atom.Atom) bool {
	return a == atom.Blockquote || a == atom.Ul || a == atom.Ol || a == atom.Dl
}

// optionalEnd are the elements whose end tag HTML lets a page leave out (or
// that have none): they do not count towards maxDepth, since a page of
// unclosed <p>s would otherwise look ever deeper.
func optionalEnd(a atom.Atom) bool {
	switch a {
	case atom.P, atom.Li, atom.Dt, atom.Dd, atom.Option, atom.Optgroup, atom.Tr, atom.Td, atom.Th,
		atom.Thead, atom.Tbody, atom.Tfoot, atom.Caption, atom.Colgroup, atom.Rb, atom.Rt, atom.Rp, atom.Rtc,
		atom.Html, atom.Head, atom.Body:
		return true
	}
	return void(a)
}

// void elements have no content and no end tag.
func void(a atom.Atom) bool {
	switch a {
	case atom.Area, atom.Base, atom.Br, atom.Col, atom.Embed, atom.Hr, atom.Img, atom.Input, atom.Link,
		atom.Meta, atom.Param, atom.Source, atom.Track, atom.Wbr:
		return true
	}
	return false
}

// prune is the tokenizer pass: it copies the page's tokens up to the
// limits, leaving out start and end tags nested too deep. strict counts
// every element that is not void towards maxDepth.
func prune(ctx context.Context, r io.Reader, lim Limits, strict bool) ([]byte, Result, error) {
	var res Result
	z := html.NewTokenizer(r)
	var out bytes.Buffer
	nest, depth, text := 0, 0, 0
	skipped := map[string]int{} // per tag name, start tags left out whose end tags are still to come
	raw := 0                    // inside script, style, template, noscript: not text a reader sees
	space := true               // the last text byte counted was white space
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return nil, res, ctx.Err()
		}
		tt := z.Next()
		if tt == html.ErrorToken {
			if errors.Is(z.Err(), io.EOF) {
				return out.Bytes(), res, nil
			}
			return nil, res, fmt.Errorf("reading the page: %w", z.Err())
		}
		tok := z.Raw()
		switch tt {
		case html.StartTagToken, html.EndTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			if a == atom.Script || a == atom.Style || a == atom.Template || a == atom.Noscript {
				if tt == html.StartTagToken {
					raw++
				} else if raw > 0 {
					raw--
				}
				break
			}
			counted := nestingTag(a) || !optionalEnd(a) || (strict && !void(a))
			if !counted {
				break
			}
			if tt == html.StartTagToken {
				if (nestingTag(a) && nest >= lim.MaxNesting) || depth >= maxDepth {
					skipped[string(name)]++
					res.Flattened++
					continue
				}
				depth++
				if nestingTag(a) {
					nest++
				}
				break
			}
			if skipped[string(name)] > 0 {
				skipped[string(name)]--
				continue
			}
			if depth > 0 {
				depth--
			}
			if nestingTag(a) && nest > 0 {
				nest--
			}
		case html.TextToken:
			if raw == 0 {
				for _, c := range tok {
					isSpace := c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f'
					if !isSpace || !space {
						text++
					}
					space = isSpace
				}
			}
		}
		if out.Len()+len(tok) > lim.MaxInput {
			res.Cut = true
			return out.Bytes(), res, nil
		}
		out.Write(tok)
		if text > lim.MaxText {
			res.Cut = true
			return out.Bytes(), res, nil
		}
	}
}

// resolveLinks makes every link and image URL absolute against page (the
// converter would resolve them against the scheme and host only). The walk
// is iterative: the tree's depth is bounded, but needs no stack of calls.
func resolveLinks(doc *html.Node, page *url.URL) {
	if page == nil {
		return
	}
	stack := []*html.Node{doc}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.Type == html.ElementNode {
			key := ""
			switch n.DataAtom {
			case atom.A, atom.Area, atom.Link:
				key = "href"
			case atom.Img, atom.Source, atom.Iframe, atom.Video, atom.Audio:
				key = "src"
			}
			for i, at := range n.Attr {
				if at.Namespace == "" && at.Key == key {
					v := strings.TrimSpace(at.Val)
					if u, err := url.Parse(v); err == nil && v != "" {
						n.Attr[i].Val = page.ResolveReference(u).String()
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			stack = append(stack, c)
		}
	}
}

// DecodeText returns a text body as UTF-8: decoded from the charset the
// Content-Type names, else taken as UTF-8 with invalid bytes replaced.
func DecodeText(body []byte, contentType string) string {
	if _, name, ok := strings.Cut(strings.ToLower(contentType), "charset="); ok {
		name = strings.Trim(strings.TrimSpace(strings.SplitN(name, ";", 2)[0]), `"'`)
		if enc, canon := charset.Lookup(name); enc != nil && canon != "utf-8" {
			if b, err := enc.NewDecoder().Bytes(body); err == nil {
				body = b
			}
		}
	}
	return strings.ToValidUTF8(string(body), "\uFFFD")
}
