package htmlconv

import (
	"context"
	"fmt"
	"runtime/metrics"
	"testing"
	"time"
)

// BenchmarkConvertNestedQuotes converts the second attack's page —
// paragraphs inside 99 nested <blockquote>s — of 2 and 8 MiB, as web_fetch
// does (default limits), and reports besides time and allocation the peak
// of live heap during a conversion (heap-peak-MiB), sampled every
// millisecond. The targets: at most 1 s and 64 MiB for 2 MiB, and growth
// with the size no faster than linear.
//
//	go test -run '^$' -bench ConvertNestedQuotes -benchmem -count 6 ./session/tools/htmlconv
func BenchmarkConvertNestedQuotes(b *testing.B) {
	for _, mib := range []int{2, 8} {
		page := nestedQuotes(mib<<20, 99)
		b.Run(fmt.Sprintf("size=%dMiB", mib), func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			peak := watchHeap()
			for b.Loop() {
				if _, err := Convert(context.Background(), page, "text/html", nil, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(peak())/(1<<20), "heap-peak-MiB")
		})
	}
}

// watchHeap samples the live heap (objects allocated and not yet freed)
// until the returned function is called, which returns the highest sample.
func watchHeap() func() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var top uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			top = max(top, sample[0].Value.Uint64())
			select {
			case <-stop:
				done <- top
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(stop); return <-done }
}
