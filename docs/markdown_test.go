package docs

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// page is one Markdown file split into what the tests look at.
type page struct {
	path   string // relative to the repository root, e.g. "docs/sandbox.md"
	text   string
	lines  []string
	blocks []block
	// prose is the text with fenced blocks blanked out (line numbers kept),
	// where links and headings are looked for.
	prose string
}

// block is a fenced code block.
type block struct {
	lang   string
	line   int      // 1-based line of the opening fence
	body   []string // the lines inside the fences, the fence's indentation removed
	marker string   // the HTML comment on the line before the fence, without <!-- -->
}

var fenceRE = regexp.MustCompile("^( {0,3}|\\s*)(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")

func parsePage(path, text string) *page {
	p := &page{path: path, text: text, lines: strings.Split(text, "\n")}
	prose := make([]string, len(p.lines))
	copy(prose, p.lines)
	for i := 0; i < len(p.lines); i++ {
		m := fenceRE.FindStringSubmatch(p.lines[i])
		if m == nil {
			continue
		}
		indent, fence := len(m[1]), m[2]
		b := block{lang: m[3], line: i + 1}
		if i > 0 {
			prev := strings.TrimSpace(p.lines[i-1])
			if c, ok := strings.CutPrefix(prev, "<!--"); ok {
				if c, ok := strings.CutSuffix(c, "-->"); ok {
					b.marker = strings.TrimSpace(c)
				}
			}
		}
		prose[i] = ""
		j := i + 1
		for ; j < len(p.lines); j++ {
			prose[j] = ""
			l := p.lines[j]
			if t := strings.TrimSpace(l); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				break
			}
			for k := 0; k < indent && strings.HasPrefix(l, " "); k++ {
				l = l[1:]
			}
			b.body = append(b.body, l)
		}
		p.blocks = append(p.blocks, b)
		i = j
	}
	p.prose = strings.Join(prose, "\n")
	return p
}

// heading is a Markdown heading of a page and its GitHub anchor.
type heading struct {
	text, slug string
	line       int
}

var headingRE = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)

// headings lists the page's headings with the anchors GitHub gives them:
// duplicates get -1, -2, … in order.
func (p *page) headings() []heading {
	var out []heading
	seen := map[string]int{}
	for i, l := range strings.Split(p.prose, "\n") {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			seen[s] = n + 1
			s += "-" + strconv.Itoa(n)
		} else {
			seen[s] = 1
		}
		out = append(out, heading{text: m[2], slug: s, line: i + 1})
	}
	return out
}

var (
	mdLinkRE  = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]*)(?:\s+"[^"]*")?\)`)
	htmlIDRE  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	codeRE    = regexp.MustCompile("(`+)([^`]|[^`][\\s\\S]*?[^`])(`+)")
	refDefRE  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s+(\S+)`)
	emphRE    = regexp.MustCompile(`\*+`)
	htmlTagRE = regexp.MustCompile(`<[^>]+>`)
)

// slug is GitHub's anchor for a heading: the rendered text, lower-cased,
// with everything but letters, digits, marks, '_', '-' and spaces removed and
// each space turned into '-'.
func slug(h string) string {
	h = mdLinkRE.ReplaceAllString(h, "$1")
	h = strings.ReplaceAll(h, "`", "")
	h = emphRE.ReplaceAllString(h, "")
	h = htmlTagRE.ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsMark(r), r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// anchors are every anchor a link may name on the page.
func (p *page) anchors() map[string]bool {
	out := map[string]bool{}
	for _, h := range p.headings() {
		out[h.slug] = true
	}
	for _, m := range htmlIDRE.FindAllStringSubmatch(p.prose, -1) {
		out[m[1]] = true
	}
	return out
}

// link is a link target found in a page's prose.
type link struct {
	target string
	line   int
}

// links are the page's inline and reference-definition link targets,
// outside fenced blocks and code spans.
func (p *page) links() []link {
	prose := codeRE.ReplaceAllStringFunc(p.prose, func(s string) string {
		// Keep the line breaks so line numbers stay right.
		return strings.Repeat("\n", strings.Count(s, "\n"))
	})
	var out []link
	add := func(target string, at int) {
		out = append(out, link{target: target, line: 1 + strings.Count(prose[:at], "\n")})
	}
	for _, m := range mdLinkRE.FindAllStringSubmatchIndex(prose, -1) {
		add(prose[m[4]:m[5]], m[0])
	}
	for _, m := range refDefRE.FindAllStringSubmatchIndex(prose, -1) {
		add(prose[m[2]:m[3]], m[0])
	}
	return out
}

// codeSpans are the inline code spans of the page's prose, with the `\|`
// a table cell needs turned back into `|`.
func (p *page) codeSpans() []string {
	var out []string
	for _, m := range codeRE.FindAllStringSubmatch(p.prose, -1) {
		if len(m[1]) != len(m[3]) {
			continue
		}
		s := strings.ReplaceAll(m[2], "\n", " ")
		out = append(out, strings.ReplaceAll(strings.TrimSpace(s), `\|`, "|"))
	}
	return out
}
