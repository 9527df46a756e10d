package store

import (
	"bytes"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the transcript parser: it must not
// panic, and the prefix it declares good must parse to the same records
// with no damage.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"v":1,"t":"2026-01-01T00:00:00Z","kind":"meta","meta":{"id":"f","cwd":"/w","createdAt":"2026-01-01T00:00:00Z"}}` + "\n" +
		`{"v":1,"t":"2026-01-01T00:00:01Z","kind":"text","text":"hi"}` + "\n" + `{"v":1,"t":`))
	f.Add([]byte("\n\n{}\n{\"kind\":\"user\"}\nnot json\n{}"))
	f.Add([]byte{0, 0, '\n', 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, pr := parse("f", data)
		if pr.goodLen < 0 || pr.goodLen > int64(len(data)) {
			t.Fatalf("goodLen %d out of range 0..%d", pr.goodLen, len(data))
		}
		if n := bytes.Count(data, []byte{'\n'}) + 1; len(tr.Records) > n {
			t.Fatalf("%d records from %d lines", len(tr.Records), n)
		}
		good := data[:pr.goodLen]
		if pr.needNewline {
			good = append(bytes.Clone(good), '\n')
		}
		tr2, pr2 := parse("f", good)
		if tr2.CorruptLine != 0 || int(pr2.goodLen) != len(good) || len(tr2.Records) != len(tr.Records) {
			t.Fatalf("good prefix does not reparse cleanly: corrupt=%d good=%d/%d records=%d/%d",
				tr2.CorruptLine, pr2.goodLen, len(good), len(tr2.Records), len(tr.Records))
		}
		_ = tr.finish("f")
	})
}
