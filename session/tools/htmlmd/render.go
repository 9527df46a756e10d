package htmlmd

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// Convert renders the HTML page src as Markdown. Links and images are
// resolved against base, the page's URL (nil leaves them as written).
func Convert(src string, base *url.URL) string {
	r := &renderer{base: base}
	return strings.Join(r.blocks(parse(src).kids), "\n\n")
}

// dropped elements say nothing a reader of the page wants.
var dropped = sync.OnceValue(func() map[string]bool {
	return set("head", "script", "style", "link", "meta", "iframe", "noscript", "input", "textarea", "title",
		"template", "select", "option", "object", "embed", "#comment")
})

// blockTags start a block of their own; the rest flow inline.
var blockTags = sync.OnceValue(func() map[string]bool {
	return set("p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "figure",
		"figcaption", "form", "fieldset", "address", "details", "summary", "center", "dl", "dt", "dd", "h1", "h2",
		"h3", "h4", "h5", "h6", "pre", "blockquote", "ul", "ol", "li", "hr", "table", "caption", "thead", "tbody",
		"tfoot", "tr", "td", "th", "menu", "hgroup", "search", "dialog", "legend")
})

// brMark stands for a line break inside inline text until the paragraph
// is trimmed.
const brMark = "\x00"

type renderer struct{ base *url.URL }

// blocks renders kids as a list of Markdown blocks, to be joined by blank
// lines.
func (r *renderer) blocks(kids []*node) []string {
	var out []string
	var para strings.Builder
	flush := func() {
		if p := finishPara(para.String()); p != "" {
			out = append(out, p)
		}
		para.Reset()
	}
	lastList := false
	for _, k := range kids {
		if dropped()[k.tag] {
			continue
		}
		if k.tag == "" || !blockTags()[k.tag] && !hasBlock(k, 0) {
			if k.tag != "" || strings.TrimSpace(k.text) != "" {
				lastList = false
			}
			r.inline(&para, k)
			continue
		}
		flush()
		before := len(out)
		isList := k.tag == "ul" || k.tag == "ol"
		for _, b := range r.block(k) {
			// Two lists in a row would read as one; a comment keeps them apart.
			if isList && lastList {
				out = append(out, "<!--THE END-->")
			}
			out = append(out, b)
		}
		if len(out) > before {
			lastList = isList
		}
	}
	flush()
	return out
}

// finishPara collapses the whitespace of an inline run and turns the
// break marks into Markdown hard breaks.
func finishPara(s string) string {
	lines := strings.Split(s, brMark)
	for i, l := range lines {
		// Only ASCII space is trimmed: a no-break space is the page's own.
		lines[i] = strings.Trim(collapse(l), " ")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	return strings.Join(lines, "  \n")
}

func collapse(s string) string {
	var b strings.Builder
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isSpace(c) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteByte(c)
	}
	if space {
		b.WriteByte(' ')
	}
	return b.String()
}

func (r *renderer) block(n *node) []string {
	switch n.tag {
	case "h1", "h2", "h3", "h4", "h5", "h6":
		var b strings.Builder
		r.inlineKids(&b, n)
		t := strings.ReplaceAll(finishPara(b.String()), "  \n", " ")
		if t == "" {
			return nil
		}
		return []string{strings.Repeat("#", int(n.tag[1]-'0')) + " " + t}
	case "hr":
		return []string{"* * *"}
	case "pre":
		return []string{r.pre(n)}
	case "blockquote":
		inner := strings.Join(r.blocks(n.kids), "\n\n")
		if inner == "" {
			return nil
		}
		return []string{prefixLines(inner, "> ", ">")}
	case "ul", "ol":
		if l := r.list(n); l != "" {
			return []string{l}
		}
		return nil
	case "table":
		if t := r.table(n); t != "" {
			return []string{t}
		}
	}
	return r.blocks(n.kids)
}

func prefixLines(s, prefix, empty string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l == "" {
			lines[i] = empty
		} else {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

func (r *renderer) list(n *node) string {
	num := 1
	if s, err := strconv.Atoi(n.attr("start")); err == nil && s >= 0 && s < 1e9 {
		num = s
	}
	var items []string
	for _, k := range n.kids {
		if dropped()[k.tag] || (k.tag == "" && strings.TrimSpace(k.text) == "") {
			continue
		}
		kids := []*node{k}
		if k.tag == "li" {
			kids = k.kids
		}
		body := strings.Join(r.blocks(kids), "\n\n")
		marker := "- "
		if n.tag == "ol" {
			marker = strconv.Itoa(num) + ". "
			num++
		}
		pad := strings.Repeat(" ", len(marker))
		items = append(items, strings.TrimRight(marker+strings.TrimPrefix(prefixLines(body, pad, ""), pad), " "))
	}
	return strings.Join(items, "\n")
}

func (r *renderer) pre(n *node) string {
	lang := langOf(n)
	var b strings.Builder
	var walk func(*node)
	walk = func(n *node) {
		for _, k := range n.kids {
			switch {
			case k.tag == "":
				b.WriteString(k.text)
			case k.tag == "br":
				b.WriteByte('\n')
			case dropped()[k.tag]:
			default:
				if lang == "" && k.tag == "code" {
					lang = langOf(k)
				}
				walk(k)
			}
		}
	}
	walk(n)
	code := strings.TrimPrefix(b.String(), "\n")
	code = strings.TrimRight(code, "\n")
	fence := "```"
	for strings.Contains(code, fence) {
		fence += "`"
	}
	return fence + lang + "\n" + code + "\n" + fence
}

// langOf reads a code block's language from a language-x or lang-x class.
func langOf(n *node) string {
	for _, c := range strings.Fields(n.attr("class")) {
		for _, p := range []string{"language-", "lang-"} {
			if l, ok := strings.CutPrefix(c, p); ok && l != "" && !strings.ContainsAny(l, "`") {
				return l
			}
		}
	}
	return ""
}

// table renders a GFM table: the first row is the header.
func (r *renderer) table(n *node) string {
	var rows [][]string
	var walk func(*node)
	walk = func(n *node) {
		for _, k := range n.kids {
			switch k.tag {
			case "tr":
				var row []string
				for _, c := range k.kids {
					if c.tag == "td" || c.tag == "th" {
						var b strings.Builder
						r.inlineKids(&b, c)
						cell := strings.ReplaceAll(finishPara(b.String()), "  \n", " ")
						row = append(row, strings.ReplaceAll(cell, "|", `\|`))
					}
				}
				if len(row) > 0 {
					rows = append(rows, row)
				}
			case "thead", "tbody", "tfoot":
				walk(k)
			}
		}
	}
	walk(n)
	if len(rows) == 0 {
		return ""
	}
	width := 0
	for _, row := range rows {
		width = max(width, len(row))
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			fmt.Fprintf(&b, " %s |", c)
		}
		b.WriteString("\n")
	}
	line(rows[0])
	sep := make([]string, width)
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, row := range rows[1:] {
		line(row)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (r *renderer) inlineKids(b *strings.Builder, n *node) {
	for _, k := range n.kids {
		r.inline(b, k)
	}
}

// inline writes n as inline Markdown.
func (r *renderer) inline(b *strings.Builder, n *node) {
	if dropped()[n.tag] {
		return
	}
	switch n.tag {
	case "":
		b.WriteString(escape(n.text))
	case "br":
		b.WriteString(brMark)
	case "em", "i", "cite", "var", "dfn":
		r.wrap(b, n, "*")
	case "strong", "b":
		r.wrap(b, n, "**")
	case "code", "kbd", "samp", "tt":
		t := strings.TrimSpace(collapse(textOf(n)))
		if t == "" {
			return
		}
		tick := "`"
		for strings.Contains(t, tick) {
			tick += "`"
		}
		if strings.HasPrefix(t, "`") || strings.HasSuffix(t, "`") {
			t = " " + t + " "
		}
		b.WriteString(tick + t + tick)
	case "a":
		var in strings.Builder
		r.inlineKids(&in, n)
		text := strings.TrimSpace(strings.ReplaceAll(collapse(in.String()), brMark, " "))
		href := r.resolve(n.attr("href"))
		if text == "" {
			return
		}
		if href == "" {
			b.WriteString(text)
			return
		}
		b.WriteString("[" + text + "](" + href + title(n) + ")")
	case "img":
		src := r.resolve(n.attr("src"))
		if src == "" {
			return
		}
		alt := altEscaper().Replace(n.attr("alt"))
		b.WriteString("![" + alt + "](" + src + title(n) + ")")
	default:
		if blockTags()[n.tag] {
			b.WriteByte(' ')
			r.inlineKids(b, n)
			b.WriteByte(' ')
			return
		}
		r.inlineKids(b, n)
	}
}

func title(n *node) string {
	t := n.attr("title")
	if t == "" {
		return ""
	}
	return ` "` + strings.ReplaceAll(collapse(t), `"`, `\"`) + `"`
}

// wrap writes n's content between marks, keeping its outer spaces outside
// them so "a<em> b </em>c" reads as "a *b* c".
func (r *renderer) wrap(b *strings.Builder, n *node, mark string) {
	var in strings.Builder
	r.inlineKids(&in, n)
	s := in.String()
	t := strings.Trim(s, " \t\n\r\f"+brMark)
	if t == "" {
		b.WriteString(s)
		return
	}
	lead, trail := s[:strings.Index(s, t)], s[strings.Index(s, t)+len(t):]
	b.WriteString(lead + mark + t + mark + trail)
}

func textOf(n *node) string {
	if n.tag == "" {
		return n.text
	}
	var b strings.Builder
	for _, k := range n.kids {
		if !dropped()[k.tag] {
			b.WriteString(textOf(k))
		}
	}
	return b.String()
}

// resolve makes ref absolute against the page URL.
func (r *renderer) resolve(ref string) string {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return ""
	}
	u, err := url.Parse(ref)
	if err != nil {
		return strings.ReplaceAll(ref, " ", "%20")
	}
	if r.base != nil {
		u = r.base.ResolveReference(u)
	}
	s := u.String()
	return urlEscaper().Replace(s)
}

// The replacers build their lookup tables on first use, not at start-up.
var (
	altEscaper = sync.OnceValue(func() *strings.Replacer {
		return strings.NewReplacer("[", `\[`, "]", `\]`, "\n", " ")
	})
	urlEscaper = sync.OnceValue(func() *strings.Replacer {
		return strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29")
	})
)

// escape keeps page text from reading as Markdown syntax: backticks,
// opening brackets, angle brackets, and * or _ that could open emphasis.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '`', '[', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '*', '_':
			if i+1 < len(s) && !isSpace(s[i+1]) {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// hasBlock reports whether an inline element holds a block, as an
// unclosed span around the rest of a page does; it is then laid out as
// blocks, not run into one line.
func hasBlock(n *node, depth int) bool {
	if n.tag == "a" || depth > maxDepth {
		return false
	}
	for _, k := range n.kids {
		if k.tag != "" && !dropped()[k.tag] && (blockTags()[k.tag] || hasBlock(k, depth+1)) {
			return true
		}
	}
	return false
}
