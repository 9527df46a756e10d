package tools

import (
	"fmt"

	"github.com/acpd/acpd/session/tools/confine"
)

// ErrOutsideWorkspace is wrapped by every confinement refusal (package
// confine's), classified as PATH_NOT_IN_WORKSPACE.
var ErrOutsideWorkspace = confine.ErrOutsideWorkspace

// roots is the session's workspace as confinement sees it.
func (env *Env) roots() confine.Roots {
	return confine.Roots{Dirs: env.Roots, Cache: env.RootCache}
}

// confine checks the path p, the value of parameter field, against the
// session's workspace roots.
func (env *Env) confine(field, p string) (confine.Target, error) {
	return env.roots().Path(field, p)
}

// confineFile confines the file_path argument of a tool that writes a file:
// inside the workspace, and not a directory.
func (env *Env) confineFile(tool, path string) (confine.Target, error) {
	tg, err := env.confine("file_path", path)
	if err != nil {
		return confine.Target{}, err
	}
	if tg.IsDir() {
		return confine.Target{}, fmt.Errorf("invalid parameters for %s: params/file_path: %s is a directory, not a file", tool, tg.Path())
	}
	return tg, nil
}

// confineDir confines a search path, defaulting to the session cwd.
func (env *Env) confineDir(p string) (confine.Target, error) {
	if p == "" {
		if len(env.Roots) == 0 {
			return confine.Target{}, fmt.Errorf("%w: the session has no workspace directories", ErrOutsideWorkspace)
		}
		p = env.Roots[0]
	}
	return env.confine("path", p)
}
