package checkpoint

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
)

// A session's checkpoints live in one append-only pack file: a header, then
// records of
//
//	kind (1 byte) | payload length (4 bytes, big endian) | payload | CRC-32 of kind and payload (4 bytes)
//
// where kind is 'O' (an object: its 32-byte id, then its bytes) or 'M' (a
// checkpoint manifest, JSON; the last one of a turn is the turn's). A
// checkpoint appends the objects it needs that the pack lacks, then its
// manifest, then fsyncs the file once: the manifest is durable only with
// everything it names before it. A crash leaves at most a torn last record,
// which the next open cuts off.
//
// Objects are stored by the SHA-256 of their content. The first byte says
// what follows:
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

	packMagic  = "ACPDCP1\n"
	recObject  = 'O'
	recMan     = 'M'
	recHeader  = 5
	recTrailer = 4
	maxRecord  = 1 << 30
)

var crcTable = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// pack is one session's pack file, open for reading and appending.
type pack struct {
	path string
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer // appends; flushed before every read and sync
	size int64         // bytes written, buffered ones included
	// objs maps an object id to its bytes' offset and length.
	objs map[[idLen]byte]span
	// mans holds the last manifest of each turn, raw.
	mans map[int][]byte
	// order keeps the turns in the order their manifests appear.
	dirty bool
}

type span struct{ off, n int64 }

func hashID(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func rawID(id string) ([idLen]byte, bool) {
	var r [idLen]byte
	if len(id) != 2*idLen {
		return r, false
	}
	if _, err := hex.Decode(r[:], []byte(id)); err != nil {
		return r, false
	}
	return r, true
}

// openPack opens (creating when create is set) a pack and indexes it,
// cutting a torn tail. Read-only opens (create false) never write.
func openPack(path string, create bool) (*pack, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil && !create && errors.Is(err, os.ErrPermission) {
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, err
	}
	if create {
		lockShared(f)
	}
	p := &pack{path: path, f: f, objs: map[[idLen]byte]span{}, mans: map[int][]byte{}}
	good, err := p.scan(create)
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi, err := f.Stat(); create && err == nil && fi.Size() > good {
		// A torn last record: cut it, so what follows is read as records.
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, err
		}
	}
	p.size = good
	p.w = bufio.NewWriterSize(&offsetWriter{f: f, off: good}, 256<<10)
	return p, nil
}

// offsetWriter writes at a running offset (the pack's good end), so a
// torn tail is overwritten rather than appended after.
type offsetWriter struct {
	f   *os.File
	off int64
}

func (o *offsetWriter) Write(b []byte) (int, error) {
	n, err := o.f.WriteAt(b, o.off)
	o.off += int64(n)
	return n, err
}

// scan indexes the pack and returns the end of its last whole record.
func (p *pack) scan(create bool) (int64, error) {
	fi, err := p.f.Stat()
	if err != nil {
		return 0, err
	}
	if fi.Size() == 0 {
		if !create {
			return 0, nil
		}
		if _, err := p.f.WriteAt([]byte(packMagic), 0); err != nil {
			return 0, err
		}
		return int64(len(packMagic)), p.f.Sync()
	}
	r := bufio.NewReaderSize(io.NewSectionReader(p.f, 0, fi.Size()), 64<<10)
	magic := make([]byte, len(packMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != packMagic {
		return 0, fmt.Errorf("checkpoint store: %s is not a checkpoint pack", p.path)
	}
	off := int64(len(packMagic))
	var hdr [recHeader]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break
		}
		n := int64(binary.BigEndian.Uint32(hdr[1:]))
		end := off + recHeader + n + recTrailer
		if n > maxRecord || end > fi.Size() {
			break
		}
		switch hdr[0] {
		case recObject:
			if n < idLen {
				return off, nil
			}
			var id [idLen]byte
			if _, err := io.ReadFull(r, id[:]); err != nil {
				return off, nil
			}
			if _, err := r.Discard(int(n - idLen + recTrailer)); err != nil {
				return off, nil
			}
			p.objs[id] = span{off: off + recHeader + idLen, n: n - idLen}
		case recMan:
			body := make([]byte, n+recTrailer)
			if _, err := io.ReadFull(r, body); err != nil {
				return off, nil
			}
			crc := crc32.Update(crc32.Checksum(hdr[:1], crcTable()), crcTable(), body[:n])
			if crc != binary.BigEndian.Uint32(body[n:]) {
				return off, nil
			}
			turn, ok := manifestTurn(body[:n])
			if ok {
				p.mans[turn] = body[:n]
			}
		default:
			return off, nil
		}
		off = end
	}
	return off, nil
}

// has reports whether the pack holds object id.
func (p *pack) has(id string) bool {
	r, ok := rawID(id)
	if !ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, in := p.objs[r]
	return in
}

func (p *pack) appendRecord(kind byte, parts ...[]byte) (int64, error) {
	n := 0
	for _, b := range parts {
		n += len(b)
	}
	if n > maxRecord {
		return 0, fmt.Errorf("checkpoint store: a record of %d bytes is too big", n)
	}
	var hdr [recHeader]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(n))
	crc := crc32.Checksum(hdr[:1], crcTable())
	for _, b := range parts {
		crc = crc32.Update(crc, crcTable(), b)
	}
	start := p.size
	if _, err := p.w.Write(hdr[:]); err != nil {
		return 0, err
	}
	for _, b := range parts {
		if _, err := p.w.Write(b); err != nil {
			return 0, err
		}
	}
	var tr [recTrailer]byte
	binary.BigEndian.PutUint32(tr[:], crc)
	if _, err := p.w.Write(tr[:]); err != nil {
		return 0, err
	}
	p.size += int64(recHeader + n + recTrailer)
	p.dirty = true
	return start, nil
}

// putRaw appends object id with its stored bytes, unless present.
func (p *pack) putRaw(id string, data []byte) error {
	r, ok := rawID(id)
	if !ok {
		return fmt.Errorf("checkpoint store: bad object id %q", id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, in := p.objs[r]; in {
		return nil
	}
	start, err := p.appendRecord(recObject, r[:], data)
	if err != nil {
		return fmt.Errorf("checkpoint store: writing %s: %w", p.path, err)
	}
	p.objs[r] = span{off: start + recHeader + idLen, n: int64(len(data))}
	return nil
}

// putManifest appends a manifest and makes the pack durable.
func (p *pack) putManifest(turn int, data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.appendRecord(recMan, data); err != nil {
		return err
	}
	if err := p.w.Flush(); err != nil {
		return err
	}
	if err := p.f.Sync(); err != nil {
		return err
	}
	p.dirty = false
	p.mans[turn] = data
	return nil
}

// raw returns object id's stored bytes.
func (p *pack) raw(id string) ([]byte, error) {
	r, ok := rawID(id)
	if !ok {
		return nil, fmt.Errorf("checkpoint store: %q is not an object id", id)
	}
	p.mu.Lock()
	sp, in := p.objs[r]
	var err error
	if in && p.dirty {
		err = p.w.Flush()
	}
	p.mu.Unlock()
	if !in {
		return nil, fmt.Errorf("checkpoint store: object %s is missing", id[:12])
	}
	if err != nil {
		return nil, err
	}
	b := make([]byte, sp.n)
	if _, err := p.f.ReadAt(b, sp.off); err != nil {
		return nil, fmt.Errorf("checkpoint store: reading object %s: %w", id[:12], err)
	}
	return b, nil
}

func (p *pack) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.w.Flush()
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// put stores content in p and returns its id.
func (p *pack) put(content []byte) (string, error) {
	id := hashID(content)
	if p.has(id) {
		return id, nil
	}
	if len(content) <= smallFile {
		return id, p.putBlob(id, content)
	}
	var chunkIDs []byte
	for _, c := range chunks(content) {
		cid := hashID(c)
		if !p.has(cid) {
			if err := p.putBlob(cid, c); err != nil {
				return "", err
			}
		}
		raw, _ := rawID(cid)
		chunkIDs = append(chunkIDs, raw[:]...)
	}
	top := []byte{tagChunked}
	start := 0
	for i := 0; i < len(chunkIDs); i += idLen {
		if i+idLen < len(chunkIDs) && chunkIDs[i]%listFanout != 0 {
			continue
		}
		group := append([]byte{tagList}, chunkIDs[start:i+idLen]...)
		gid := hashID(group)
		if err := p.putRaw(gid, group); err != nil {
			return "", err
		}
		raw, _ := rawID(gid)
		top = append(top, raw[:]...)
		start = i + idLen
	}
	return id, p.putRaw(id, top)
}

func (p *pack) putBlob(id string, content []byte) error {
	var buf bytes.Buffer
	buf.Grow(len(content)/2 + 64)
	buf.WriteByte(tagBlob)
	zw := zlibPool.Get().(*zlib.Writer)
	defer zlibPool.Put(zw)
	zw.Reset(&buf)
	if _, err := zw.Write(content); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return p.putRaw(id, buf.Bytes())
}

// zlibPool keeps compressors: each holds about a megabyte of tables, which
// a first snapshot of ten thousand files would otherwise allocate as many
// times.
var zlibPool = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
	return zw
}}

// errCorrupt wraps every read of an object whose bytes do not hash to its id.
var errCorrupt = errors.New("checkpoint store: object damaged")

// get returns the content of object id, checked against its id.
func (p *pack) get(id string) ([]byte, error) {
	b, err := p.read(id)
	if err != nil {
		return nil, err
	}
	if hashID(b) != id {
		return nil, fmt.Errorf("%w: %s", errCorrupt, id[:12])
	}
	return b, nil
}

// read decodes object id without checking the hash of the whole.
func (p *pack) read(id string) ([]byte, error) {
	raw, err := p.raw(id)
	if err != nil {
		return nil, err
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
				part, err = p.read(sub)
			} else {
				part, err = p.get(sub)
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
