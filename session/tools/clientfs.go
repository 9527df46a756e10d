package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/confine"
)

// The editor's file system as editors really serve it
// (telemetry-and-client-fs.md part B). acpd and the editor that spawned it
// share the disk, so acpd checks the disk itself where an editor's answer
// cannot be trusted:
//
//   - Zed answers fs/read_text_file for a missing file inside the project
//     with empty content, not an error. acpd therefore checks that the file
//     exists before asking, and reports a missing one as not found; an
//     editor's -32002 (Resource not found) is not found too.
//   - The ACP spec requires the client to create a missing file but says
//     nothing about its folder, and some clients fail there. acpd creates
//     the missing parent folders itself before fs/write_text_file, confined
//     to the workspace as every local write is (os.Root, no symlinks).

// notFoundError is a file missing on disk or reported missing by the
// editor; it matches fs.ErrNotExist, so it classifies as FILE_NOT_FOUND
// and write_file treats the file as new.
type notFoundError struct{ path string }

func (e *notFoundError) Error() string        { return "File not found: " + e.path }
func (e *notFoundError) Is(target error) bool { return target == fs.ErrNotExist }

func errNotFound(path string) error { return &notFoundError{path: path} }

// clientRead asks the editor for t's text after checking that the file
// exists on disk; -32002 from the editor is reported as not found too.
func clientRead(ctx context.Context, env *Env, t confine.Target, req *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error) {
	if _, err := os.Lstat(t.Real()); errors.Is(err, fs.ErrNotExist) {
		return nil, errNotFound(t.Path())
	}
	if err := env.roots().Recheck(t, "file_path"); err != nil {
		return nil, err
	}
	resp, err := env.Client.ReadTextFile(ctx, req)
	var ae *acp.Error
	if errors.As(err, &ae) && ae.Code == acp.CodeResourceNotFound {
		return nil, errNotFound(t.Path())
	}
	return resp, err
}

// clientWrite creates t's missing parent folders below its root, then asks
// the editor to write the file.
func clientWrite(ctx context.Context, env *Env, t confine.Target, content string) error {
	if err := env.roots().Recheck(t, "file_path"); err != nil {
		return err
	}
	if dir := filepath.Dir(t.Rel()); dir != "." {
		if _, err := os.Lstat(filepath.Join(t.Root(), dir)); errors.Is(err, fs.ErrNotExist) {
			if err := t.MkdirParents(); err != nil {
				return fmt.Errorf("creating the folder of %s: %w", t.Path(), err)
			}
		}
	}
	return env.Client.WriteTextFile(ctx, &acp.WriteTextFileRequest{SessionID: env.SessionID, Path: t.Path(), Content: content})
}
