package session_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// zedLikeClient serves fs/* as Zed does for paths inside the project: a
// missing file reads as empty content (no error). Its writes, unlike Zed's,
// do not create folders (as some other clients), so a write into a new
// folder works only if acpd made the folder.
type zedLikeClient struct {
	mu     sync.Mutex
	reads  []string
	writes []string
}

func (z *zedLikeClient) client() *acptest.FakeClient {
	return &acptest.FakeClient{
		ReadTextFileFunc: func(_ context.Context, r *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error) {
			z.mu.Lock()
			z.reads = append(z.reads, r.Path)
			z.mu.Unlock()
			b, err := os.ReadFile(r.Path)
			if err != nil {
				return &acp.ReadTextFileResponse{Content: ""}, nil // a new, empty buffer
			}
			return &acp.ReadTextFileResponse{Content: string(b)}, nil
		},
		WriteTextFileFunc: func(_ context.Context, r *acp.WriteTextFileRequest) error {
			z.mu.Lock()
			z.writes = append(z.writes, r.Path)
			z.mu.Unlock()
			if err := os.WriteFile(r.Path, []byte(r.Content), 0o644); err != nil {
				return acp.ErrInternal("invalid path")
			}
			return nil
		},
	}
}

func (z *zedLikeClient) calls() (reads, writes []string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return append([]string(nil), z.reads...), append([]string(nil), z.writes...)
}

// TestE2E_ClientFSMissingFileAndNewFolder: through the built binary, a read
// of a missing file is reported not found (the editor, which would answer
// empty content, is not asked), and a write into a folder that does not
// exist reaches the editor after acpd created the folder.
func TestE2E_ClientFSMissingFileAndNewFolder(t *testing.T) {
	z := &zedLikeClient{}
	d := startDaemon(t, z.client(), nil)
	missing := filepath.Join(d.cwd, "missing.txt")
	newFile := filepath.Join(d.cwd, "docs", "notes", "plan.md")
	d.model.Add(
		calls(call("read_file", map[string]any{"file_path": missing})),
		calls(call("write_file", map[string]any{"file_path": newFile, "content": "# plan\n"})),
		modeltest.Response{Text: "done"},
	)
	sid := d.session(t)
	r, err := d.cc.Prompt(ctxFor(t), sid, "read then write")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, r.StopReason)

	reads, writes := z.calls()
	assert.Empty(t, reads, "neither the missing file nor the new one is read through the editor")
	assert.Equal(t, []string{newFile}, writes)
	b, err := os.ReadFile(newFile)
	require.NoError(t, err)
	assert.Equal(t, "# plan\n", string(b))

	reqs := d.model.Requests()
	require.Len(t, reqs, 3)
	msgs := reqs[1].Messages
	assert.Equal(t, "Error: File not found: "+missing, msgs[len(msgs)-1].Text())
	msgs = reqs[2].Messages
	assert.Equal(t, "Successfully created and wrote to new file: "+newFile+".", msgs[len(msgs)-1].Text())
}
