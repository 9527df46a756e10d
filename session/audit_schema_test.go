package session_test

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

// auditRow is one row of the protocol page's "Every method and update"
// table.
type auditRow struct {
	names     []string
	direction string
	does      string
}

// auditTable reads the table from docs/protocol.md.
func auditTable(t *testing.T) []auditRow {
	b, err := os.ReadFile("../docs/protocol.md")
	require.NoError(t, err)
	_, sec, ok := strings.Cut(string(b), "\n## Every method and update\n")
	require.True(t, ok, "docs/protocol.md has no section \"Every method and update\"")
	sec, _, _ = strings.Cut(sec, "\n## ")
	code := regexp.MustCompile("`([^`]+)`")
	var rows []auditRow
	for line := range strings.SplitSeq(sec, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if !strings.HasPrefix(line, "| `") || len(cells) != 3 {
			continue
		}
		r := auditRow{direction: strings.TrimSpace(cells[1]), does: strings.TrimSpace(cells[2])}
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			r.names = append(r.names, m[1])
		}
		rows = append(rows, r)
	}
	require.NotEmpty(t, rows)
	return rows
}

// stableSchema lists the stable schema's methods by side (agent: the
// editor calls acpd; client: acpd calls the editor; protocol: both) and
// its session/update kinds.
func stableSchema(t *testing.T) (methods map[string]string, updates []string) {
	b, err := os.ReadFile("../acp/acptest/testdata/schema.json")
	require.NoError(t, err)
	var doc struct {
		Defs map[string]struct {
			Method string `json:"x-method"`
			Side   string `json:"x-side"`
			OneOf  []struct {
				Properties struct {
					SessionUpdate struct {
						Const string `json:"const"`
					} `json:"sessionUpdate"`
				} `json:"properties"`
			} `json:"oneOf"`
		} `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	methods = map[string]string{}
	for _, d := range doc.Defs {
		if d.Method != "" {
			methods[d.Method] = d.Side
		}
	}
	for _, v := range doc.Defs["SessionUpdate"].OneOf {
		updates = append(updates, v.Properties.SessionUpdate.Const)
	}
	require.NotEmpty(t, methods)
	require.NotEmpty(t, updates)
	return methods, updates
}

// TestAudit_StableSchema holds the protocol page's table of every method
// and update to the stable ACP schema acpd is built against, and to the
// built binary: every method and session/update kind of the schema has a
// row (and no row names something the schema lacks), each row's direction
// matches the schema's side, each method the editor calls that the table
// says acpd answers is answered (not -32601) by the binary, and each
// update the table says acpd sends is one acpd can encode. A new schema
// release shows its gaps here at once.
func TestAudit_StableSchema(t *testing.T) {
	methods, updates := stableSchema(t)
	rows := auditTable(t)
	byName := map[string]auditRow{}
	for _, r := range rows {
		for _, n := range r.names {
			_, dup := byName[n]
			require.False(t, dup, "%s has two rows", n)
			byName[n] = r
		}
	}
	var missing []string
	for m := range methods {
		if _, ok := byName[m]; !ok {
			missing = append(missing, m)
		}
	}
	for _, u := range updates {
		if _, ok := byName[u]; !ok {
			missing = append(missing, u)
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "in the stable schema but not in the table of docs/protocol.md")
	for n := range byName {
		_, isMethod := methods[n]
		assert.True(t, isMethod || slices.Contains(updates, n), "%s is in the table but not in the stable schema", n)
	}

	want := map[string]string{"agent": "editor → acpd", "client": "acpd → editor", "protocol": "both ways"}
	for m, side := range methods {
		if r, ok := byName[m]; ok {
			assert.Equal(t, want[side], r.direction, "direction of %s", m)
		}
	}

	// The editor's requests, as the built binary answers them.
	d := startDaemon(t, nil, nil)
	ctx := ctxFor(t)
	_, err := d.cc.Initialize(ctx)
	require.NoError(t, err)
	probed := 0
	for m, side := range methods {
		r, ok := byName[m]
		if !ok || side != "agent" || m == acp.MethodInitialize || m == acp.MethodSessionCancel {
			continue // initialize was sent above; session/cancel is a notification
		}
		var raw json.RawMessage
		err := d.cc.Call(ctx, m, map[string]any{}, &raw)
		var ae *acp.Error
		notFound := errors.As(err, &ae) && ae.Code == acp.CodeMethodNotFound
		answered := strings.HasPrefix(r.does, "answered")
		assert.Equal(t, answered, !notFound, "%s: the table says %q, the binary answered %v", m, r.does, err)
		probed++
	}
	assert.GreaterOrEqual(t, probed, 11)

	// Updates the table says acpd sends are ones it can encode.
	for _, u := range updates {
		r := byName[u]
		if !strings.HasPrefix(r.does, "sent") {
			continue
		}
		_, err := json.Marshal(acp.SessionUpdate{Kind: u})
		if err != nil {
			assert.NotContains(t, err.Error(), "unknown session update kind", "%s: the table says acpd sends it", u)
		}
	}
}
