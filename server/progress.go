package server

import (
	"github.com/sessiond/sessiond/wire"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
)

// wantsProgress reports whether the request's Accept header lists api.ProgressMediaType
// (with a q-value other than 0).
func wantsProgress(r *http.Request) bool {
	for _, h := range r.Header.Values("Accept") {
		for _, part := range strings.Split(h, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != api.ProgressMediaType {
				continue
			}
			if q, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// progressStream answers a long operation (archive, restore). Without progress asked for, it
// answers exactly like writeJSON and writeError. With it, progress lines are written at most
// once per interval, the first one interval after the start; the response becomes an NDJSON
// stream (200) only when that first line is written, so a quick operation, or one that fails
// before its first line, is answered exactly as without progress. Once streaming, the final
// line is the ordinary answer body (result or error object).
type progressStream struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	enabled  bool
	interval time.Duration
	timeout  time.Duration // bound of one write
	next     time.Time     // no progress line before this
	started  bool          // the stream's header is written
	broken   bool          // a write failed: write nothing more
}

// newProgressStream starts the clock of a long operation's answer.
func (s *Server) newProgressStream(w http.ResponseWriter, r *http.Request) *progressStream {
	return &progressStream{w: w, rc: http.NewResponseController(w), enabled: wantsProgress(r),
		interval: s.opt.ProgressInterval, timeout: s.opt.WriteTimeout, next: time.Now().Add(s.opt.ProgressInterval)}
}

// callback is the operation's progress callback: nil when no progress was asked for.
func (p *progressStream) callback() session.ProgressFunc {
	if !p.enabled {
		return nil
	}
	return p.report
}

// report writes a progress line if the interval has passed since the last one.
func (p *progressStream) report(pr wire.Progress) {
	now := time.Now()
	if p.broken || now.Before(p.next) {
		return
	}
	p.next = now.Add(p.interval)
	if !p.started {
		h := p.w.Header()
		h.Set("Content-Type", api.ProgressMediaType)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		p.w.WriteHeader(http.StatusOK)
		p.started = true
	}
	b, _ := contract.Marshal(api.ProgressLine{Progress: &pr})
	p.line(b)
}

// line writes one line and flushes it, within the write timeout.
func (p *progressStream) line(b []byte) {
	if p.broken {
		return
	}
	p.rc.SetWriteDeadline(time.Now().Add(p.timeout))
	if _, err := p.w.Write(append(b, '\n')); err != nil {
		p.broken = true
		return
	}
	if err := p.rc.Flush(); err != nil {
		p.broken = true
	}
	p.rc.SetWriteDeadline(time.Time{})
}

// answer writes the operation's result: the ordinary answer, or its final line.
func (p *progressStream) answer(status int, v any) {
	if !p.started {
		writeJSON(p.w, status, v)
		return
	}
	b, err := contract.Marshal(v)
	if err != nil {
		p.fail(api.Errorf(contract.CodeInternal, "encode response: %v", err))
		return
	}
	p.line(b)
}

// fail writes the operation's error: the ordinary error answer, or its final line.
func (p *progressStream) fail(e *api.Error) {
	if !p.started {
		writeError(p.w, e)
		return
	}
	b, _ := contract.Marshal(api.ErrorBody{Error: e})
	p.line(b)
}
