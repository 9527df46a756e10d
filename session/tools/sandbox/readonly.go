package sandbox

import (
	"bytes"
	"context"
	"encoding/binary"
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

// maxReadOnlyOutput bounds what RunReadOnly keeps of a program's stdout:
// the program reads a repository the workspace wrote (a commit subject, a
// status line can be as long as it likes), and its callers cut what they
// show to a few KiB.
const maxReadOnlyOutput = 1 << 20

// capBuffer keeps the first max bytes written to it and drops the rest,
// still accepting them, so the program is never blocked on a full pipe.
// (Not an embedded bytes.Buffer: io.Copy would use its ReadFrom, which
// takes everything.)
type capBuffer struct {
	b   bytes.Buffer
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); room > 0 {
		c.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capBuffer) Bytes() []byte  { return c.b.Bytes() }
func (c *capBuffer) String() string { return c.b.String() }

// withStderr adds stderr's first line to a failed run's error.
func withStderr(err error, stderr *capBuffer) error {
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
	interp := readInterp(path)
	interpCache[key] = interp
	return interp
}

// readInterp reads the PT_INTERP program header of the ELF file at path
// the way the kernel does: from the ELF header and the program headers
// alone, nothing else of the file. debug/elf would do it too, but linking
// it brings debug/dwarf and internal/zstd, whose package initialization
// every start of acpd then pays for one header read per program.
func readInterp(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var hdr [64]byte // an ELF64 header; an ELF32 one is 52 bytes
	n, _ := f.ReadAt(hdr[:], 0)
	if n < 52 || string(hdr[:4]) != "\x7fELF" || hdr[6] != 1 { // EI_VERSION must be EV_CURRENT
		return ""
	}
	var bo binary.ByteOrder
	switch hdr[5] { // EI_DATA
	case 1:
		bo = binary.LittleEndian
	case 2:
		bo = binary.BigEndian
	default:
		return ""
	}
	var phoff uint64
	var phentsize, phnum, want int
	switch hdr[4] { // EI_CLASS
	case 1:
		phoff = uint64(bo.Uint32(hdr[28:]))
		phentsize, phnum = int(bo.Uint16(hdr[42:])), int(bo.Uint16(hdr[44:]))
		want = 32
	case 2:
		if n < 64 {
			return ""
		}
		phoff = bo.Uint64(hdr[32:])
		phentsize, phnum = int(bo.Uint16(hdr[54:])), int(bo.Uint16(hdr[56:]))
		want = 56
	default:
		return ""
	}
	if phentsize < want || phoff > 1<<62 {
		return ""
	}
	ph := make([]byte, want)
	for i := range phnum {
		if _, err := f.ReadAt(ph, int64(phoff)+int64(i*phentsize)); err != nil {
			return ""
		}
		if bo.Uint32(ph) != 3 { // PT_INTERP
			continue
		}
		var off, size uint64
		if want == 32 {
			off, size = uint64(bo.Uint32(ph[4:])), uint64(bo.Uint32(ph[16:]))
		} else {
			off, size = bo.Uint64(ph[8:]), bo.Uint64(ph[32:])
		}
		if off > 1<<62 {
			return ""
		}
		b := make([]byte, min(size, 4096))
		n, err := f.ReadAt(b, int64(off))
		if err != nil && err != io.EOF {
			return ""
		}
		return strings.TrimRight(string(b[:n]), "\x00")
	}
	return ""
}
