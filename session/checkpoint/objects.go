package checkpoint

import (
	"bytes"
	"compress/zlib"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Content is stored by the SHA-256 of its bytes, one file per object under
// objects/<2 hex>/<62 hex>. An object's first byte says what follows:
//
//	'B' blob:  zlib of the content itself
//	'C' chunked: the concatenated raw ids (32 bytes each) of list objects
//	'L' list:  the concatenated raw ids of blob objects (the chunks)
//
// A file of at most smallFile bytes is one blob. A bigger one is cut into
// chunks at content-defined boundaries, so an edit changes the chunks around
// it and no others: a second version of a 1 MB file costs a chunk or two, not
// a megabyte. The chunk ids are grouped the same way (a boundary after an id
// whose first byte is a multiple of listFanout), so a version's list shares
// all but one group with the last one too. The id of a chunked object is
// still the hash of the whole content, so equal files are one object
// whatever their history.
const (
	tagBlob    = 'B'
	tagChunked = 'C'
	tagList    = 'L'
	smallFile  = 16 << 10
	idLen      = sha256.Size
	listFanout = 8
)

// objects is the content store of one checkpoint store.
type objects struct {
	dir string
	// written lists the objects created since the last flush, which fsyncs
	// them (or the file system) before a checkpoint names them.
	mu      sync.Mutex
	written []string
	known   map[string]bool // ids seen present, so a second put is one map lookup
}

func newObjects(dir string) *objects {
	return &objects{dir: dir, known: map[string]bool{}}
}

func hashID(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (o *objects) path(id string) string { return filepath.Join(o.dir, id[:2], id[2:]) }

// validID reports whether id has the form of an object id, so one read
// from a manifest can never name a path outside the store.
func validID(id string) bool {
	if len(id) != 2*idLen {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// has reports whether the object is stored. An empty file (left by a crash
// between its creation and the write-back of its data) counts as absent, so
// it is written again.
func (o *objects) has(id string) bool {
	o.mu.Lock()
	ok := o.known[id]
	o.mu.Unlock()
	if ok {
		return true
	}
	fi, err := os.Stat(o.path(id))
	if err != nil || fi.Size() == 0 {
		return false
	}
	o.mu.Lock()
	o.known[id] = true
	o.mu.Unlock()
	return true
}

// put stores content and returns its id.
func (o *objects) put(content []byte) (string, error) {
	id := hashID(content)
	if o.has(id) {
		return id, nil
	}
	if len(content) <= smallFile {
		return id, o.writeBlob(id, content)
	}
	var chunkIDs []byte
	for _, c := range chunks(content) {
		cid := hashID(c)
		if !o.has(cid) {
			if err := o.writeBlob(cid, c); err != nil {
				return "", err
			}
		}
		raw, _ := hex.DecodeString(cid)
		chunkIDs = append(chunkIDs, raw...)
	}
	top := []byte{tagChunked}
	start := 0
	for i := 0; i < len(chunkIDs); i += idLen {
		if i+idLen < len(chunkIDs) && chunkIDs[i]%listFanout != 0 {
			continue
		}
		group := append([]byte{tagList}, chunkIDs[start:i+idLen]...)
		gid := hashID(group)
		if !o.has(gid) {
			if err := o.write(gid, group); err != nil {
				return "", err
			}
		}
		raw, _ := hex.DecodeString(gid)
		top = append(top, raw...)
		start = i + idLen
	}
	return id, o.write(id, top)
}

func (o *objects) writeBlob(id string, content []byte) error {
	var buf bytes.Buffer
	buf.Grow(len(content)/2 + 64)
	buf.WriteByte(tagBlob)
	zw, _ := zlib.NewWriterLevel(&buf, zlib.BestSpeed)
	if _, err := zw.Write(content); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return o.write(id, buf.Bytes())
}

// write creates the object file: a temporary file renamed into place, so
// its name never appears with part of its bytes.
func (o *objects) write(id string, data []byte) error {
	p := o.path(id)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("checkpoint store: writing object %s: %w", id[:12], err)
	}
	o.mu.Lock()
	o.known[id] = true
	o.written = append(o.written, p)
	o.mu.Unlock()
	return nil
}

// errCorrupt wraps every read of an object whose bytes do not hash to its id.
var errCorrupt = errors.New("checkpoint store: object damaged")

// get returns the content of object id, checked against its id.
func (o *objects) get(id string) ([]byte, error) {
	b, err := o.read(id)
	if err != nil {
		return nil, err
	}
	if hashID(b) != id {
		return nil, fmt.Errorf("%w: %s", errCorrupt, id[:12])
	}
	return b, nil
}

// read decodes object id without checking the hash of the whole.
func (o *objects) read(id string) ([]byte, error) {
	if !validID(id) {
		return nil, fmt.Errorf("checkpoint store: %q is not an object id", id)
	}
	raw, err := os.ReadFile(o.path(id))
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: object %s: %w", id[:12], err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: %s is empty", errCorrupt, id[:12])
	}
	switch raw[0] {
	case tagBlob:
		zr, err := zlib.NewReader(bytes.NewReader(raw[1:]))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", errCorrupt, id[:12], err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", errCorrupt, id[:12], err)
		}
		return b, nil
	case tagChunked, tagList:
		body := raw[1:]
		if len(body)%idLen != 0 {
			return nil, fmt.Errorf("%w: %s: bad id list", errCorrupt, id[:12])
		}
		var out []byte
		for i := 0; i < len(body); i += idLen {
			sub := hex.EncodeToString(body[i : i+idLen])
			var part []byte
			if raw[0] == tagChunked {
				part, err = o.read(sub)
			} else {
				part, err = o.get(sub)
			}
			if err != nil {
				return nil, err
			}
			out = append(out, part...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %s: unknown tag %q", errCorrupt, id[:12], raw[0])
}

// refs returns the ids object id refers to (none for a blob).
func (o *objects) refs(id string) ([]string, error) {
	raw, err := os.ReadFile(o.path(id))
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 || raw[0] == tagBlob {
		return nil, nil
	}
	body := raw[1:]
	out := make([]string, 0, len(body)/idLen)
	for i := 0; i+idLen <= len(body); i += idLen {
		out = append(out, hex.EncodeToString(body[i:i+idLen]))
	}
	return out, nil
}

// flush makes every object written since the last flush durable.
func (o *objects) flush() error {
	o.mu.Lock()
	ws := o.written
	o.written = nil
	o.mu.Unlock()
	if len(ws) == 0 {
		return nil
	}
	return syncFiles(o.dir, ws)
}
