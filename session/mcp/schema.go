package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/acpd/acpd/session/jsonschema"
)

// schema is a server's tool input schema compiled for checking the model's
// arguments before they are sent. It understands the JSON Schema that MCP
// servers emit (drafts 2020-12 and 07): type, enum, const, the object,
// array, string and number assertions, the applicators (allOf, anyOf,
// oneOf, not, if/then/else, dependent schemas) and $ref to any place in the
// same document. It is acpd's own rather than a library's: every JSON
// Schema library acpd could link compiles its meta-schemas at package init,
// in every process, before the editor's initialize is answered.
//
// What it cannot judge faithfully makes compileSchema fail, and the tool
// then takes any object and leaves the arguments to the server: another
// dialect, a $ref outside the document (a server's schema must not make
// the daemon read files or fetch URLs) or to an anchor, $dynamicRef,
// unevaluatedProperties/Items, a pattern Go's regexp cannot compile, a
// keyword with a value of the wrong kind. Formats are annotations, as
// 2020-12 has them by default; unknown keywords are ignored, as JSON Schema
// says.
type schema struct {
	root *node
}

// node is one compiled (sub)schema; path is where it is in the document,
// as a JSON pointer, for messages.
type node struct {
	path    string
	boolean *bool // a true or false schema

	ref *node

	types    []string
	enum     []any
	constant *any

	properties    map[string]*node
	patternProps  []patternProp
	additional    *node
	propertyNames *node
	required      []string
	minProps      *int
	maxProps      *int
	depRequired   map[string][]string
	depSchemas    map[string]*node

	prefixItems []*node
	items       *node // the items after prefixItems
	contains    *node
	minContains *int
	maxContains *int
	minItems    *int
	maxItems    *int
	unique      bool

	minLength *int
	maxLength *int
	pattern   *regexp.Regexp

	minimum    *big.Rat
	maximum    *big.Rat
	exclMin    *big.Rat
	exclMax    *big.Rat
	multipleOf *big.Rat

	allOf, anyOf, oneOf []*node
	not, ifS, thenS     *node
	elseS               *node
}

type patternProp struct {
	re *regexp.Regexp
	n  *node
}

// dialects maps each accepted $schema, without a trailing '#' (servers
// write it both ways), to whether it is draft-07.
// Built on first use: a package-level map is built by package
// initialization, on every start of acpd.
var dialects = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"": false,
		"https://json-schema.org/draft/2020-12/schema": false,
		"http://json-schema.org/draft-07/schema":       true,
		"https://json-schema.org/draft-07/schema":      true,
	}
})

// unsupportedKeywords change what a schema means in ways this validator
// does not follow: a schema using one is not enforced at all rather than
// enforced wrongly.
var unsupportedKeywords = []string{"$dynamicRef", "$recursiveRef", "unevaluatedProperties", "unevaluatedItems"}

type compiler struct {
	doc    any
	draft7 bool
	nodes  map[string]*node // by path
	refs   []pendingRef
}

type pendingRef struct {
	from   *node
	target string // a JSON pointer into doc
}

// maxDepth bounds how deep validation follows subschemas and $refs: a
// schema whose $refs loop without consuming the value ends there. maxSteps
// bounds the whole check: applicators that each re-check the value through
// $refs multiply, and a hostile schema must not hold a turn.
const (
	maxDepth = 100
	maxSteps = 100_000
)

// walk is where a check is: how deep, and the steps taken so far.
type walk struct {
	depth int
	steps *int
}

func (w walk) in() walk { return walk{depth: w.depth + 1, steps: w.steps} }

// compileSchema prepares a server's input schema; see schema for what
// makes it refuse one.
func compileSchema(raw []byte) (*schema, error) {
	doc, err := jsonschema.Decode(raw)
	if err != nil {
		return nil, err
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("input schema is not an object")
	}
	dialect, _ := m["$schema"].(string)
	draft7, ok := dialects()[strings.TrimSuffix(dialect, "#")]
	if !ok {
		// Another draft's keywords mean other things (draft-04's boolean
		// exclusiveMinimum, 2019-09's array items): validating them as
		// 2020-12 could refuse good arguments, so the server judges.
		return nil, fmt.Errorf("input schema dialect %q is not supported", dialect)
	}
	c := &compiler{doc: doc, draft7: draft7, nodes: map[string]*node{}}
	root, err := c.compile(doc, "")
	if err != nil {
		return nil, err
	}
	for len(c.refs) > 0 {
		r := c.refs[0]
		c.refs = c.refs[1:]
		target, ok := c.nodes[r.target]
		if !ok {
			sub, found := lookupPointer(doc, r.target)
			if !found {
				return nil, fmt.Errorf("%s: $ref %q points at nothing", r.from.path, "#"+r.target)
			}
			if target, err = c.compile(sub, r.target); err != nil {
				return nil, err
			}
		}
		r.from.ref = target
	}
	return &schema{root: root}, nil
}

func (c *compiler) compile(v any, path string) (*node, error) {
	if n, ok := c.nodes[path]; ok {
		return n, nil
	}
	n := &node{path: path}
	c.nodes[path] = n
	switch s := v.(type) {
	case bool:
		n.boolean = &s
		return n, nil
	case map[string]any:
		if err := c.fill(n, s); err != nil {
			return nil, err
		}
		return n, nil
	}
	return nil, fmt.Errorf("%s: a schema must be an object or a boolean", orRoot(path))
}

func (c *compiler) fill(n *node, m map[string]any) error {
	at := func(k string) string { return n.path + "/" + jsonschema.PointerToken(k) }
	bad := func(k string, err error) error { return fmt.Errorf("%s: %v", at(k), err) }
	for _, k := range unsupportedKeywords {
		if _, ok := m[k]; ok {
			return fmt.Errorf("%s: %s is not supported", orRoot(n.path), k)
		}
	}
	if ref, ok := m["$ref"]; ok {
		s, ok := ref.(string)
		if !ok {
			return bad("$ref", errors.New("not a string"))
		}
		ptr, err := localPointer(s)
		if err != nil {
			return bad("$ref", err)
		}
		c.refs = append(c.refs, pendingRef{from: n, target: ptr})
		if c.draft7 {
			// In draft-07 a $ref replaces its siblings.
			return nil
		}
	}
	// Definitions are compiled as they are referenced; compiling them all
	// first would refuse a schema for an unused broken one.
	var err error
	for k, v := range m {
		switch k {
		case "type":
			n.types, err = jsonschema.TypeNames(v)
		case "enum":
			list, ok := v.([]any)
			if !ok {
				err = errors.New("not an array")
			}
			n.enum = list
		case "const":
			n.constant = &v
		case "properties", "patternProperties", "dependentSchemas":
			props, ok := v.(map[string]any)
			if !ok {
				err = errors.New("not an object")
				break
			}
			names := make([]string, 0, len(props))
			for name := range props {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				sub, cerr := c.compile(props[name], at(k)+"/"+jsonschema.PointerToken(name))
				if cerr != nil {
					return cerr
				}
				switch k {
				case "properties":
					if n.properties == nil {
						n.properties = map[string]*node{}
					}
					n.properties[name] = sub
				case "dependentSchemas":
					if n.depSchemas == nil {
						n.depSchemas = map[string]*node{}
					}
					n.depSchemas[name] = sub
				default:
					re, rerr := regexp.Compile(name)
					if rerr != nil {
						return bad(k, rerr)
					}
					n.patternProps = append(n.patternProps, patternProp{re: re, n: sub})
				}
			}
		case "additionalProperties":
			n.additional, err = c.compile(v, at(k))
		case "propertyNames":
			n.propertyNames, err = c.compile(v, at(k))
		case "required":
			n.required, err = jsonschema.StringList(v)
		case "dependentRequired":
			n.depRequired, err = dependentRequired(v)
		case "dependencies":
			// draft-07: a list of names or a schema per property.
			deps, ok := v.(map[string]any)
			if !ok {
				err = errors.New("not an object")
				break
			}
			for name, d := range deps {
				if list, isList := d.([]any); isList {
					names, lerr := jsonschema.StringList(list)
					if lerr != nil {
						return bad(k, lerr)
					}
					if n.depRequired == nil {
						n.depRequired = map[string][]string{}
					}
					n.depRequired[name] = names
					continue
				}
				sub, cerr := c.compile(d, at(k)+"/"+jsonschema.PointerToken(name))
				if cerr != nil {
					return cerr
				}
				if n.depSchemas == nil {
					n.depSchemas = map[string]*node{}
				}
				n.depSchemas[name] = sub
			}
		case "minProperties":
			n.minProps, err = count(v)
		case "maxProperties":
			n.maxProps, err = count(v)
		case "prefixItems":
			if c.draft7 {
				break // not a draft-07 keyword
			}
			n.prefixItems, err = c.list(v, at(k))
		case "items":
			if list, ok := v.([]any); ok {
				if !c.draft7 {
					err = errors.New("an array of schemas is prefixItems in 2020-12")
					break
				}
				n.prefixItems, err = c.list(list, at(k))
				break
			}
			n.items, err = c.compile(v, at(k))
		case "additionalItems":
			if c.draft7 {
				if _, tuple := m["items"].([]any); tuple {
					n.items, err = c.compile(v, at(k))
				}
			}
		case "contains":
			n.contains, err = c.compile(v, at(k))
		case "minContains":
			n.minContains, err = count(v)
		case "maxContains":
			n.maxContains, err = count(v)
		case "minItems":
			n.minItems, err = count(v)
		case "maxItems":
			n.maxItems, err = count(v)
		case "uniqueItems":
			b, ok := v.(bool)
			if !ok {
				err = errors.New("not a boolean")
			}
			n.unique = b
		case "minLength":
			n.minLength, err = count(v)
		case "maxLength":
			n.maxLength, err = count(v)
		case "pattern":
			n.pattern, err = jsonschema.Pattern(v)
		case "minimum":
			n.minimum, err = number(v)
		case "maximum":
			n.maximum, err = number(v)
		case "exclusiveMinimum":
			n.exclMin, err = number(v)
		case "exclusiveMaximum":
			n.exclMax, err = number(v)
		case "multipleOf":
			n.multipleOf, err = number(v)
			if err == nil && n.multipleOf.Sign() <= 0 {
				err = errors.New("not a positive number")
			}
		case "allOf":
			n.allOf, err = c.list(v, at(k))
		case "anyOf":
			n.anyOf, err = c.list(v, at(k))
		case "oneOf":
			n.oneOf, err = c.list(v, at(k))
		case "not":
			n.not, err = c.compile(v, at(k))
		case "if":
			n.ifS, err = c.compile(v, at(k))
		case "then":
			n.thenS, err = c.compile(v, at(k))
		case "else":
			n.elseS, err = c.compile(v, at(k))
		}
		if err != nil {
			return bad(k, err)
		}
	}
	return nil
}

func (c *compiler) list(v any, path string) ([]*node, error) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, errors.New("not a non-empty array")
	}
	out := make([]*node, len(list))
	for i, e := range list {
		n, err := c.compile(e, path+"/"+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// localPointer is the JSON pointer of a $ref into the same document ("#",
// "#/$defs/a%20b"); anything else is refused.
func localPointer(ref string) (string, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return "", fmt.Errorf("%q points outside the schema", ref)
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return "", err
	}
	if frag != "" && frag[0] != '/' {
		return "", fmt.Errorf("%q names an anchor", ref)
	}
	return frag, nil
}

// lookupPointer finds the value at a JSON pointer.
func lookupPointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func dependentRequired(v any) (map[string][]string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not an object")
	}
	out := make(map[string][]string, len(m))
	for k, e := range m {
		list, err := jsonschema.StringList(e)
		if err != nil {
			return nil, err
		}
		out[k] = list
	}
	return out, nil
}

func count(v any) (*int, error) {
	r, err := number(v)
	if err != nil {
		return nil, err
	}
	if !r.IsInt() || r.Sign() < 0 || !r.Num().IsInt64() {
		return nil, jsonschema.ErrNotCount
	}
	i := int(r.Num().Int64())
	return &i, nil
}

func number(v any) (*big.Rat, error) {
	n, err := jsonschema.Number(v)
	if err != nil {
		return nil, err
	}
	r, ok := new(big.Rat).SetString(n.String())
	if !ok {
		return nil, fmt.Errorf("%s is not a number", n)
	}
	return r, nil
}

// validate checks the model's arguments (a JSON object, as text) and
// returns every violation, each naming where in the arguments it is, the
// keyword and where in the schema.
func (s *schema) validate(args []byte) error {
	v, err := jsonschema.Decode(args)
	if err != nil {
		return err
	}
	var errs []string
	w := walk{steps: new(int)}
	s.root.check(v, "", w, &errs)
	if *w.steps > maxSteps {
		return fmt.Errorf("checking the arguments takes more than %d steps; the schema is too complex", maxSteps)
	}
	if len(errs) == 0 {
		return nil
	}
	slices.Sort(errs)
	errs = slices.Compact(errs)
	const maxErrs = 10
	if len(errs) > maxErrs {
		errs = append(errs[:maxErrs], fmt.Sprintf("and %d more", len(errs)-maxErrs))
	}
	return errors.New(strings.Join(errs, "; "))
}

// valid reports whether v passes n, without collecting messages.
func (n *node) valid(v any, at string, w walk) bool {
	var errs []string
	n.check(v, at, w, &errs)
	return len(errs) == 0 && *w.steps <= maxSteps
}

func (n *node) check(v any, at string, w walk, out *[]string) {
	add := func(keyword, format string, a ...any) {
		msg := orArguments(at) + ": " + keyword + ": " + fmt.Sprintf(format, a...)
		if n.path != "" {
			msg += " (schema " + n.path + ")"
		}
		*out = append(*out, msg)
	}
	if w.depth > maxDepth {
		add("$ref", "the schema nests deeper than %d levels", maxDepth)
		return
	}
	if *w.steps++; *w.steps > maxSteps {
		return // validate reports it once
	}
	if n.boolean != nil {
		if !*n.boolean {
			add("false", "no value is allowed here")
		}
		return
	}
	if n.ref != nil {
		n.ref.check(v, at, w.in(), out)
	}
	got := jsonType(v)
	if !jsonschema.TypeAllowed(n.types, got) {
		add("type", "%s is %s, want %s", short(v), article(got), strings.Join(n.types, " or "))
		return // the other assertions are about the wanted type
	}
	if n.enum != nil && !slices.ContainsFunc(n.enum, func(e any) bool { return jsonEqual(e, v) }) {
		add("enum", "%s is not one of %s", short(v), short(n.enum))
	}
	if n.constant != nil && !jsonEqual(*n.constant, v) {
		add("const", "%s is not %s", short(v), short(*n.constant))
	}
	switch t := v.(type) {
	case map[string]any:
		n.checkObject(t, at, w, out, add)
	case []any:
		n.checkArray(t, at, w, out, add)
	case string:
		l := utf8.RuneCountInString(t)
		if n.minLength != nil && l < *n.minLength {
			add("minLength", "%d characters, want at least %d", l, *n.minLength)
		}
		if n.maxLength != nil && l > *n.maxLength {
			add("maxLength", "%d characters, want at most %d", l, *n.maxLength)
		}
		if n.pattern != nil && !n.pattern.MatchString(t) {
			add("pattern", "%s does not match %q", short(t), n.pattern.String())
		}
	case json.Number:
		n.checkNumber(t, add)
	}
	for _, sub := range n.allOf {
		sub.check(v, at, w.in(), out)
	}
	if n.anyOf != nil {
		var why []string
		matched := false
		for _, sub := range n.anyOf {
			var errs []string
			sub.check(v, at, w.in(), &errs)
			if len(errs) == 0 {
				matched = true
				break
			}
			why = append(why, errs[0])
		}
		if !matched {
			add("anyOf", "matches none of the %d alternatives (%s)", len(n.anyOf), strings.Join(why, "; "))
		}
	}
	if n.oneOf != nil {
		matches := 0
		for _, sub := range n.oneOf {
			if sub.valid(v, at, w.in()) {
				matches++
			}
		}
		if matches != 1 {
			add("oneOf", "matches %d of the %d alternatives, want exactly one", matches, len(n.oneOf))
		}
	}
	if n.not != nil && n.not.valid(v, at, w.in()) {
		add("not", "%s matches a schema it must not", short(v))
	}
	if n.ifS != nil {
		if n.ifS.valid(v, at, w.in()) {
			if n.thenS != nil {
				n.thenS.check(v, at, w.in(), out)
			}
		} else if n.elseS != nil {
			n.elseS.check(v, at, w.in(), out)
		}
	}
}

func (n *node) checkObject(t map[string]any, at string, w walk, out *[]string, add func(string, string, ...any)) {
	if msg := jsonschema.Missing(t, n.required, strconv.Quote); msg != "" {
		add("required", "%s", msg)
	}
	if n.minProps != nil && len(t) < *n.minProps {
		add("minProperties", "%d properties, want at least %d", len(t), *n.minProps)
	}
	if n.maxProps != nil && len(t) > *n.maxProps {
		add("maxProperties", "%d properties, want at most %d", len(t), *n.maxProps)
	}
	names := make([]string, 0, len(t))
	for name := range t {
		names = append(names, name)
	}
	sort.Strings(names)
	var extra []string
	for _, name := range names {
		pv, sub := t[name], at+"/"+jsonschema.PointerToken(name)
		if n.propertyNames != nil {
			n.propertyNames.check(name, sub, w.in(), out)
		}
		known := false
		if ps, ok := n.properties[name]; ok {
			known = true
			ps.check(pv, sub, w.in(), out)
		}
		for _, pp := range n.patternProps {
			if pp.re.MatchString(name) {
				known = true
				pp.n.check(pv, sub, w.in(), out)
			}
		}
		if !known && n.additional != nil {
			if n.additional.boolean != nil && !*n.additional.boolean {
				extra = append(extra, strconv.Quote(name))
			} else {
				n.additional.check(pv, sub, w.in(), out)
			}
		}
		for _, dep := range n.depRequired[name] {
			if _, ok := t[dep]; !ok {
				add("dependentRequired", "property %q needs %q", name, dep)
			}
		}
		if ds, ok := n.depSchemas[name]; ok {
			ds.check(t, at, w.in(), out)
		}
	}
	if len(extra) > 0 {
		add("additionalProperties", "property %s is not allowed", strings.Join(extra, ", "))
	}
}

func (n *node) checkArray(t []any, at string, w walk, out *[]string, add func(string, string, ...any)) {
	if n.minItems != nil && len(t) < *n.minItems {
		add("minItems", "%d items, want at least %d", len(t), *n.minItems)
	}
	if n.maxItems != nil && len(t) > *n.maxItems {
		add("maxItems", "%d items, want at most %d", len(t), *n.maxItems)
	}
	for i, e := range t {
		sub := at + "/" + strconv.Itoa(i)
		switch {
		case i < len(n.prefixItems):
			n.prefixItems[i].check(e, sub, w.in(), out)
		case n.items != nil:
			n.items.check(e, sub, w.in(), out)
		}
	}
	if n.unique {
	outer:
		for i := range t {
			for j := range i {
				if jsonEqual(t[i], t[j]) {
					add("uniqueItems", "items %d and %d are equal", j, i)
					break outer
				}
			}
		}
	}
	if n.contains != nil {
		matches := 0
		for i, e := range t {
			if n.contains.valid(e, at+"/"+strconv.Itoa(i), w.in()) {
				matches++
			}
		}
		lo := 1
		if n.minContains != nil {
			lo = *n.minContains
		}
		if matches < lo {
			add("contains", "%d items match, want at least %d", matches, lo)
		}
		if n.maxContains != nil && matches > *n.maxContains {
			add("maxContains", "%d items match, want at most %d", matches, *n.maxContains)
		}
	}
}

func (n *node) checkNumber(t json.Number, add func(string, string, ...any)) {
	r, ok := new(big.Rat).SetString(t.String())
	if !ok {
		add("type", "%s is not a number", t)
		return
	}
	if n.minimum != nil && r.Cmp(n.minimum) < 0 {
		add("minimum", "%s is less than %s", t, ratText(n.minimum))
	}
	if n.maximum != nil && r.Cmp(n.maximum) > 0 {
		add("maximum", "%s is more than %s", t, ratText(n.maximum))
	}
	if n.exclMin != nil && r.Cmp(n.exclMin) <= 0 {
		add("exclusiveMinimum", "%s is not more than %s", t, ratText(n.exclMin))
	}
	if n.exclMax != nil && r.Cmp(n.exclMax) >= 0 {
		add("exclusiveMaximum", "%s is not less than %s", t, ratText(n.exclMax))
	}
	if n.multipleOf != nil && !new(big.Rat).Quo(r, n.multipleOf).IsInt() {
		add("multipleOf", "%s is not a multiple of %s", t, ratText(n.multipleOf))
	}
}

func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// jsonType names v's JSON type; a number without a fractional part is an
// integer, as JSON Schema counts 1.0 as one.
func jsonType(v any) string { return jsonschema.Kind(v, isInteger) }

// isInteger reads n exactly: 1.0 and 1e2 are integers, 1.0000000000000000001
// is not.
func isInteger(n json.Number) bool {
	if !strings.ContainsAny(n.String(), ".eE") {
		return true // the common case, without big.Rat
	}
	r, ok := new(big.Rat).SetString(n.String())
	return ok && r.IsInt()
}

func article(typ string) string {
	switch typ {
	case "object", "array", "integer":
		return "an " + typ
	case "null":
		return "null"
	}
	return "a " + typ
}

// jsonEqual compares two decoded JSON values, numbers by value.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, okx := new(big.Rat).SetString(x.String())
		ry, oky := new(big.Rat).SetString(y.String())
		return okx && oky && rx.Cmp(ry) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// short is v as JSON, cut to a readable length.
func short(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const n = 60
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func orRoot(path string) string {
	if path == "" {
		return "schema"
	}
	return path
}

func orArguments(at string) string {
	if at == "" {
		return "arguments"
	}
	return at
}
