package sandbox

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// ErrCannotConfine is returned by RunReadOnly when this process cannot
// confine a program at all (no usable Landlock, no helper): nothing ran,
// and the caller decides whether to run it another way.
var ErrCannotConfine = errors.New("cannot confine the program")

// RunReadOnly runs argv the way acpd runs a program on its own initiative
// (git for the environment block): through the helper, confined so that
// it may execute no file but argv[0] and its ELF interpreter, write none
// but the devices a program needs (/dev/null…), open no IP socket and
// signal no process outside. Whatever the files it reads name — git's
// core.fsmonitor, filters, hooks, pager — no other program can start.
// argv[0] must be an absolute path the caller trusts (the user's own git,
// found on their PATH). The sandbox mode does not matter here: it governs
// the model's commands, while this confinement only costs a re-exec.
// stdout is returned; a failure's error carries stderr's first line.
func (p *Policy) RunReadOnly(ctx context.Context, dir string, env []string, argv []string) ([]byte, error) {
	if p == nil || p.Helper == "" {
		return nil, fmt.Errorf("%w: no sandbox helper", ErrCannotConfine)
	}
	if st := p.status(); !st.Usable() {
		return nil, fmt.Errorf("%w: %v", ErrCannotConfine, st.Err)
	}
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		return nil, fmt.Errorf("RunReadOnly: %q is not an absolute program path", argv)
	}
	helper := []string{Subcommand, "--status-fd", "3", "--no-net", "--exec", argv[0]}
	if interp := elfInterpreter(argv[0]); interp != "" {
		helper = append(helper, "--exec", interp)
	}
	helper = append(append(helper, "--"), argv...)
	cmd, out, errOut := groupCommand(ctx, dir, env, append([]string{p.Helper}, helper...))
	sr, sw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer sr.Close()
	cmd.ExtraFiles = []*os.File{sw}
	err = cmd.Start()
	sw.Close()
	if err != nil {
		return nil, SetupError(fmt.Sprintf("starting the sandbox helper %s: %v", p.Helper, err))
	}
	// EOF once the helper exec'd the program (or was killed with ctx).
	msg, _ := io.ReadAll(io.LimitReader(sr, 4096))
	werr := cmd.Wait()
	if len(msg) > 0 {
		return nil, SetupError(string(msg))
	}
	return out.Bytes(), withStderr(werr, errOut)
}

// RunUnconfined runs argv as RunReadOnly does — its own process group,
// killed with ctx, stdout returned, stderr's first line in the error — but
// without the helper: for a caller that met ErrCannotConfine and has made
// the program safe by other means.
func RunUnconfined(ctx context.Context, dir string, env []string, argv []string) ([]byte, error) {
	cmd, out, errOut := groupCommand(ctx, dir, env, argv)
	err := withStderr(cmd.Run(), errOut)
	return out.Bytes(), err
}

// withStderr adds stderr's first line to a failed run's error.
func withStderr(err error, stderr *bytes.Buffer) error {
	if err == nil {
		return nil
	}
	if line, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n"); line != "" {
		return fmt.Errorf("%w: %s", err, line)
	}
	return err
}

var (
	interpMu    sync.Mutex
	interpCache = map[string]string{}
)

// elfInterpreter is the program interpreter (the dynamic loader) named by
// the ELF executable at path, "" for a static one or anything else. The
// kernel opens it for execution when it runs path, so it needs the right
// too; shared libraries are mapped, not executed, and need none.
func elfInterpreter(path string) string {
	key := path
	if fi, err := os.Stat(path); err == nil {
		key += "\x00" + fi.ModTime().String() + "\x00" + strconv.FormatInt(fi.Size(), 10)
	}
	interpMu.Lock()
	defer interpMu.Unlock()
	if v, ok := interpCache[key]; ok {
		return v
	}
	interp := ""
	if f, err := elf.Open(path); err == nil {
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				b, err := io.ReadAll(io.LimitReader(prog.Open(), 4096))
				if err == nil {
					interp = strings.TrimRight(string(b), "\x00")
				}
				break
			}
		}
		f.Close()
	}
	interpCache[key] = interp
	return interp
}
