package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/acpd/acpd/session/rules"
)

// The rules files acpd writes itself hold the "always allow" answers:
// one per workspace and one for the user, in acpd's state folder (never
// in the workspace, whose files the model can edit and a clone can ship).
// They are TOML with a [permissions] table, as acpd's configuration, so a
// person can read and edit them.

// dirName is the rules files' folder under the state folder.
const dirName = "permissions"

// maxFileBytes bounds what is read of a rules file.
const maxFileBytes = 4 << 20

// WorkspaceFile is the rules file of a workspace (its real path): the
// folder's name, for people, and a digest of its path, so two workspaces
// of one name stay apart.
func WorkspaceFile(stateDir, workspace string) string {
	sum := sha256.Sum256([]byte(workspace))
	base := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, filepath.Base(workspace))
	if len(base) > 40 {
		base = base[:40]
	}
	return filepath.Join(stateDir, dirName, base+"-"+hex.EncodeToString(sum[:6])+".toml")
}

// UserFile is the rules file of "always allow for user" answers.
func UserFile(stateDir string) string { return filepath.Join(stateDir, dirName, "user.toml") }

// fileShape is a rules file as TOML.
type fileShape struct {
	Workspace   string `toml:"workspace"`
	Permissions struct {
		Allow []string `toml:"allow"`
		Ask   []string `toml:"ask"`
		Deny  []string `toml:"deny"`
	} `toml:"permissions"`
}

func (f *fileShape) list(k rules.Kind) *[]string {
	switch k {
	case rules.Ask:
		return &f.Permissions.Ask
	case rules.Deny:
		return &f.Permissions.Deny
	}
	return &f.Permissions.Allow
}

// ReadRulesFile reads a rules file acpd writes: its rules, and the rules it
// could not read (each an error naming the file); a missing file has
// none.
func ReadRulesFile(path string, scope rules.Scope) ([]rules.Rule, []error, error) {
	f, err := readShape(path)
	if err != nil {
		return nil, nil, err
	}
	var out []rules.Rule
	var bad []error
	for k := rules.Allow; k <= rules.Deny; k++ {
		for _, text := range *f.list(k) {
			r, err := rules.Parse(text, k, rules.Source{Scope: scope, File: path})
			if err != nil {
				bad = append(bad, fmt.Errorf("%s: %w", path, err))
				continue
			}
			out = append(out, r)
		}
	}
	return out, bad, nil
}

func readShape(path string) (*fileShape, error) {
	var f fileShape
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &f, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxFileBytes)
	}
	if _, err := toml.Decode(string(data), &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// AddRules appends rules of kind k to a rules file (made with its folder when
// missing), under the file lock two processes share; workspace is written
// in the file for people. It returns the rules it added (those already
// there are not repeated).
func AddRules(path, workspace string, k rules.Kind, texts []string) ([]string, error) {
	var added []string
	err := update(path, func(f *fileShape) bool {
		if f.Workspace == "" {
			f.Workspace = workspace
		}
		l := f.list(k)
		for _, t := range texts {
			if !slices.Contains(*l, t) {
				*l = append(*l, t)
				added = append(added, t)
			}
		}
		return len(added) > 0
	})
	return added, err
}

// RemoveRule takes a rule out of a rules file; false when the file does not
// hold it.
func RemoveRule(path string, k rules.Kind, text string) (bool, error) {
	found := false
	err := update(path, func(f *fileShape) bool {
		l := f.list(k)
		if i := slices.Index(*l, text); i >= 0 {
			*l = slices.Delete(*l, i, i+1)
			found = true
		}
		return found
	})
	return found, err
}

// update reads, changes and rewrites a rules file under the lock of its
// folder; the new content replaces the old by a rename, so a reader never
// sees half a file.
func update(path string, change func(*fileShape) bool) error {
	return locked(filepath.Dir(path), ".lock", func() error {
		f, err := readShape(path)
		if err != nil {
			return err
		}
		if !change(f) {
			return nil
		}
		return replaceFile(path, []byte(encodeFile(f)))
	})
}

// encodeFile writes a rules file, one rule a line.
func encodeFile(f *fileShape) string {
	var b strings.Builder
	b.WriteString("# acpd's permission rules, written when the user answered \"always allow\".\n")
	b.WriteString("# `acpd permissions` lists the rules in force; `acpd permissions rm RULE` removes one.\n")
	if f.Workspace != "" {
		fmt.Fprintf(&b, "workspace = %s\n", tomlString(f.Workspace))
	}
	b.WriteString("\n[permissions]\n")
	for k := rules.Allow; k <= rules.Deny; k++ {
		l := *f.list(k)
		if len(l) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s = [\n", k)
		for _, t := range l {
			fmt.Fprintf(&b, "  %s,\n", tomlString(t))
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
