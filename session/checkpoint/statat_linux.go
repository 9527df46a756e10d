package checkpoint

import (
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// On Linux the walk stats, reads and resolves links relative to the
// folder's descriptor: no path is resolved again per file, and nothing
// leaves the folder the walk opened through the workspace root.

func statOf(st *unix.Stat_t) fileStat {
	fst := fileStat{
		perm: fs.FileMode(st.Mode & 0o777),
		key: statKey{
			size:  st.Size,
			mtime: st.Mtim.Nano(),
			ctime: st.Ctim.Nano(),
			ino:   st.Ino,
			dev:   st.Dev,
			mode:  st.Mode,
		},
		nlink: uint64(st.Nlink),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		fst.kind = fs.ModeDir
	case unix.S_IFLNK:
		fst.kind = fs.ModeSymlink
	default:
		fst.kind = fs.ModeIrregular
	}
	return fst
}

func pathErr(op, abs, name string, err error) error {
	return &fs.PathError{Op: op, Path: abs + "/" + name, Err: err}
}

// lstatAt lstats name in the open folder dir (abs its path), or abs/name
// with dir nil.
func lstatAt(dir *os.File, abs, name string) (fileStat, error) {
	var st unix.Stat_t
	fd := unix.AT_FDCWD
	if dir != nil {
		fd = int(dir.Fd())
	} else {
		name = abs + "/" + name
	}
	for {
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fileStat{}, &fs.PathError{Op: "lstat", Path: name, Err: err}
		}
		return statOf(&st), nil
	}
}

func statFile(f *os.File) (fileStat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileStat{}, &fs.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	return statOf(&st), nil
}

func readlinkAt(dir *os.File, abs, name string) (string, error) {
	for n := 256; n <= 1<<16; n *= 4 {
		buf := make([]byte, n)
		got, err := unix.Readlinkat(int(dir.Fd()), name, buf)
		if err != nil {
			return "", pathErr("readlink", abs, name, err)
		}
		if got < n {
			return string(buf[:got]), nil
		}
	}
	return "", pathErr("readlink", abs, name, unix.ENAMETOOLONG)
}

// readAt reads a regular file without following a symlink at its name and
// without blocking on a FIFO swapped in after the listing; the stat is the
// open file's, taken before the read.
func readAt(dir *os.File, abs, name string) ([]byte, fileStat, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		if err == unix.ELOOP {
			err = fs.ErrNotExist // a symlink now: it is read as one next time
		}
		return nil, fileStat{}, pathErr("open", abs, name, err)
	}
	f := os.NewFile(uintptr(fd), abs+"/"+name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fileStat{}, pathErr("fstat", abs, name, err)
	}
	fst := statOf(&st)
	if fst.kind != 0 {
		return nil, fileStat{}, pathErr("open", abs, name, fs.ErrNotExist)
	}
	if st.Size > MaxTreeFile {
		return nil, fst, errTooBig
	}
	data := make([]byte, 0, st.Size+1)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, fst, nil
		}
		if err != nil {
			return nil, fileStat{}, err
		}
		if len(data) > MaxTreeFile {
			return nil, fst, errTooBig
		}
	}
}
