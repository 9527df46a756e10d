package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyRow is one row of a key table in docs/configuration.md.
type keyRow struct {
	line                  int
	section               string // the heading above the table, e.g. "`[model]`"
	key, deflt, env, flag string
}

var codeSpanRE = regexp.MustCompile("`([^`]+)`")

// keyRows reads the key tables of the configuration page: every table
// whose header starts with "| Key |".
func keyRows(t *testing.T, page string) []keyRow {
	t.Helper()
	var rows []keyRow
	var section string
	var cols map[string]int
	for i, l := range strings.Split(page, "\n") {
		switch {
		case strings.HasPrefix(l, "#"):
			section, cols = strings.TrimSpace(strings.TrimLeft(l, "#")), nil
		case strings.HasPrefix(l, "| Key |"):
			cols = map[string]int{}
			for j, c := range cells(l) {
				cols[c] = j
			}
			for _, want := range []string{"Key", "Default", "Environment", "Flag"} {
				_, ok := cols[want]
				require.True(t, ok, "configuration.md:%d: a key table needs a %q column", i+1, want)
			}
		case cols != nil && strings.HasPrefix(l, "|---"):
		case cols != nil && strings.HasPrefix(l, "|"):
			c := cells(l)
			require.Len(t, c, len(cols), "configuration.md:%d: row has %d cells, the header %d", i+1, len(c), len(cols))
			rows = append(rows, keyRow{line: i + 1, section: section,
				key: c[cols["Key"]], deflt: c[cols["Default"]], env: c[cols["Environment"]], flag: c[cols["Flag"]]})
		default:
			cols = nil
		}
	}
	return rows
}

// cells splits a table row at the pipes that are not escaped.
func cells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var out []string
	var cur strings.Builder
	for i := 0; i < len(row); i++ {
		if row[i] == '\\' && i+1 < len(row) && row[i+1] == '|' {
			cur.WriteByte('|')
			i++
			continue
		}
		if row[i] == '|' {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteByte(row[i])
	}
	return append(out, strings.TrimSpace(cur.String()))
}

// spans are the code spans of a cell; "—" (none) gives none.
func spans(cell string) []string {
	var out []string
	for _, m := range codeSpanRE.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestConfigurationPage keeps docs/configuration.md true to the key table:
// every key the code accepts has exactly one row, in its table's section, and
// every row is a key the code accepts; the row's environment variables and
// flag are exactly the key's; its default starts with the value `acpd config`
// prints for the built-in default, or with a word when the key has none.
func TestConfigurationPage(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	require.NoError(t, err)
	rows := keyRows(t, string(b))
	require.NotEmpty(t, rows, "no key tables found in docs/configuration.md")

	byKey := map[string]keyRow{}
	for _, r := range rows {
		k := spans(r.key)
		if !assert.Len(t, k, 1, "configuration.md:%d: the Key cell holds one `table.key`", r.line) {
			continue
		}
		key := k[0]
		_, dup := byKey[key]
		assert.False(t, dup, "configuration.md:%d: %s has two rows", r.line, key)
		byKey[key] = r
		table, name, _ := strings.Cut(key, ".")
		if lookupField(table, name) == nil {
			t.Errorf("configuration.md:%d: %s is documented but acpd accepts no such key", r.line, key)
		}
	}

	defaults := Default()
	for _, f := range fields() {
		r, ok := byKey[f.key()]
		if !ok {
			t.Errorf("%s is accepted by acpd but has no row in docs/configuration.md (the [%s] table)", f.key(), f.table)
			continue
		}
		assert.Contains(t, r.section, "["+f.table+"]", "configuration.md:%d: %s belongs under the [%s] heading", r.line, f.key(), f.table)

		wantEnv := f.envs
		if wantEnv == nil {
			wantEnv = []string{}
		}
		gotEnv := spans(r.env)
		if gotEnv == nil {
			gotEnv = []string{}
		}
		assert.Equal(t, wantEnv, gotEnv, "configuration.md:%d: the environment variables of %s", r.line, f.key())

		var wantFlag []string
		if f.flag != "" {
			wantFlag = []string{"--" + f.flag}
		}
		assert.Equal(t, wantFlag, spans(r.flag), "configuration.md:%d: the flag of %s", r.line, f.key())
		if f.flag == "" {
			assert.Equal(t, "—", r.flag, "configuration.md:%d: %s has no flag: write —", r.line, f.key())
		}
		if len(f.envs) == 0 {
			assert.Equal(t, "—", r.env, "configuration.md:%d: %s has no environment variable: write —", r.line, f.key())
		}

		lit, hasDefault := f.encode(&defaults)
		if hasDefault {
			d := spans(r.deflt)
			if assert.NotEmpty(t, d, "configuration.md:%d: the default of %s is %s", r.line, f.key(), lit) {
				assert.True(t, strings.HasPrefix(r.deflt, "`"), "configuration.md:%d: the Default cell of %s starts with %s", r.line, f.key(), lit)
				assert.Equal(t, lit, d[0], "configuration.md:%d: the default of %s", r.line, f.key())
			}
		} else {
			assert.False(t, strings.HasPrefix(r.deflt, "`") || r.deflt == "", "configuration.md:%d: %s has no built-in default; say so in words (unset, from the environment: …), not as a value", r.line, f.key())
		}
	}
}
