package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/confine"
)

const (
	readDefaultLines  = 2000
	readMaxLineLength = 2000
)

var readFileSpec = mustSpec("read_file", acp.KindRead,
	"Reads and returns the content of a specified file. If the file is large, the content will be truncated. "+
		"The tool's response will clearly indicate if truncation has occurred and will provide details on how to read "+
		"more of the file using the 'offset' and 'limit' parameters. For text files, it can read specific line ranges.",
	`{
  "type": "object",
  "properties": {
    "file_path": {"type": "string", "description": "The absolute path to the file to read (e.g., '/home/user/project/file.txt'). Relative paths are not supported."},
    "offset": {"type": "integer", "minimum": 0, "description": "Optional: For text files, the 0-based line number to start reading from. Requires 'limit' to be set. Use for paginating through large files."},
    "limit": {"type": "integer", "minimum": 1, "description": "Optional: For text files, maximum number of lines to read. Use with 'offset' to paginate through large files. If omitted, reads the entire file (if feasible, up to a default limit)."}
  },
  "required": ["file_path"]
}`)

type readFileTool struct{ toolSpec }

type readFileArgs struct {
	FilePath string   `json:"file_path"`
	Offset   *float64 `json:"offset"`
	Limit    *float64 `json:"limit"`
}

func (t *readFileTool) Build(env *Env, args json.RawMessage) (Call, error) {
	var a readFileArgs
	if err := t.decode(args, &a); err != nil {
		return nil, err
	}
	tg, err := env.confine("file_path", a.FilePath)
	if err != nil {
		return nil, err
	}
	c := &readFileCall{t: tg, title: "Read " + env.roots().Shown(tg.Path()), limit: readDefaultLines}
	if a.Offset != nil {
		c.offset = int(*a.Offset)
		c.ranged = true
	}
	if a.Limit != nil {
		c.limit = int(*a.Limit)
		c.ranged = true
	}
	return c, nil
}

type readFileCall struct {
	t             confine.Target
	title         string
	offset, limit int
	ranged        bool // offset or limit given
}

func (c *readFileCall) Title() string { return c.title }

func (c *readFileCall) Locations() []acp.ToolCallLocation {
	loc := acp.ToolCallLocation{Path: c.t.Path()}
	if c.offset > 0 {
		line := c.offset + 1
		loc.Line = &line
	}
	return []acp.ToolCallLocation{loc}
}

func (c *readFileCall) Confirmation() Confirmation {
	return Confirmation{Kind: ConfirmNone, Paths: []string{c.t.Real()}}
}

func (c *readFileCall) Execute(ctx context.Context, env *Env) Result {
	text, firstLine, total, err := c.load(ctx, env)
	if err != nil {
		return failure(classifyRead(err), err)
	}
	body, shown, _, cut := sliceLines(text, firstLine, c.limit)
	if firstLine > 0 && shown == 0 && total >= 0 {
		err := fmt.Errorf("offset %d is beyond the end of %s (%d lines)", c.offset, c.t.Path(), total)
		return failure(ErrTypeReadContentFailure, err)
	}
	start, end := c.offset+1, c.offset+shown
	var llm string
	switch {
	case total >= 0 && (cut || start > 1 || end < total):
		llm = fmt.Sprintf("IMPORTANT: The file content has been truncated.\nStatus: Showing lines %d-%d of %d total lines.\n"+
			"Action: To read more of the file, you can use the 'offset' and 'limit' parameters in a subsequent 'read_file' call. "+
			"For example, to read the next section of the file, use offset: %d.\n\n--- FILE CONTENT (truncated) ---\n%s",
			start, end, total, end, body)
	case total < 0 && cut:
		llm = fmt.Sprintf("IMPORTANT: Some lines were shortened to %d characters.\nStatus: Showing lines %d-%d.\n\n--- FILE CONTENT (truncated) ---\n%s",
			readMaxLineLength, start, end, body)
	default:
		llm = body
	}
	max := maxOutput(env)
	return Result{
		LLMContent: truncateHead(llm, max),
		Content:    []acp.ToolCallContent{acp.TextContent(truncateHead(body, max))},
	}
}

// load returns the text to slice, the 0-based line of the text it should
// start at, and the file's total line count (-1 when unknown because the
// editor returned only a range).
func (c *readFileCall) load(ctx context.Context, env *Env) (string, int, int, error) {
	if clientReads(env) {
		if c.t.IsDir() {
			return "", 0, 0, fmt.Errorf("%s is a directory, not a file", c.t.Path())
		}
		req := &acp.ReadTextFileRequest{SessionID: env.SessionID, Path: c.t.Path()}
		if c.ranged {
			line, limit := c.offset+1, c.limit
			req.Line, req.Limit = &line, &limit
		}
		resp, err := clientRead(ctx, env, c.t, req)
		if err != nil {
			return "", 0, 0, err
		}
		if c.ranged {
			return resp.Content, 0, -1, nil
		}
		return resp.Content, 0, countLines(resp.Content), nil
	}
	b, err := readLocal(c.t)
	if err != nil {
		return "", 0, 0, err
	}
	if looksBinary(b) {
		return "", 0, 0, fmt.Errorf("cannot display content of binary file: %s", c.t.Path())
	}
	s := string(b)
	return s, c.offset, countLines(s), nil
}

func countLines(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// sliceLines returns up to limit lines of s starting at 0-based line first,
// with over-long lines shortened; shown is how many lines it returned,
// lines the count in s, cut whether a line was shortened.
func sliceLines(s string, first, limit int) (body string, shown, lines int, cut bool) {
	lines = countLines(s)
	var b strings.Builder
	i := 0
	for rest := s; rest != "" && shown < limit; i++ {
		line := rest
		if j := strings.IndexByte(rest, '\n'); j >= 0 {
			line, rest = rest[:j+1], rest[j+1:]
		} else {
			rest = ""
		}
		if i < first {
			continue
		}
		if len(line) > readMaxLineLength {
			b.WriteString(truncateRunes(line, readMaxLineLength))
			b.WriteString("... [truncated]\n")
			cut = true
		} else {
			b.WriteString(line)
		}
		shown++
	}
	return b.String(), shown, lines, cut
}

func truncateRunes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && (s[max]&0xC0) == 0x80 {
		max--
	}
	return s[:max]
}
