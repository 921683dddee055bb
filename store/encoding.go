package store

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/contract"
)

// SessionColumns are a session's JSON columns as drivers store them. Lineage and
// ActiveBranch are nil when the session has none (stored as SQL NULL).
type SessionColumns struct {
	Record, Snapshot, Lineage, ActiveBranch []byte
}

// ApplySessionUpdate runs fn on cur, the stored session id, the way every driver's
// UpdateSession and UpdateLifecycle do: a change to LastSequence is undone, a change of the
// session id is refused, and the result is encoded for the driver's columns. On an error (fn's,
// the refusal, an encoding failure) nothing may be stored.
func ApplySessionUpdate(id string, cur *Session, fn func(*Session) error) (SessionColumns, error) {
	last := cur.LastSequence
	if err := fn(cur); err != nil {
		return SessionColumns{}, err
	}
	cur.LastSequence = last
	if cur.Record.SessionID != id {
		return SessionColumns{}, fmt.Errorf("the session id cannot change (fn set it to %q)", cur.Record.SessionID)
	}
	return EncodeSession(cur)
}

// EncodeSession encodes the stored parts of a session for a driver's columns.
func EncodeSession(s *Session) (SessionColumns, error) {
	var (
		c   SessionColumns
		err error
	)
	if c.Record, err = json.Marshal(s.Record); err != nil {
		return c, fmt.Errorf("encode record: %w", err)
	}
	if c.Snapshot, err = json.Marshal(s.Snapshot); err != nil {
		return c, fmt.Errorf("encode snapshot: %w", err)
	}
	if s.Lineage != nil {
		if c.Lineage, err = json.Marshal(s.Lineage); err != nil {
			return c, fmt.Errorf("encode lineage: %w", err)
		}
	}
	if s.ActiveBranch != nil {
		if c.ActiveBranch, err = json.Marshal(s.ActiveBranch); err != nil {
			return c, fmt.Errorf("encode active branch: %w", err)
		}
	}
	return c, nil
}

// DecodeSession decodes columns written by EncodeSession into a session with the given last
// sequence. It fails when stored JSON does not decode.
func DecodeSession(c SessionColumns, lastSequence int64) (*Session, error) {
	s := &Session{LastSequence: lastSequence}
	if err := json.Unmarshal(c.Record, &s.Record); err != nil {
		return nil, fmt.Errorf("decode stored record: %w", err)
	}
	if err := json.Unmarshal(c.Snapshot, &s.Snapshot); err != nil {
		return nil, fmt.Errorf("decode stored snapshot: %w", err)
	}
	if c.Lineage != nil {
		s.Lineage = new(contract.Lineage)
		if err := json.Unmarshal(c.Lineage, s.Lineage); err != nil {
			return nil, fmt.Errorf("decode stored lineage: %w", err)
		}
	}
	if c.ActiveBranch != nil {
		s.ActiveBranch = new(contract.ActiveBranch)
		if err := json.Unmarshal(c.ActiveBranch, s.ActiveBranch); err != nil {
			return nil, fmt.Errorf("decode stored active branch: %w", err)
		}
	}
	return s, nil
}

// Migration is one schema step of a driver; Version is the number its file name starts with.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations reads a driver's embedded migrations, files named "<version>_<what>.sql" in dir
// of fsys, and returns them in version order. It fails unless the versions are 1, 2, 3, ...
// without gaps.
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, n := range names {
		base := strings.TrimPrefix(n, dir+"/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", base)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: versions must be 1, 2, 3, ... without gaps", m.Name)
		}
	}
	return ms, nil
}
