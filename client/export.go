package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sessiond/sessiond/api"
)

// LogEvent is one event of a streamed read of a log ([Client.Export]).
type LogEvent struct {
	Sequence int64 // the event's sequence
	// Data is the stored event, one line of the answer without its newline. It is valid until
	// the loop's next iteration (the iterator reuses its buffer): copy it to keep it.
	Data json.RawMessage
}

// exportBuffer is the size of the buffer an export reads lines through: one line is one
// event, which the server bounds far below it; a longer line is gathered whole.
const exportBuffer = 1 << 20

// Export reads a session's log from after the sequence after (-1: from the start) to its last
// sequence when the read began, through one streamed answer (GET
// /v1/sessions/{id}/events/export: NDJSON, the stored bytes), and yields each event in
// sequence order. An answer cut short (a dropped connection, a server that failed part way) or
// a retryable failure (retry.go) is resumed after the last event yielded, within
// DefaultRetryWindow, so every event is yielded once with no gap. The iteration ends after the
// last event, at the first error (yielded with a zero LogEvent: an *api.Error such as
// SESSION_NOT_FOUND, or ctx's error), or when the loop breaks.
func (c *Client) Export(ctx context.Context, id string, after int64) iter.Seq2[LogEvent, error] {
	return func(yield func(LogEvent, error) bool) {
		deadline := time.Now().Add(DefaultRetryWindow)
		b := backoff{max: 5 * time.Second}
		buf := bufio.NewReaderSize(nil, exportBuffer)
		for {
			done, progressed, err := c.exportOnce(ctx, id, &after, buf, yield)
			if done {
				return
			}
			if progressed {
				b.reset()
				deadline = time.Now().Add(DefaultRetryWindow)
			}
			ok, least := retryable(err)
			if !ok || ctx.Err() != nil || time.Now().Add(max(least, b.next)).After(deadline) {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(LogEvent{}, err)
				return
			}
			if werr := b.wait(ctx, least); werr != nil {
				yield(LogEvent{}, werr)
				return
			}
		}
	}
}

// exportOnce makes one request of Export and yields its events; done means the iteration is
// over (the log was read to its end, or the loop broke), else err says why the answer stopped
// and progressed whether it yielded anything. *after is the last sequence yielded.
func (c *Client) exportOnce(ctx context.Context, id string, after *int64, buf *bufio.Reader, yield func(LogEvent, error) bool) (done, progressed bool, err error) {
	path := "/v1/sessions/" + url.PathEscape(id) + "/events/export?after=" + strconv.FormatInt(*after, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return false, false, err
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return false, false, fmt.Errorf("GET %s: %w (is the server running at %s?)", path, err, c.base)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		return false, false, withRetryAfter(decodeError(resp.StatusCode, data), resp)
	}
	last, err := strconv.ParseInt(resp.Header.Get(api.LastSequenceHeader), 10, 64)
	if err != nil {
		return false, false, fmt.Errorf("GET %s: the answer's %s header %q is not a sequence", path, api.LastSequenceHeader, resp.Header.Get(api.LastSequenceHeader))
	}
	buf.Reset(resp.Body)
	var long []byte // a line longer than buf, gathered
	for first := true; ; first = false {
		line, err := buf.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = buf.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err == io.EOF && len(line) == 0 {
			if *after < last {
				// A whole answer (the chunked encoding's end arrived) that stops short: not
				// what the server sends, so not retried.
				return false, progressed, &api.Error{Code: api.CodeInternal, Status: resp.StatusCode,
					Message: fmt.Sprintf("GET %s: the answer ended after sequence %d, before the log's last sequence %d", path, *after, last)}
			}
			return true, progressed, nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // a last line without its newline
			}
			return false, progressed, fmt.Errorf("GET %s: cut after sequence %d: %w", path, *after, err)
		}
		// The answer's first line says where it starts (after *after, or later: the first event
		// a compacted log still holds); sequences are gap-free from there, so each line after
		// it is the next.
		if first {
			var head struct {
				Sequence *int64 `json:"sequence"`
			}
			if err := json.Unmarshal(line, &head); err != nil || head.Sequence == nil || *head.Sequence <= *after {
				return false, progressed, &api.Error{Code: api.CodeInternal, Status: resp.StatusCode,
					Message: fmt.Sprintf("GET %s: the answer's first line is not an event after sequence %d (%v)", path, *after, err)}
			}
			*after = *head.Sequence
		} else {
			*after++
		}
		progressed = true
		if !yield(LogEvent{Sequence: *after, Data: line[:len(line)-1]}, nil) {
			return true, true, nil
		}
	}
}
