package store

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

func syncCount(w *Writer) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.syncs
}

func TestWriter_SyncsWithinOneSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := Open(t.TempDir(), Options{})
		require.NoError(t, err)
		w, err := s.Create(SessionMeta{ID: "sync", Cwd: "/w"})
		require.NoError(t, err)
		require.Equal(t, 1, syncCount(w), "Create syncs the meta record")

		require.NoError(t, w.Append(Record{Kind: KindText, Text: "a"}))
		require.NoError(t, w.Append(Record{Kind: KindText, Text: "b"}))
		assert.Equal(t, 1, syncCount(w), "appends within the interval wait for the timer")
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, 1, syncCount(w))
		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.Equal(t, 2, syncCount(w), "the timer syncs one interval after the first unsynced write")

		// Nothing unsynced: the timer is not re-armed.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		assert.Equal(t, 2, syncCount(w))

		// A write long after the last sync is synced at once.
		require.NoError(t, w.Append(Record{Kind: KindText, Text: "c"}))
		assert.Equal(t, 3, syncCount(w))

		// EndTurn syncs immediately and disarms the timer.
		require.NoError(t, w.Append(Record{Kind: KindText, Text: "d"}))
		require.NoError(t, w.EndTurn(acp.StopEndTurn, ""))
		assert.Equal(t, 4, syncCount(w))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, 4, syncCount(w))

		// Close syncs pending writes; a timer armed before Close does
		// nothing after it.
		require.NoError(t, w.Append(Record{Kind: KindText, Text: "e"}))
		require.NoError(t, w.Close())
		assert.Equal(t, 5, syncCount(w))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, 5, syncCount(w))
	})
}

func TestWriter_ConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	w, err := s.Create(SessionMeta{ID: "conc", Cwd: "/w"})
	require.NoError(t, err)
	const goroutines, each = 8, 50
	errs := make(chan error, goroutines)
	for g := range goroutines {
		go func() {
			for i := range each {
				if err := w.Append(Record{Kind: KindText, Text: string(rune('a'+g)) + string(rune('0'+i%10))}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range goroutines {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("appends did not finish")
		}
	}
	require.NoError(t, w.Close())
	tr, err := s.Load("conc")
	require.NoError(t, err)
	assert.Empty(t, tr.Warnings)
	assert.Len(t, tr.Records, 1+goroutines*each)
}
