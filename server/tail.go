package server

import (
	"context"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// The live tail. Every stream of the server — a session's events (handleStream), the change
// feed (handleChangeStream) and the protocol bridges' run streams (streamRun) — follows a ring
// of recent entries that one publisher keeps and swaps in whole (the hub for a session's
// events, the feed's pump for the changes), with the store behind it for a cursor older than
// the ring. One loop, follow, serves them all: it asks the stream's source (a tailSource) what
// comes next, sends it, and at the head waits for the ring to change, sending keep-alives
// meanwhile. It ends the stream when the client goes away, the request ends, a write fails,
// the server shuts down, the stream's credential lapses or the source cannot be read, with the
// final block that says how to resume where the stream can still be written to.

// tailStep is what a stream's source has for it next.
type tailStep struct {
	// out is what to send (SSE blocks, or a bridge protocol's); may be empty.
	out []byte
	// more is true when there is more to read now: the loop reads on without waiting.
	more bool
	// changed, when there is nothing more to read, is closed once the ring changes: the loop
	// waits on it.
	changed <-chan struct{}
	// done is true when the stream is complete once out is sent.
	done bool
	// final, when not nil, is the stream's last block, sent after out: the stream ends.
	final *api.Error
}

// tailSource is what a stream follows.
type tailSource interface {
	// position is the cursor of the source: the last sequence it has passed (sent, or
	// skipped because the stream does not send it). A stream ended before what next returned
	// was sent resumes after the position from before that call.
	position() int64
	// next reads what follows the cursor (from the ring when the ring covers it, else from
	// the store) and moves the cursor past it. Its error ends the stream; the error's text,
	// which says how to resume, is the final block's message.
	next(ctx context.Context) (tailStep, error)
}

// follow serves a stream from src until the stream is over: see "The live tail" above. The
// caller has opened the stream (sw) and ends it (sw.end) after follow returns.
func (s *Server) follow(ctx context.Context, sw *sseWriter, src tailSource) {
	keepAlive := time.NewTicker(s.opt.KeepAlive)
	defer keepAlive.Stop()
	for {
		from := src.position()
		st, err := src.next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				sw.finalMessage(contract.CodeStreamFailed, err.Error())
			}
			return
		}
		if len(st.out) > 0 {
			// A long replay never waits in await: check here whether the stream must end
			// first. A stream's last blocks (done) are sent as they are.
			if !st.done && s.interrupted(sw, from) {
				return
			}
			if !sw.flush(st.out) {
				return
			}
		}
		if st.final != nil {
			sw.finalMessage(st.final.Code, st.final.Message)
			return
		}
		if st.done {
			return
		}
		if st.more {
			continue
		}
		if !s.await(ctx, sw, st.changed, keepAlive.C, src.position()) {
			return
		}
	}
}

// sessionTail is a stream's subscription to one session's events: the session's topic of the
// hub (its ring of recent commits) and the store behind it. The caller calls leave when the
// stream is over.
type sessionTail struct {
	s     *Server
	sid   string
	topic *topic
	buf   []byte              // SSE blocks read from the store; only while replaying from it
	evs   []store.StoredEvent // events read back from the ring, reused
}

// joinSession subscribes a stream to the session sid's events.
func (s *Server) joinSession(sid string) *sessionTail {
	t := s.hub.join(sid)
	s.opt.Metrics.subscriber(1)
	return &sessionTail{s: s, sid: sid, topic: t}
}

// leave ends the subscription.
func (st *sessionTail) leave() {
	st.s.hub.leave(st.sid, st.topic)
	st.s.opt.Metrics.subscriber(-1)
}

// view is the ring as published now.
func (st *sessionTail) view() *ringView { return st.topic.view.Load() }

// blocks returns the SSE blocks of at most streamBatch events after cursor, and the sequence
// of the last of them (cursor when none): from v when the ring covers cursor+1 (live), else
// read from the store. The blocks are valid until the next call.
func (st *sessionTail) blocks(ctx context.Context, v *ringView, cursor int64) (blocks []byte, last int64, live bool, err error) {
	if blocks, last, ok := v.since(cursor, streamBatch); ok {
		st.buf = nil // back on the ring: do not keep the replay buffer
		return blocks, last, true, nil
	}
	evs, err := st.s.svc.Events(ctx, st.sid, cursor, streamBatch)
	if err != nil {
		return nil, cursor, false, err
	}
	st.buf = st.buf[:0]
	last = cursor
	for _, e := range evs {
		st.buf = appendSSE(st.buf, e)
		last = e.Sequence
	}
	return st.buf, last, false, nil
}

// events returns at most streamBatch events after cursor: from v when the ring covers
// cursor+1 (live: their sequence and data only, see ringView.events), else read from the
// store. The events are valid until the next call.
func (st *sessionTail) events(ctx context.Context, v *ringView, cursor int64) (evs []store.StoredEvent, live bool, err error) {
	if evs, ok := v.events(cursor, streamBatch, st.evs); ok {
		st.evs = evs[:0]
		return evs, true, nil
	}
	evs, err = st.s.svc.Events(ctx, st.sid, cursor, streamBatch)
	return evs, false, err
}

// logTail is the source of GET /v1/sessions/{id}/events/stream: the session's events as SSE
// blocks, from a cursor on.
type logTail struct {
	*sessionTail
	cursor int64
	// last is the session's last sequence when the stream started; head the last known since.
	last, head int64
	// caughtUp turns true once the subscriber has been at the head: only then does falling
	// MaxLag behind count as too slow (replaying a long history does not).
	caughtUp bool
}

func (t *logTail) position() int64 { return t.cursor }

func (t *logTail) next(ctx context.Context) (tailStep, error) {
	v := t.view()
	t.head = max(t.head, v.head)
	blocks, next, live, err := t.blocks(ctx, v, t.cursor)
	if err != nil {
		return tailStep{}, fmt.Errorf("reading the log failed: %v; reconnect with Last-Event-ID: %d", err, t.cursor)
	}
	if len(blocks) == 0 {
		t.caughtUp = true
		return tailStep{changed: v.changed}, nil
	}
	t.cursor = next
	m := t.s.opt.Metrics
	if t.caughtUp || live || next > t.last {
		// A live delivery: the subscriber is (or was) at the head, is served from the ring
		// of recent events, or gets events appended after it connected.
		m.delivered(max(t.head-t.cursor, 0))
	}
	st := tailStep{out: blocks, more: true}
	if t.caughtUp && t.head-t.cursor > t.s.opt.MaxLag {
		st.final = api.Errorf(contract.CodeSubscriberTooSlow, "this stream fell %d events behind the head; reconnect with Last-Event-ID: %d to resume without a gap", t.head-t.cursor, t.cursor)
	}
	return st, nil
}
