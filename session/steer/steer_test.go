package steer_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/steer"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/toolcall"
)

func mk(id, text string) steer.Steer {
	return steer.Steer{ID: id, Prompt: []acp.ContentBlock{acp.TextBlock(text)}, Message: model.Message{Role: model.RoleUser, Content: text}}
}

func ids(ss []steer.Steer) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

func TestQueue_ClosedUntilOpened(t *testing.T) {
	var q steer.Queue
	assert.False(t, q.Offer(mk("a", "x")), "no turn runs: nothing is accepted")
	q.Open()
	assert.True(t, q.Offer(mk("a", "x")))
	assert.Equal(t, []string{"a"}, ids(q.Close()), "the turn ended without delivering it")
	assert.False(t, q.Offer(mk("b", "y")))
}

func TestQueue_OrderKept(t *testing.T) {
	var q steer.Queue
	q.Open()
	for _, id := range []string{"1", "2", "3"} {
		require.True(t, q.Offer(mk(id, id)))
	}
	assert.Equal(t, []string{"1", "2", "3"}, ids(q.Take()))
	assert.Empty(t, q.Take())
}

// A cancel shuts the queue: what was accepted is never delivered, only
// reported when the turn ends, and nothing new is accepted.
func TestQueue_ShutDeliversNothingMore(t *testing.T) {
	var q steer.Queue
	q.Open()
	require.True(t, q.Offer(mk("a", "x")))
	q.Shut()
	assert.False(t, q.Offer(mk("b", "y")))
	assert.Empty(t, q.Take())
	assert.Empty(t, q.TakeOrClose())
	assert.Equal(t, []string{"a"}, ids(q.Close()))
	assert.Empty(t, q.Close())
}

// TakeOrClose closes the queue in the same step when nothing is pending:
// a steer racing the turn's end is either delivered by the turn or refused,
// never accepted by a turn that will not read it.
func TestQueue_TakeOrCloseRace(t *testing.T) {
	for range 200 {
		var q steer.Queue
		q.Open()
		var accepted bool
		var wg sync.WaitGroup
		wg.Go(func() { accepted = q.Offer(mk("late", "x")) })
		var got []steer.Steer
		for {
			ss := q.TakeOrClose()
			got = append(got, ss...)
			if len(ss) == 0 {
				break
			}
		}
		wg.Wait()
		got = append(got, q.Take()...)
		lost := q.Close()
		if accepted {
			assert.Equal(t, []string{"late"}, ids(got)[len(ids(got))-1:], "an accepted steer is delivered")
			assert.Empty(t, lost)
		} else {
			assert.Empty(t, got)
			assert.Empty(t, lost)
		}
	}
}

func TestDelivery_AppendsAfterResultsAndEchoes(t *testing.T) {
	var q steer.Queue
	q.Open()
	require.True(t, q.Offer(mk("m1", "use the other file")))
	require.True(t, q.Offer(mk("m2", "and be quick")))
	var echoed []string
	d := steer.Delivery{Queue: &q, Echo: func(_ context.Context, s steer.Steer) { echoed = append(echoed, s.ID) }}
	b := &toolcall.Batch{}
	b.Append("a reminder")
	d.AfterBatch(context.Background(), b)
	require.Len(t, b.Appended, 3)
	assert.Equal(t, "a reminder", b.Appended[0].Message.Content)
	assert.Equal(t, model.Message{Role: model.RoleUser, Content: "use the other file"}, b.Appended[1].Message)
	assert.Equal(t, store.KindSteer, b.Appended[1].Record.Kind)
	assert.Equal(t, "m1", b.Appended[1].Record.MessageID)
	assert.Equal(t, "and be quick", b.Appended[2].Message.Content)
	assert.Equal(t, []string{"m1", "m2"}, echoed)

	// A batch that stopped the turn delivers nothing; the steer is left
	// for the turn's end to report.
	require.True(t, q.Offer(mk("m3", "z")))
	stopped := &toolcall.Batch{Stop: true}
	d.AfterBatch(context.Background(), stopped)
	assert.Empty(t, stopped.Appended)
	assert.Equal(t, []string{"m3"}, ids(q.Close()))
}

func TestSteer_UpdatesAndReport(t *testing.T) {
	s := steer.Steer{ID: "msg_1", Prompt: []acp.ContentBlock{acp.TextBlock("a"), acp.TextBlock("b")}}
	us := s.Updates()
	require.Len(t, us, 2)
	for i, u := range us {
		assert.Equal(t, acp.UpdateUserMessageChunk, u.Kind)
		assert.Equal(t, "msg_1", u.MessageID)
		assert.Equal(t, s.Prompt[i].Text, u.Content.Text)
	}
	assert.Nil(t, steer.Report(nil))
	r := steer.Report([]steer.Steer{s})
	assert.Equal(t, map[string]any{"undelivered": []map[string]any{{"messageId": "msg_1", "prompt": s.Prompt}}}, r)
}
