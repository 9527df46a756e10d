// Package htmlmd turns an HTML page into Markdown for web_fetch: a
// tolerant tokenizer, a small tree builder that repairs unclosed and
// misnested tags, and a renderer for the elements a reader needs
// (headings, paragraphs, emphasis, code, links, images, lists, quotes,
// tables, rules). It replaces a library whose HTML parser builds a
// 2,231-entry entity map in init, in every acpd process; entities here go
// through the standard library's html package, which builds its table on
// first use.
package htmlmd

import (
	"html"
	"strings"
	"sync"
)

// maxDepth bounds nesting: deeper elements are kept, their contents
// flattened into the element at this depth, so rendering recursion and
// list indentation stay bounded on hostile input.
const maxDepth = 100

type attr struct{ key, val string }

type node struct {
	tag    string // "" for a text node
	text   string
	attrs  []attr
	kids   []*node
	parent *node
}

func (n *node) attr(key string) string {
	for _, a := range n.attrs {
		if a.key == key {
			return a.val
		}
	}
	return ""
}

var voidTags = sync.OnceValue(func() map[string]bool {
	return set("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
		"source", "track", "wbr", "keygen")
})

// rawTags hold text up to their end tag, never markup.
var rawTags = sync.OnceValue(func() map[string]bool {
	return set("script", "style", "textarea", "title", "xmp", "noscript", "iframe", "noembed", "noframes", "plaintext")
})

// closesP are the start tags that end an open paragraph.
var closesP = sync.OnceValue(func() map[string]bool {
	return set("address", "article", "aside", "blockquote", "details", "div", "dl", "fieldset", "figcaption",
		"figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "main", "menu", "nav", "ol",
		"p", "pre", "section", "table", "ul", "li", "dd", "dt")
})

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// parse builds a tree from s, repairing it as it goes.
func parse(s string) *node {
	root := &node{tag: "#root"}
	b := builder{stack: []*node{root}}
	for i := 0; i < len(s); {
		if s[i] != '<' {
			j := strings.IndexByte(s[i:], '<')
			if j < 0 {
				j = len(s) - i
			}
			b.text(html.UnescapeString(s[i : i+j]))
			i += j
			continue
		}
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, "<!--"):
			i = skipPast(s, i+4, "-->")
		case strings.HasPrefix(rest, "<![CDATA["):
			i = skipPast(s, i+9, "]]>")
		case strings.HasPrefix(rest, "<!"), strings.HasPrefix(rest, "<?"):
			i = skipPast(s, i+2, ">")
		case strings.HasPrefix(rest, "</") && len(rest) > 2 && isLetter(rest[2]):
			name, _, end := parseTag(s, i+2)
			b.close(name)
			i = end
		case len(rest) > 1 && isLetter(rest[1]):
			name, attrs, end := parseTag(s, i+1)
			i = end
			if rawTags()[name] {
				stop := indexFold(s[i:], "</"+name)
				if name == "plaintext" || stop < 0 {
					stop = len(s) - i
				}
				body := s[i : i+stop]
				if name == "textarea" || name == "title" {
					body = html.UnescapeString(body)
				}
				b.open(name, attrs)
				b.text(body)
				b.close(name)
				i = skipPast(s, i+stop, ">")
				continue
			}
			b.open(name, attrs)
		default:
			b.text("<")
			i++
		}
	}
	return root
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// skipPast returns the index after the first end at or after i, or len(s).
func skipPast(s string, i int, end string) int {
	if i > len(s) {
		return len(s)
	}
	j := strings.Index(s[i:], end)
	if j < 0 {
		return len(s)
	}
	return i + j + len(end)
}

func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			return -1
		}
		i += j
		if i+len(sub) <= len(s) && strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// parseTag reads a tag name and attributes starting at i (just past '<'
// or '</'), returning the lower-cased name, the attributes with entities
// decoded, and the index after the closing '>'.
func parseTag(s string, i int) (name string, attrs []attr, end int) {
	j := i
	for j < len(s) && !isSpace(s[j]) && s[j] != '>' && s[j] != '/' {
		j++
	}
	name = strings.ToLower(s[i:j])
	for j < len(s) {
		for j < len(s) && (isSpace(s[j]) || s[j] == '/') {
			j++
		}
		if j >= len(s) {
			break
		}
		if s[j] == '>' {
			return name, attrs, j + 1
		}
		k := j
		for k < len(s) && !isSpace(s[k]) && s[k] != '>' && s[k] != '=' && (s[k] != '/' || k == j) {
			k++
		}
		key := strings.ToLower(s[j:k])
		j = k
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		val := ""
		if j < len(s) && s[j] == '=' {
			j++
			for j < len(s) && isSpace(s[j]) {
				j++
			}
			if j < len(s) && (s[j] == '"' || s[j] == '\'') {
				q := s[j]
				e := strings.IndexByte(s[j+1:], q)
				if e < 0 {
					val, j = s[j+1:], len(s)
				} else {
					val, j = s[j+1:j+1+e], j+2+e
				}
			} else {
				k := j
				for k < len(s) && !isSpace(s[k]) && s[k] != '>' {
					k++
				}
				val, j = s[j:k], k
			}
		}
		if len(attrs) < 64 {
			attrs = append(attrs, attr{key, html.UnescapeString(val)})
		}
	}
	return name, attrs, len(s)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

type builder struct{ stack []*node }

func (b *builder) top() *node { return b.stack[len(b.stack)-1] }

func (b *builder) text(t string) {
	if t == "" {
		return
	}
	top := b.top()
	if k := len(top.kids); k > 0 && top.kids[k-1].tag == "" {
		top.kids[k-1].text += t
		return
	}
	top.kids = append(top.kids, &node{text: t, parent: top})
}

// find returns the stack index of the innermost open name, looking no
// further out than the nearest of stops; -1 if none.
func (b *builder) find(name string, stops map[string]bool) int {
	for i := len(b.stack) - 1; i > 0; i-- {
		t := b.stack[i].tag
		if t == name {
			return i
		}
		if stops[t] {
			return -1
		}
	}
	return -1
}

var (
	pScope = sync.OnceValue(func() map[string]bool {
		return set("td", "th", "caption", "table", "button", "li", "blockquote", "dd", "dt")
	})
	listScope = sync.OnceValue(func() map[string]bool {
		return set("ul", "ol", "table", "td", "th")
	})
	dlScope = sync.OnceValue(func() map[string]bool {
		return set("dl", "table", "td", "th")
	})
	rowScope = sync.OnceValue(func() map[string]bool {
		return set("table", "thead", "tbody", "tfoot")
	})
	cellScope = sync.OnceValue(func() map[string]bool {
		return set("tr", "table")
	})
)

func (b *builder) open(name string, attrs []attr) {
	switch name {
	case "html", "body":
		return
	}
	if closesP()[name] {
		if i := b.find("p", pScope()); i > 0 {
			b.stack = b.stack[:i]
		}
	}
	switch name {
	case "li":
		b.popTo("li", listScope())
	case "dt", "dd":
		if i := b.find("dt", dlScope()); i > 0 {
			b.stack = b.stack[:i]
		}
		b.popTo("dd", dlScope())
	case "tr":
		b.popTo("tr", rowScope())
	case "td", "th":
		if i := b.find("td", cellScope()); i > 0 {
			b.stack = b.stack[:i]
		}
		b.popTo("th", cellScope())
	}
	top := b.top()
	n := &node{tag: name, attrs: attrs, parent: top}
	top.kids = append(top.kids, n)
	if !voidTags()[name] && len(b.stack) < maxDepth {
		b.stack = append(b.stack, n)
	}
}

func (b *builder) popTo(name string, stops map[string]bool) {
	if i := b.find(name, stops); i > 0 {
		b.stack = b.stack[:i]
	}
}

// close ends the innermost open name; an end tag with nothing open to
// close is dropped.
func (b *builder) close(name string) {
	if name == "br" {
		b.open("br", nil)
		return
	}
	if i := b.find(name, nil); i > 0 {
		b.stack = b.stack[:i]
	}
}
