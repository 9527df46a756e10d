package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// SourceKind says which layer set a value.
type SourceKind int

// Layers, lowest first.
const (
	SourceDefault SourceKind = iota
	SourceFile
	SourceEnv
	SourceFlag
)

// Source is where one value came from.
type Source struct {
	Kind      SourceKind
	File      string // SourceFile: the file's absolute path
	Line, Col int    // SourceFile: position of the key
	Name      string // SourceEnv: variable name; SourceFlag: flag name without dashes
}

func (s Source) String() string {
	switch s.Kind {
	case SourceFile:
		return fmt.Sprintf("%s:%d", s.File, s.Line)
	case SourceEnv:
		return "env " + s.Name
	case SourceFlag:
		return "flag --" + s.Name
	}
	return "default"
}

// Sources maps dotted keys ("model.name") to the layer that set them; a
// missing key means the built-in default.
type Sources map[string]Source

// Of returns the source of key (the default when no layer set it).
func (s Sources) Of(key string) Source { return s[key] }

// LoadOptions are the inputs of Load besides the files themselves.
type LoadOptions struct {
	// ConfigPath is the --config flag; it takes precedence over $ACPD_CONFIG.
	ConfigPath string
	// Flags holds the raw values of the configuration flags the user actually
	// set, keyed by flag name without dashes (see Flags).
	Flags map[string]string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// ReadFile reads a config file; nil means os.ReadFile. A missing user
	// file must be reported as fs.ErrNotExist.
	ReadFile func(string) ([]byte, error)
	// WorkDir resolves relative paths given by env or flags; "" means the
	// process's working directory.
	WorkDir string
	// NoModel is for a command that asks no model (acpd run --rewind):
	// the rules that only matter to a model request are not checked.
	NoModel bool
}

// Load resolves the configuration. Layers, lowest first: defaults; the user
// file ($XDG_CONFIG_HOME/acpd/config.toml, if it exists); the file named by
// --config or $ACPD_CONFIG; the environment; the flags in opts.Flags. Any
// mistake is returned as one or more *Error (joined with errors.Join).
func Load(opts LoadOptions) (Config, Sources, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	readFile := opts.ReadFile
	if readFile == nil {
		readFile = os.ReadFile
	}
	workDir := opts.WorkDir
	if workDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return Config{}, nil, fmt.Errorf("load config: %w", err)
		}
		workDir = wd
	}
	home := getenv("HOME")
	cfg, src := Default(), Sources{}
	cfg.Session.DataDir = defaultDataDir(getenv)

	if p := userConfigPath(getenv); p != "" {
		data, err := readFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return Config{}, nil, &Error{File: p, Line: 1, Col: 1, Msg: "cannot read config file: " + err.Error(), Err: err}
		default:
			if err := applyFile(&cfg, src, p, data, home); err != nil {
				return Config{}, nil, err
			}
		}
	}

	path, origin := opts.ConfigPath, "flag --config"
	if path == "" {
		path, origin = getenv("ACPD_CONFIG"), "env ACPD_CONFIG"
	}
	if path != "" {
		abs, err := resolver{base: workDir, home: home}.path(path)
		if err != nil {
			return Config{}, nil, &Error{Origin: origin, Msg: err.Error(), Err: err}
		}
		data, err := readFile(abs)
		if err != nil {
			return Config{}, nil, &Error{Origin: origin, Msg: "cannot read config file: " + err.Error(), Err: err}
		}
		if err := applyFile(&cfg, src, abs, data, home); err != nil {
			return Config{}, nil, err
		}
	}

	textRes := resolver{base: workDir, home: home}
	var errs []error
	for _, f := range fields() {
		for _, name := range f.envs {
			v := getenv(name)
			if v == "" {
				continue
			}
			if err := f.decode(&cfg, v, true, textRes); err != nil {
				errs = append(errs, &Error{Origin: "env " + name, Key: f.key(), Msg: keyMsg(f.key(), err), Err: err})
				continue
			}
			src[f.key()] = Source{Kind: SourceEnv, Name: name}
		}
	}
	if len(errs) > 0 {
		return Config{}, nil, errors.Join(errs...)
	}

	names := make([]string, 0, len(opts.Flags))
	for name := range opts.Flags {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		f, negated := flagField(name)
		if f == nil {
			errs = append(errs, &Error{Origin: "flag --" + name, Msg: "not a configuration flag"})
			continue
		}
		raw := opts.Flags[name]
		if negated {
			b, err := strconv.ParseBool(strings.TrimSpace(raw))
			if err != nil {
				errs = append(errs, &Error{Origin: "flag --" + name, Key: f.key(), Msg: fmt.Sprintf("must be true or false, got %s", quote(raw)), Err: err})
				continue
			}
			raw = strconv.FormatBool(!b)
		}
		if err := f.decode(&cfg, raw, true, textRes); err != nil {
			errs = append(errs, &Error{Origin: "flag --" + name, Key: f.key(), Msg: keyMsg(f.key(), err), Err: err})
			continue
		}
		src[f.key()] = Source{Kind: SourceFlag, Name: name}
	}
	if len(errs) > 0 {
		return Config{}, nil, errors.Join(errs...)
	}

	if err := finish(&cfg, src, getenv, opts.NoModel); err != nil {
		return Config{}, nil, err
	}
	return cfg, src, nil
}

// finish derives the values that depend on several layers and checks the
// rules that span keys.
func finish(cfg *Config, src Sources, getenv func(string) string, noModel bool) error {
	cfg.Model.MaxToolCallsPerTurnExplicit = src.Of("model.maxToolCallsPerTurn").Kind != SourceDefault
	cfg.Model.MaxTokensPerTurnExplicit = src.Of("model.maxTokensPerTurn").Kind != SourceDefault
	cfg.Model.SessionTokenLimitExplicit = src.Of("model.sessionTokenLimit").Kind != SourceDefault
	// One currency: a session's cost (ACP's Cost) is one amount in one unit.
	if p := cfg.Model.Price; p != nil {
		for _, id := range slices.Sorted(maps.Keys(cfg.Model.Prices)) {
			if q := cfg.Model.Prices[id]; q.Currency != p.Currency {
				return errAt(src.Of("model.prices"), "model.prices", fmt.Sprintf(
					"model %q: currency %s differs from model.price's %s; a session's cost is kept in one currency", id, q.Currency, p.Currency))
			}
		}
	} else {
		var first string
		for _, id := range slices.Sorted(maps.Keys(cfg.Model.Prices)) {
			if q := cfg.Model.Prices[id]; first == "" {
				first = q.Currency
			} else if q.Currency != first {
				return errAt(src.Of("model.prices"), "model.prices", fmt.Sprintf(
					"model %q: currency %s differs from %s; a session's cost is kept in one currency", id, q.Currency, first))
			}
		}
	}
	if cfg.Model.Provider == ProviderAnthropic || cfg.Model.Provider == ProviderGemini {
		// The one-model case: the protocol's own endpoint and key
		// variable, unless a layer named others.
		proto := string(cfg.Model.Provider)
		if src.Of("model.baseUrl").Kind == SourceDefault {
			cfg.Model.BaseURL = defaultBaseURL(proto)
		}
		if src.Of("model.apiKeyEnv").Kind == SourceDefault {
			cfg.Model.APIKeyEnv = defaultKeyEnv(proto)
		}
	}
	if src.Of("model.wireApi").Kind != SourceDefault && cfg.Model.Provider != ProviderOpenAI {
		return errAt(src.Of("model.wireApi"), "model.wireApi", fmt.Sprintf("model.wireApi: only the openai provider has wire APIs, model.provider is %s", cfg.Model.Provider))
	}
	if err := finishProviders(cfg, src, getenv); err != nil {
		return err
	}
	if name := cfg.Model.APIKeyEnv; name != "" {
		if v := getenv(name); v != "" {
			cfg.Model.APIKey = v
			src["model.apiKey"] = Source{Kind: SourceEnv, Name: name}
		}
	}
	if cfg.Session.DataDir == "" {
		return &Error{Key: "session.dataDir", Msg: "session.dataDir has no default because neither XDG_STATE_HOME nor HOME is set; set it in a config file, ACPD_DATA_DIR or --data-dir"}
	}
	if (cfg.Server.TLSCert == "") != (cfg.Server.TLSKey == "") {
		key, other := "server.tlsCert", "server.tlsKey"
		if cfg.Server.TLSCert == "" {
			key, other = other, key
		}
		return errAt(src.Of(key), key, fmt.Sprintf("%s is set but %s is not: TLS needs both the certificate and its key", key, other))
	}
	if cfg.Model.Provider == ProviderScript && cfg.Model.Script == "" && !noModel {
		return errAt(src.Of("model.provider"), "model.provider", `model.script is required when model.provider is "script"`)
	}
	cfg.Tools.DenyReadDefaults = denyReadDefaults(cfg, getenv)
	if cfg.Tools.AutoAllowConfined && src.Of("tools.sandboxNetwork").Kind == SourceDefault {
		// Auto-allow counts only commands whose network is proxied: its
		// default network is the proxy.
		cfg.Tools.SandboxNetwork = NetworkProxy
	}
	return nil
}

// errAt builds an *Error located at the source of a value.
func errAt(s Source, key, msg string) *Error {
	e := &Error{Key: key, Msg: msg}
	switch s.Kind {
	case SourceFile:
		e.File, e.Line, e.Col = s.File, s.Line, s.Col
	case SourceEnv, SourceFlag:
		e.Origin = s.String()
	default:
		e.Origin = "default"
	}
	return e
}

// flagField is the field a flag sets, by the flag's name or an old one;
// negated says the flag sets the key's opposite.
func flagField(name string) (f *field, negated bool) {
	for _, f := range fields() {
		if f.flag != "" && f.flag == name {
			return f, f.negated
		}
		if slices.Contains(f.oldFlags, name) {
			return f, false
		}
	}
	return nil, false
}

// xdgDir returns $name when it is absolute (the XDG spec says to ignore
// relative values), else $HOME/fallback, else "".
func xdgDir(getenv func(string) string, name, fallback string) string {
	if d := getenv(name); filepath.IsAbs(d) {
		return d
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, fallback)
	}
	// Windows sets no HOME; its home folder is USERPROFILE, and the same
	// folders below it keep one layout for every system.
	if h := getenv("USERPROFILE"); h != "" && runtime.GOOS == "windows" {
		return filepath.Join(h, fallback)
	}
	return ""
}

func userConfigPath(getenv func(string) string) string {
	if d := UserDir(getenv); d != "" {
		return filepath.Join(d, "config.toml")
	}
	return ""
}

// UserDir is acpd's folder in the user's configuration directory,
// $XDG_CONFIG_HOME/acpd (~/.config/acpd when XDG_CONFIG_HOME is unset), or ""
// when neither XDG_CONFIG_HOME nor HOME is set. It holds config.toml, the
// global instruction files and the global commands/ folder.
func UserDir(getenv func(string) string) string {
	if d := xdgDir(getenv, "XDG_CONFIG_HOME", ".config"); d != "" {
		return filepath.Join(d, "acpd")
	}
	return ""
}

func defaultDataDir(getenv func(string) string) string {
	if d := xdgDir(getenv, "XDG_STATE_HOME", filepath.Join(".local", "state")); d != "" {
		return filepath.Join(d, "acpd")
	}
	return ""
}

// entry is one key of a decoded file with the position of its value.
type entry struct {
	prim toml.Primitive
	pos  toml.Position
}

// errProbe makes the toml decoder report a key's position: the library
// keeps positions private but puts them into the ParseError it returns when
// an Unmarshaler fails.
var errProbe = errors.New("position probe")

type probe struct{}

func (probe) UnmarshalTOML(any) error { return errProbe }

// locate finds the value of key and its position. Only the keys that are
// reported on are located, so deeply nested input costs no more than its depth.
func locate(md *toml.MetaData, root map[string]toml.Primitive, key toml.Key) (entry, bool) {
	p, ok := root[key[0]]
	for _, k := range key[1:] {
		if !ok {
			return entry{}, false
		}
		var sub map[string]toml.Primitive
		if md.PrimitiveDecode(p, &sub) != nil {
			return entry{}, false
		}
		p, ok = sub[k]
	}
	if !ok {
		return entry{}, false
	}
	e := entry{prim: p}
	var pe toml.ParseError
	if err := md.PrimitiveDecode(p, &probe{}); errors.As(err, &pe) {
		e.pos = pe.Position
	}
	return e, true
}

// text is a file's content split into lines, for column lookups.
type text struct {
	src        string
	lineStarts []int
}

func newText(src string) text {
	t := text{src: src, lineStarts: []int{0}}
	for i := range len(src) {
		if src[i] == '\n' {
			t.lineStarts = append(t.lineStarts, i+1)
		}
	}
	return t
}

func (t text) line(n int) string {
	if n < 1 || n > len(t.lineStarts) {
		return ""
	}
	start := t.lineStarts[n-1]
	end := len(t.src)
	if n < len(t.lineStarts) {
		end = t.lineStarts[n] - 1
	}
	return strings.TrimSuffix(t.src[start:end], "\r")
}

// pos turns a library position into a 1-based line and column. It uses
// the byte offset: the library's line is one too far when the offending byte
// is a newline, and its column is computed from the offset anyway.
func (t text) pos(p toml.Position) (line, col int) {
	if p.Start < 0 || p.Start > len(t.src) || (p.Start == 0 && p.Line > 1) {
		return max(p.Line, 1), max(p.Col, 1)
	}
	line, _ = slices.BinarySearch(t.lineStarts, p.Start+1) // lines starting at or before Start
	return line, p.Start - t.lineStarts[line-1] + 1
}

// keyCol finds where key name starts on line n: the library only records
// where values start.
func (t text) keyCol(n int, name string) (int, bool) {
	ln := t.line(n)
	word := func(b byte) bool {
		return b == '_' || b == '-' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	for from := 0; ; {
		i := strings.Index(ln[from:], name)
		if i < 0 || name == "" {
			return 0, false
		}
		i += from
		end := i + len(name)
		if (i == 0 || !word(ln[i-1])) && (end == len(ln) || !word(ln[end])) {
			return i + 1, true
		}
		from = i + 1
	}
}

// applyFile decodes one TOML file over cfg, recording sources. Relative
// paths in it are resolved against its folder.
func applyFile(cfg *Config, src Sources, path string, data []byte, home string) error {
	t := newText(string(data))
	var root map[string]toml.Primitive
	md, err := toml.Decode(t.src, &root)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			line, col := t.pos(pe.Position)
			return &Error{File: path, Line: line, Col: col,
				Msg: "syntax error: " + pe.Message, Err: err}
		}
		return &Error{File: path, Line: 1, Col: 1, Msg: "cannot decode: " + err.Error(), Err: err}
	}
	res := resolver{base: filepath.Dir(path), home: home, file: path}

	// where locates key k (value position if it has one, else that of the
	// first descendant in document order, for implicit tables).
	where := func(k toml.Key, descendant toml.Key) (e entry, line, valCol, keyCol int) {
		e, _ = locate(&md, root, k)
		if e.pos.Line == 0 {
			d, _ := locate(&md, root, descendant)
			e.pos = d.pos
		}
		line, valCol = t.pos(e.pos)
		if ln := t.line(line); valCol > 1 && valCol-2 < len(ln) && (ln[valCol-2] == '"' || ln[valCol-2] == '\'') {
			valCol-- // point at the opening quote, not the first character
		}
		keyCol = valCol
		if c, ok := t.keyCol(line, k[len(k)-1]); ok {
			keyCol = c
		}
		return e, line, valCol, keyCol
	}

	var errs []error
	seen := map[string]bool{}
	badTable := map[string]bool{}
	for _, full := range md.Keys() {
		k := full[:min(len(full), 2)]
		if seen[k.String()] {
			continue
		}
		seen[k.String()] = true
		e, line, valCol, keyCol := where(k, full)
		fail := func(col int, key, msg string, err error) {
			errs = append(errs, &Error{File: path, Line: line, Col: col, Key: key, Msg: msg, Err: err})
		}
		if len(k) == 1 {
			switch {
			case !slices.Contains(tables, k[0]):
				badTable[k[0]] = true
				fail(keyCol, k[0], unknownTopLevel(k[0]), nil)
			case md.Type(k...) != "Hash" && md.Type(k...) != "":
				badTable[k[0]] = true
				fail(keyCol, k[0], fmt.Sprintf("%s must be a table ([%s]), got %s", k[0], k[0], typeName(md.Type(k...))), nil)
			}
			continue
		}
		if badTable[k[0]] {
			continue
		}
		f := lookupField(k[0], k[1])
		if k[0] == modelProvidersTable {
			f = providerField(k[1])
		}
		if f == nil {
			fail(keyCol, k.String(), unknownInTable(k[0], k[1]), nil)
			continue
		}
		var raw any
		if err := md.PrimitiveDecode(e.prim, &raw); err != nil {
			fail(valCol, f.key(), f.key()+": "+err.Error(), err)
			continue
		}
		if err := f.decode(cfg, raw, false, res); err != nil {
			fail(valCol, f.key(), keyMsg(f.key(), err), err)
			continue
		}
		src[f.key()] = Source{Kind: SourceFile, File: path, Line: line, Col: keyCol}
		if k[0] == modelProvidersTable {
			setProviderSource(cfg, k[1], src[f.key()])
			locateProviderModels(cfg, k[1], t, line)
		}
	}
	return errors.Join(errs...)
}

// typeName renders MetaData.Type for users.
func typeName(t string) string {
	if t == "ArrayHash" {
		return "array of tables"
	}
	return strings.ToLower(t)
}

func unknownTopLevel(name string) string {
	if s := suggest(name, tables); s != "" {
		return fmt.Sprintf("unknown table %q; did you mean [%s]?", name, s)
	}
	var keys []string
	for _, f := range fields() {
		keys = append(keys, f.name)
	}
	if s := suggest(name, keys); s != "" {
		for _, f := range fields() {
			if f.name == s {
				return fmt.Sprintf("unknown key %q; did you mean %q (it belongs in [%s])?", name, f.key(), f.table)
			}
		}
	}
	return fmt.Sprintf("unknown table %q; valid tables: %s", name, strings.Join(tables, ", "))
}

func unknownInTable(table, name string) string {
	key := table + "." + name
	if table == "model" && strings.EqualFold(name, "apiKey") {
		return fmt.Sprintf("%s cannot be set in a config file; put the key in the environment variable named by model.apiKeyEnv (default OPENAI_API_KEY)", key)
	}
	var same, other []string
	for _, f := range fields() {
		if f.table == table {
			same = append(same, f.name)
		} else {
			other = append(other, f.name)
		}
	}
	if s := suggest(name, same); s != "" {
		return fmt.Sprintf("unknown key %q; did you mean %q?", key, s)
	}
	if s := suggest(name, other); s != "" {
		for _, f := range fields() {
			if f.name == s && f.table != table {
				return fmt.Sprintf("unknown key %q; did you mean %q (it belongs in [%s])?", key, f.key(), f.table)
			}
		}
	}
	return fmt.Sprintf("unknown key %q; valid keys in [%s]: %s", key, table, strings.Join(same, ", "))
}
