package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acpd/acpd/acp"
)

// Transcript is a loaded session: its records in order and the state they
// imply.
type Transcript struct {
	Meta    SessionMeta // from the last meta record
	Records []Record    // every readable record, meta records included
	// Title is the last title record, else derived from the first prompt.
	Title   string
	ModeID  string // last mode record, "" if none
	ModelID string // last model record, "" if none
	// ThoughtLevel is the last thought_level record's level, "" if none.
	ThoughtLevel string
	// UpdatedAt is the time of the last record.
	UpdatedAt time.Time
	// PendingLoop is the last loop stop when no prompt followed it: the
	// host prefixes its message to the next prompt, as in the live session.
	PendingLoop *LoopStop
	// Warnings describe skipped lines; the host should log them.
	Warnings []Warning
	// CorruptLine is the 1-based line of a corrupt record in the middle of
	// the file (0: none). Records from that line on were not loaded.
	CorruptLine int

	explicitTitle bool
}

// Warning is a line of the transcript that was skipped.
type Warning struct {
	Line int
	Msg  string
}

func (w Warning) String() string { return fmt.Sprintf("line %d: %s", w.Line, w.Msg) }

// parseResult tells Resume how to repair the file.
type parseResult struct {
	goodLen     int64 // bytes up to and including the last accepted line
	needNewline bool  // the last accepted record lacks its '\n'
}

// parse decodes the JSONL transcript in data. It never fails: damage is
// recorded in the returned warnings.
func parse(id string, data []byte) (*Transcript, parseResult) {
	tr := &Transcript{Records: make([]Record, 0, bytes.Count(data, []byte{'\n'})+1)}
	var pr parseResult
	line := 0
	for off := 0; off < len(data); {
		line++
		end := bytes.IndexByte(data[off:], '\n')
		last := end < 0
		next := len(data)
		if !last {
			end += off
			next = end + 1
		} else {
			end = len(data)
		}
		raw := data[off:end]
		if len(bytes.TrimSpace(raw)) == 0 {
			if !last {
				tr.Warnings = append(tr.Warnings, Warning{line, "blank line skipped"})
				pr.goodLen = int64(next)
			}
			off = next
			continue
		}
		var rec Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			if last || len(bytes.TrimSpace(data[next:])) == 0 {
				tr.Warnings = append(tr.Warnings, Warning{line, "torn or corrupt last record skipped: " + shortErr(err)})
			} else {
				tr.CorruptLine = line
				rest := bytes.Count(data[next:], []byte{'\n'})
				if data[len(data)-1] != '\n' {
					rest++
				}
				tr.Warnings = append(tr.Warnings, Warning{line, fmt.Sprintf(
					"corrupt record (%s); loaded the records before it, %d later line(s) ignored", shortErr(err), rest)})
			}
			break
		}
		pr.goodLen = int64(next)
		pr.needNewline = last
		off = next
		if rec.V > Version {
			tr.Warnings = append(tr.Warnings, Warning{line, fmt.Sprintf("record version %d is newer than %d; skipped", rec.V, Version)})
			continue
		}
		if err := rec.validate(); err != nil {
			tr.Warnings = append(tr.Warnings, Warning{line, err.Error() + "; skipped"})
			continue
		}
		if rec.Kind == KindMeta && rec.Meta.ID != id {
			tr.Warnings = append(tr.Warnings, Warning{line, fmt.Sprintf("meta record names session %q; skipped", rec.Meta.ID)})
			continue
		}
		tr.Records = append(tr.Records, rec)
	}
	return tr, pr
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// finish derives the transcript's state from its records.
func (tr *Transcript) finish(id string) error {
	if len(tr.Records) == 0 || tr.Records[0].Kind != KindMeta {
		if tr.CorruptLine > 0 || len(tr.Warnings) > 0 {
			return fmt.Errorf("%w (%s)", ErrNoMeta, tr.Warnings[0])
		}
		return ErrNoMeta
	}
	var derived string
	var turnLoop *LoopStop // PendingLoop when the current turn began
	gone := tr.rewound()
	for i := range tr.Records {
		r := &tr.Records[i]
		if r.T.After(tr.UpdatedAt) {
			tr.UpdatedAt = r.T
		}
		if gone != nil && gone[i] && (r.Kind == KindUser || r.Kind == KindLoopStop || r.Kind == KindTurnEnd) {
			// A rewound turn's loop stop is undone with it; mode and model
			// are the session's settings, which a rewind keeps.
			continue
		}
		switch r.Kind {
		case KindMeta:
			tr.Meta = *r.Meta
		case KindTitle:
			tr.Title, tr.explicitTitle = r.Title, true
		case KindUser:
			if derived == "" {
				derived = TitleFromPrompt(r.Prompt)
			}
			turnLoop, tr.PendingLoop = tr.PendingLoop, nil
		case KindLoopStop:
			if r.Parent == "" { // a subagent's stop ends its run, not the turn
				tr.PendingLoop = r.Loop
			}
		case KindTurnEnd:
			// A refused turn is left out of the next prompt (ACP), so a
			// loop note it consumed is still pending.
			if r.StopReason == acp.StopRefusal && tr.PendingLoop == nil {
				tr.PendingLoop = turnLoop
			}
			turnLoop = nil
		case KindMode:
			tr.ModeID = r.ModeID
		case KindModel:
			tr.ModelID = r.ModelID
		case KindThought:
			tr.ThoughtLevel = r.ThoughtLevel
		}
	}
	if !tr.explicitTitle {
		tr.Title = derived
	}
	return nil
}

func (tr *Transcript) info() SessionInfo {
	return SessionInfo{
		ID:                    tr.Meta.ID,
		Cwd:                   tr.Meta.Cwd,
		AdditionalDirectories: tr.Meta.AdditionalDirectories,
		Title:                 tr.Title,
		CreatedAt:             tr.Meta.CreatedAt,
		UpdatedAt:             tr.UpdatedAt,
	}
}

// MaxTitleLen is the length in characters of a title derived from a prompt.
const MaxTitleLen = 80

// TitleFromPrompt derives a session title from a prompt: the first
// non-blank line of its first text block, trimmed, at most MaxTitleLen
// characters (cut ones end in "…").
func TitleFromPrompt(prompt []acp.ContentBlock) string {
	for _, b := range prompt {
		if b.Type != "text" {
			continue
		}
		for l := range strings.Lines(b.Text) {
			l = strings.Join(strings.Fields(l), " ")
			if l == "" {
				continue
			}
			if utf8.RuneCountInString(l) <= MaxTitleLen {
				return l
			}
			r := []rune(l)
			return strings.TrimSpace(string(r[:MaxTitleLen-1])) + "…"
		}
	}
	return ""
}
