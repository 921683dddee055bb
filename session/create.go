package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// serverSetFields are record fields only the server writes: a create request may not give them.
var serverSetFields = []string{"schema_version", "status", "started_at", "updated_at", "last_heartbeat_at", "closed_at", "archive_path"}

// newSessionID returns a fresh random session id ("S-" and 16 hex digits).
func newSessionID() string {
	var b [8]byte
	rand.Read(b[:])
	return "S-" + hex.EncodeToString(b[:])
}

// Create creates a session from a create request: a JSON object with the session record
// fields the caller sets and a snapshot. The record is composed from the caller's fields plus
// the server's (schema_version 1, status running, started_at and updated_at now, a generated
// session_id when none is given) and validated against the session record schema, the
// snapshot against its own. It returns an *[InvalidError] listing every problem of the
// request, a *[RejectError] SESSION_EXISTS when the id is taken, or the store's error.
func (s *Service) Create(ctx context.Context, req []byte) (*Detail, error) {
	sess, err := s.buildSession(req)
	if err != nil {
		return nil, err
	}
	if err := s.st.CreateSession(ctx, sess); err != nil {
		if errors.Is(err, store.ErrSessionExists) {
			return nil, &RejectError{Code: contract.CodeSessionExists, Message: fmt.Sprintf("session %q already exists; pick another session_id or omit it to have one generated", sess.Record.SessionID)}
		}
		return nil, err
	}
	return s.Detail(ctx, sess), nil
}

// buildSession validates a create request and returns the session to store.
func (s *Service) buildSession(body []byte) (*store.Session, error) {
	v, err := contract.Parse(body, contract.Limits{})
	if err != nil {
		var se *contract.SyntaxError
		errors.As(err, &se)
		return nil, &InvalidError{What: "request body", Problems: []contract.Problem{{Path: se.Path, Rule: se.Rule, Layer: contract.LayerJSON, Message: se.Msg}}}
	}
	if v.Kind != contract.KindObject {
		return nil, &InvalidError{What: "request body", Problems: []contract.Problem{{Rule: "type", Layer: contract.LayerSchema, Message: "must be an object with the session record fields and a snapshot"}}}
	}
	var probs []contract.Problem
	ts := s.stamp()
	rec := []byte(fmt.Sprintf(`{"schema_version":1,"status":"running","started_at":%q,"updated_at":%q`, ts, ts))
	var snapshot *contract.Value
	hasID, id := false, ""
	for i := range v.Members {
		m := &v.Members[i]
		switch {
		case m.Key == "snapshot":
			snapshot = &m.Value
			continue
		case slices.Contains(serverSetFields, m.Key):
			probs = append(probs, contract.Problem{Path: "/" + m.Key, Rule: "server-set", Layer: contract.LayerRule,
				Message: fmt.Sprintf("%s is set by the server; leave it out", m.Key)})
			continue
		case m.Key == "session_id":
			hasID, id = true, m.Value.Str
		}
		rec = append(rec, ',')
		rec = append(rec, m.RawKey...)
		rec = append(rec, ':')
		rec = append(rec, m.Value.Raw...)
	}
	if !hasID {
		rec = append(rec, fmt.Sprintf(`,"session_id":%q`, newSessionID())...)
	}
	rec = append(rec, '}')
	var record contract.SessionRecord
	if err := contract.Decode(contract.KindSession, rec, contract.Limits{}, &record); err != nil {
		var ve *contract.ValidationError
		if !errors.As(err, &ve) {
			return nil, &RejectError{Code: "INTERNAL", Message: fmt.Sprintf("decode record: %v", err)}
		}
		probs = append(probs, ve.Problems...)
	}
	// The record's schema takes any non-empty session_id with the "S-" prefix; a new session's
	// id must also be one every event can name and every URL can carry.
	if hasID && !slices.ContainsFunc(probs, func(p contract.Problem) bool { return p.Path == "/session_id" }) {
		probs = append(probs, contract.SessionIDProblems(id)...)
	}
	var snap contract.Snapshot
	if snapshot == nil {
		probs = append(probs, contract.Problem{Path: "/snapshot", Rule: "required", Layer: contract.LayerSchema,
			Message: `required field "snapshot" is missing: give mode, modelId and capabilities, e.g. {"mode":"work","modelId":"my-model","capabilities":{}}`})
	} else if err := contract.Decode(contract.KindSnapshot, snapshot.Raw, contract.Limits{}, &snap); err != nil {
		var ve *contract.ValidationError
		if !errors.As(err, &ve) {
			return nil, &RejectError{Code: "INTERNAL", Message: fmt.Sprintf("decode snapshot: %v", err)}
		}
		for _, p := range ve.Problems {
			p.Path = "/snapshot" + p.Path
			probs = append(probs, p)
		}
	}
	if len(probs) > 0 {
		return nil, &InvalidError{What: "session", Problems: probs}
	}
	return &store.Session{Record: record, Snapshot: snap, LastSequence: -1}, nil
}
