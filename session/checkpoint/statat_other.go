//go:build !linux

package checkpoint

import (
	"io/fs"
	"os"
	"path/filepath"
)

func statOf(fi fs.FileInfo) fileStat {
	fst := fileStat{
		perm: fi.Mode().Perm(),
		key: statKey{
			size:  fi.Size(),
			mtime: fi.ModTime().UnixNano(),
			ino:   inode(fi),
			mode:  uint32(fi.Mode()),
		},
	}
	switch {
	case fi.Mode().IsRegular():
	case fi.IsDir():
		fst.kind = fs.ModeDir
	case fi.Mode()&fs.ModeSymlink != 0:
		fst.kind = fs.ModeSymlink
	default:
		fst.kind = fs.ModeIrregular
	}
	return fst
}

func lstatAt(_ *os.File, abs, name string) (fileStat, error) {
	fi, err := os.Lstat(filepath.Join(abs, name))
	if err != nil {
		return fileStat{}, err
	}
	return statOf(fi), nil
}

func statFile(f *os.File) (fileStat, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileStat{}, err
	}
	return statOf(fi), nil
}

func readlinkAt(_ *os.File, abs, name string) (string, error) {
	return os.Readlink(filepath.Join(abs, name))
}

func readAt(_ *os.File, abs, name string) ([]byte, fileStat, error) {
	data, fi, err := readRegular(filepath.Join(abs, name), MaxTreeFile)
	if err != nil {
		return nil, fileStat{}, err
	}
	return data, statOf(fi), nil
}
