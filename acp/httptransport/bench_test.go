package httptransport

import (
	"strings"
	"testing"
)

// BenchmarkRouteUpdate is the transport's own cost per agent message: a
// session/update of about 1 KiB written to the connection, parsed, routed
// and taken from its stream by a reader.
func BenchmarkRouteUpdate(b *testing.B) {
	_, c, w := testConn(b, Options{})
	s, rd, _, _ := c.attach("s1")
	line := []byte(update("s1", strings.Repeat("x", 1000)))
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Write(line); err != nil {
			b.Fatal(err)
		}
		_, n, _ := c.take(s, rd)
		c.written(n)
	}
}
