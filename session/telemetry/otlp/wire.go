package otlp

import (
	"encoding/binary"
	"errors"
	"math"
)

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// encoder appends protobuf fields to b. A nested message is written in
// place: open reserves one length byte, close fills it in and, for the rare
// message of 128 bytes or more, moves the body right to make room for a
// longer varint. That keeps a whole export request in one buffer without
// sizing every message first.
//
// The scalar helpers leave out a proto3 field holding its default value, as
// the proto3 encoding does; the *Always variants are for fields whose
// presence matters (a oneof member, an optional field).
type encoder struct{ b []byte }

func (e *encoder) varint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

func (e *encoder) tag(field, wire int) { e.varint(uint64(field)<<3 | uint64(wire)) }

func (e *encoder) uint(field int, v uint64) {
	if v != 0 {
		e.tag(field, wireVarint)
		e.varint(v)
	}
}

// int encodes an int32 or int64 field: negative values take ten bytes, as
// protobuf sign-extends them.
func (e *encoder) int(field int, v int64) { e.uint(field, uint64(v)) }

func (e *encoder) sint(field int, v int32) {
	e.uint(field, uint64(uint32(v<<1)^uint32(v>>31)))
}

func (e *encoder) boolean(field int, v bool) {
	if v {
		e.uint(field, 1)
	}
}

func (e *encoder) boolAlways(field int, v bool) {
	e.tag(field, wireVarint)
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) intAlways(field int, v int64) {
	e.tag(field, wireVarint)
	e.varint(uint64(v))
}

func (e *encoder) fixed64(field int, v uint64) {
	if v != 0 {
		e.fixed64Always(field, v)
	}
}

func (e *encoder) fixed64Always(field int, v uint64) {
	e.tag(field, wireFixed64)
	e.b = binary.LittleEndian.AppendUint64(e.b, v)
}

func (e *encoder) fixed32(field int, v uint32) {
	if v != 0 {
		e.tag(field, wireFixed32)
		e.b = binary.LittleEndian.AppendUint32(e.b, v)
	}
}

func (e *encoder) double(field int, v float64) {
	if v != 0 || math.Signbit(v) {
		e.doubleAlways(field, v)
	}
}

func (e *encoder) doubleAlways(field int, v float64) {
	e.fixed64Always(field, math.Float64bits(v))
}

func (e *encoder) str(field int, s string) {
	if s != "" {
		e.strAlways(field, s)
	}
}

func (e *encoder) strAlways(field int, s string) {
	e.tag(field, wireBytes)
	e.varint(uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) bytes(field int, p []byte) {
	if len(p) != 0 {
		e.bytesAlways(field, p)
	}
}

func (e *encoder) bytesAlways(field int, p []byte) {
	e.tag(field, wireBytes)
	e.varint(uint64(len(p)))
	e.b = append(e.b, p...)
}

// packedFixed64 writes a repeated fixed64 field packed, as proto3 does.
func (e *encoder) packedFixed64(field int, vs []uint64) {
	if len(vs) == 0 {
		return
	}
	e.tag(field, wireBytes)
	e.varint(uint64(8 * len(vs)))
	for _, v := range vs {
		e.b = binary.LittleEndian.AppendUint64(e.b, v)
	}
}

func (e *encoder) packedDouble(field int, vs []float64) {
	if len(vs) == 0 {
		return
	}
	e.tag(field, wireBytes)
	e.varint(uint64(8 * len(vs)))
	for _, v := range vs {
		e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v))
	}
}

func (e *encoder) packedVarint(field int, vs []uint64) {
	if len(vs) == 0 {
		return
	}
	start := e.open(field)
	for _, v := range vs {
		e.varint(v)
	}
	e.close(start)
}

// open starts a length-delimited field (a nested message); the returned
// offset goes to close.
func (e *encoder) open(field int) int {
	e.tag(field, wireBytes)
	e.b = append(e.b, 0)
	return len(e.b)
}

func (e *encoder) close(start int) {
	n := len(e.b) - start
	if n < 0x80 {
		e.b[start-1] = byte(n)
		return
	}
	var lenBuf [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(lenBuf[:], uint64(n))
	e.b = append(e.b, lenBuf[:k-1]...) // grow by the extra length bytes
	copy(e.b[start-1+k:], e.b[start:start+n])
	copy(e.b[start-1:], lenBuf[:k])
}

// field is one field read by decoder: v holds a varint or fixed value,
// p the bytes of a length-delimited one.
type field struct {
	num  int
	wire int
	v    uint64
	p    []byte
}

var errTruncated = errors.New("protobuf: truncated message")

// next reads the field at the start of b and returns it with the rest of
// b. It is enough to read the small answers a collector sends (partial
// success, gRPC status details); groups, long gone from protobuf, are an
// error.
func next(b []byte) (field, []byte, error) {
	key, n := binary.Uvarint(b)
	if n <= 0 {
		return field{}, nil, errTruncated
	}
	b = b[n:]
	f := field{num: int(key >> 3), wire: int(key & 7)}
	switch f.wire {
	case wireVarint:
		f.v, n = binary.Uvarint(b)
		if n <= 0 {
			return field{}, nil, errTruncated
		}
		b = b[n:]
	case wireFixed64:
		if len(b) < 8 {
			return field{}, nil, errTruncated
		}
		f.v, b = binary.LittleEndian.Uint64(b), b[8:]
	case wireFixed32:
		if len(b) < 4 {
			return field{}, nil, errTruncated
		}
		f.v, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
	case wireBytes:
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return field{}, nil, errTruncated
		}
		f.p, b = b[n:n+int(l)], b[n+int(l):]
	default:
		return field{}, nil, errors.New("protobuf: unsupported wire type")
	}
	return f, b, nil
}
