package checkpoint

import "sync"

// Content-defined chunking with a gear rolling hash: a boundary falls where
// the hash of the last bytes matches a mask, so boundaries move with the
// content and an insertion shifts no boundary beyond the next one.
const (
	minChunk  = 2 << 10
	maxChunk  = 64 << 10
	chunkMask = 1<<13 - 1 // 8 KiB on average past minChunk
)

// gear is a fixed table of pseudo-random 64-bit values, one per byte value;
// it must never change, or stored chunk boundaries would stop matching.
// Computed on the first chunking, not by package initialization on every
// start of acpd.
var gear = sync.OnceValue(func() *[256]uint64 {
	var t [256]uint64
	x := uint64(0x9E3779B97F4A7C15)
	for i := range t {
		// splitmix64
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		t[i] = z ^ (z >> 31)
	}
	return &t
})

// chunks cuts b at content-defined boundaries.
func chunks(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := cut(b)
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

func cut(b []byte) int {
	if len(b) <= minChunk {
		return len(b)
	}
	end := min(len(b), maxChunk)
	var h uint64
	g := gear()
	for i := minChunk; i < end; i++ {
		h = h<<1 + g[b[i]]
		if h&(chunkMask<<16) == 0 {
			return i + 1
		}
	}
	return end
}
