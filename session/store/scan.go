package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	segjson "github.com/segmentio/encoding/json"
)

// This file is the store's read-only side for tools that read many
// transcripts at once (`acpd stats`): it never creates, locks, repairs or
// indexes anything, so it is safe while daemons write the same files. A
// record being written may be seen torn at the end of a file; it is
// skipped, as Load skips it.

// SessionIDs lists the ids of the transcripts in dataDir, sorted. A data
// directory without a sessions folder holds no sessions (nil, no error).
func SessionIDs(dataDir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(dataDir, sessionsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions in %s: %w", dataDir, err)
	}
	ids := make([]string, 0, len(ents))
	for _, e := range ents {
		name := e.Name()
		id, ok := strings.CutSuffix(name, fileExt)
		if !ok || !e.Type().IsRegular() || ValidateID(id) != nil {
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// Scanner reads one transcript line by line without decoding records it is
// not asked to: Kind peeks at a line's kind, Decode decodes and validates
// it. It reuses its buffers, so one Scanner per goroutine reads any number
// of files with little garbage.
type Scanner struct {
	r    *bufio.Reader
	long []byte // a line longer than the reader's buffer
}

// NewScanner returns a Scanner with a 256 KiB read buffer.
func NewScanner() *Scanner { return &Scanner{r: bufio.NewReaderSize(nil, 256<<10)} }

// ScanFile calls fn with each line of the transcript of session id in
// dataDir (without its newline) and its kind, as Kind reads it. A torn last
// line (no newline) is passed too; Decode rejects it. fn's line is valid
// only during the call. An error from fn stops the scan and is returned.
func (sc *Scanner) ScanFile(dataDir, id string, fn func(kind Kind, line []byte) error) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dataDir, sessionsDir, id+fileExt))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("read session %s: %w", id, err)
	}
	defer f.Close()
	sc.r.Reset(f)
	for {
		line, err := sc.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			sc.long = append(sc.long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = sc.r.ReadSlice('\n')
				sc.long = append(sc.long, line...)
			}
			line = sc.long
		}
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			if len(bytes.TrimSpace(line)) > 0 {
				if ferr := fn(PeekKind(line), line); ferr != nil {
					return ferr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read session %s: %w", id, err)
		}
	}
}

var kindField = []byte(`"kind":"`)

// PeekKind returns a record line's kind without decoding it: records start
// {"v":…,"t":…,"kind":…, so the first "kind" member is the record's. A line
// in another shape (or none) gives "", and the caller decodes it.
func PeekKind(line []byte) Kind {
	head := line
	if len(head) > 96 {
		head = head[:96]
	}
	i := bytes.Index(head, kindField)
	if i < 0 || !bytes.HasPrefix(line, []byte(`{"v":`)) {
		return ""
	}
	rest := line[i+len(kindField):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	// A switch on string(b) does not allocate; every known kind is one of
	// these constants.
	switch k := rest[:j]; string(k) {
	case string(KindMeta):
		return KindMeta
	case string(KindUser):
		return KindUser
	case string(KindSteer):
		return KindSteer
	case string(KindText):
		return KindText
	case string(KindReasoning):
		return KindReasoning
	case string(KindToolCalls):
		return KindToolCalls
	case string(KindReminder):
		return KindReminder
	case string(KindToolCall):
		return KindToolCall
	case string(KindToolResult):
		return KindToolResult
	case string(KindPlan):
		return KindPlan
	case string(KindMode):
		return KindMode
	case string(KindModel):
		return KindModel
	case string(KindThought):
		return KindThought
	case string(KindLoopStop):
		return KindLoopStop
	case string(KindTitle):
		return KindTitle
	case string(KindTurnEnd):
		return KindTurnEnd
	case string(KindUsage):
		return KindUsage
	case string(KindExt):
		return KindExt
	case string(KindCompaction):
		return KindCompaction
	case string(KindAgentStart):
		return KindAgentStart
	case string(KindAgentEnd):
		return KindAgentEnd
	case string(KindRewind):
		return KindRewind
	default:
		return Kind(k)
	}
}

// Decode decodes one record line into rec (reset first) and validates it
// as Load does. A record of a newer version is ErrInvalidRecord.
func Decode(line []byte, rec *Record) error {
	*rec = Record{}
	if err := segjson.Unmarshal(line, rec); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	if rec.V > Version {
		return fmt.Errorf("%w: record version %d is newer than %d", ErrInvalidRecord, rec.V, Version)
	}
	return rec.validate()
}

// toolCallsLine is the part of a tool_calls record DecodeToolCalls reads.
type toolCallsLine struct {
	V         int        `json:"v"`
	Parent    string     `json:"parent"`
	ToolCalls []ToolCall `json:"toolCalls"`
}

// DecodeToolCalls decodes only the calls of a tool_calls record line and
// its parent (the agent call of a subagent run's batch, "" for the
// session's own), reusing dst. Without copying: the names, ids, arguments
// and parent alias line and are valid only as long as it is. The calls are
// checked as Load checks them, except that arguments are not validated as
// JSON here (the repeat key parses them and reports what it cannot).
func DecodeToolCalls(line []byte, dst []ToolCall) (calls []ToolCall, parent string, err error) {
	v := toolCallsLine{ToolCalls: dst[:0]}
	if _, err := segjson.Parse(line, &v, segjson.ZeroCopy); err != nil {
		return dst[:0], "", fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	if v.V > Version {
		return dst[:0], "", fmt.Errorf("%w: record version %d is newer than %d", ErrInvalidRecord, v.V, Version)
	}
	if len(v.ToolCalls) == 0 {
		return v.ToolCalls, "", invalid(KindToolCalls, "field toolCalls is empty")
	}
	for i, c := range v.ToolCalls {
		if c.ID == "" {
			return v.ToolCalls[:0], "", invalid(KindToolCalls, "field toolCalls[%d].id is empty", i)
		}
	}
	return v.ToolCalls, v.Parent, nil
}

// toolResultLine is the part of a tool_result record DecodeResultHash
// reads.
type toolResultLine struct {
	V    int `json:"v"`
	Tool struct {
		ToolCallID string `json:"toolCallId"`
		ResultHash string `json:"resultHash"`
	} `json:"tool"`
}

// DecodeResultHash decodes only a tool_result record line's toolCallId and
// resultHash ("" when the record has none). Without copying: both alias
// line.
func DecodeResultHash(line []byte) (id, hash string, err error) {
	var v toolResultLine
	if _, err := segjson.Parse(line, &v, segjson.ZeroCopy); err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	if v.V > Version {
		return "", "", fmt.Errorf("%w: record version %d is newer than %d", ErrInvalidRecord, v.V, Version)
	}
	return v.Tool.ToolCallID, v.Tool.ResultHash, nil
}

// DecodeTime decodes only a record line's version and time, for records
// whose payload the caller does not need (a prompt's blocks).
func DecodeTime(line []byte) (time.Time, error) {
	var v struct {
		V int       `json:"v"`
		T time.Time `json:"t"`
	}
	if _, err := segjson.Parse(line, &v, segjson.ZeroCopy); err != nil {
		return time.Time{}, fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	if v.V > Version {
		return time.Time{}, fmt.Errorf("%w: record version %d is newer than %d", ErrInvalidRecord, v.V, Version)
	}
	return v.T, nil
}
