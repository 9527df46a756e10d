package sandbox

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stdInterp is what debug/elf finds as the PT_INTERP of the file at path:
// the answer readInterp must give without linking it.
func stdInterp(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
			if err != nil {
				return ""
			}
			return strings.TrimRight(string(b), "\x00")
		}
	}
	return ""
}

// fakeELF is a minimal executable of the given class and byte order: its
// header, a PT_LOAD and (when interp is not "") a PT_INTERP program header,
// and the interpreter's name, with no sections.
func fakeELF(t *testing.T, class elf.Class, bo binary.ByteOrder, interp string) []byte {
	t.Helper()
	var buf bytes.Buffer
	ident := [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(class), 0, byte(elf.EV_CURRENT)}
	if bo == binary.LittleEndian {
		ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	} else {
		ident[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
	}
	nph := 1
	if interp != "" {
		nph = 2
	}
	name := append([]byte(interp), 0)
	if class == elf.ELFCLASS32 {
		phoff := uint32(binary.Size(elf.Header32{}))
		dataOff := phoff + uint32(nph*binary.Size(elf.Prog32{}))
		hdr := elf.Header32{Ident: ident, Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_386), Version: uint32(elf.EV_CURRENT),
			Phoff: phoff, Ehsize: uint16(phoff), Phentsize: uint16(binary.Size(elf.Prog32{})), Phnum: uint16(nph)}
		progs := []elf.Prog32{{Type: uint32(elf.PT_LOAD)}}
		if interp != "" {
			progs = append(progs, elf.Prog32{Type: uint32(elf.PT_INTERP), Off: dataOff, Filesz: uint32(len(name)), Memsz: uint32(len(name))})
		}
		must(t, binary.Write(&buf, bo, hdr))
		must(t, binary.Write(&buf, bo, progs))
	} else {
		phoff := uint64(binary.Size(elf.Header64{}))
		dataOff := phoff + uint64(nph*binary.Size(elf.Prog64{}))
		hdr := elf.Header64{Ident: ident, Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
			Phoff: phoff, Ehsize: uint16(phoff), Phentsize: uint16(binary.Size(elf.Prog64{})), Phnum: uint16(nph)}
		progs := []elf.Prog64{{Type: uint32(elf.PT_LOAD)}}
		if interp != "" {
			progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP), Off: dataOff, Filesz: uint64(len(name)), Memsz: uint64(len(name))})
		}
		must(t, binary.Write(&buf, bo, hdr))
		must(t, binary.Write(&buf, bo, progs))
	}
	buf.Write(name)
	return buf.Bytes()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadInterp checks the hand-written program-header reader against
// debug/elf on the system's own programs, this test binary, both ELF
// classes and byte orders, and files that are not (whole) ELF executables.
func TestReadInterp(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, b, 0o755))
		return p
	}
	var paths []string
	for _, p := range []string{"/bin/sh", "/bin/ls", "/usr/bin/git", "/usr/bin/env"} {
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	if exe, err := os.Executable(); err == nil {
		paths = append(paths, exe)
	}
	want := map[string]string{}
	for _, c := range []struct {
		name  string
		class elf.Class
		bo    binary.ByteOrder
	}{{"le64", elf.ELFCLASS64, binary.LittleEndian}, {"be64", elf.ELFCLASS64, binary.BigEndian},
		{"le32", elf.ELFCLASS32, binary.LittleEndian}, {"be32", elf.ELFCLASS32, binary.BigEndian}} {
		b := fakeELF(t, c.class, c.bo, "/lib/ld-"+c.name+".so.1")
		p := write(c.name, b)
		want[p] = "/lib/ld-" + c.name + ".so.1"
		paths = append(paths, p, write(c.name+"-static", fakeELF(t, c.class, c.bo, "")))
		// Cut inside the interpreter's name, inside the program headers
		// and inside the ELF header.
		paths = append(paths, write(c.name+"-cut-name", b[:len(b)-5]), write(c.name+"-cut-phdr", b[:70]),
			write(c.name+"-cut-hdr", b[:40]))
	}
	paths = append(paths, write("script", []byte("#!/bin/sh\necho hi\n")), write("empty", nil),
		write("not-elf", bytes.Repeat([]byte{0x7f}, 200)), filepath.Join(dir, "missing"))
	for _, p := range paths {
		got, std := readInterp(p), stdInterp(t, p)
		if got != std {
			t.Errorf("%s: readInterp = %q, debug/elf = %q", p, got, std)
		}
		if w, ok := want[p]; ok && got != w {
			t.Errorf("%s: readInterp = %q, want %q", p, got, w)
		}
	}
}
