package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/sqlite"
)

func init() {
	commands["retention"] = command{
		summary: "list what a retention policy would archive and delete now (a dry run; serve applies it)",
		about: `Works out, without changing anything, what sessiond serve with the same --retention-*
flags would do at its next pass: the closed sessions it would archive (and compact), the
archive files it would delete (by age or to fit the size cap), and the ones it keeps because
they are the last copy of a session's log. It reads the store read-only, beside a running
server (as sessiond fsck does).`,
		run: runRetention,
	}
}

// ageValue is a flag holding a duration written as Go does (90m, 36h) or in days (30d).
type ageValue struct{ d *time.Duration }

func (v ageValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0"
	}
	if *v.d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(*v.d/(24*time.Hour)), 10) + "d"
	}
	return v.d.String()
}

func (v ageValue) Set(s string) error {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseUint(n, 10, 16)
		if err != nil {
			return fmt.Errorf("%q is not a number of days (30d) nor a duration (36h)", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d < 0 {
			return fmt.Errorf("%q is not a number of days (30d) nor a duration (36h)", s)
		}
	}
	*v.d = d
	return nil
}

// bytesValue is a flag holding a size in bytes: 1073741824, 500MB, 10GiB (KB, MB, GB, TB are
// powers of 1000; KiB, MiB, GiB, TiB of 1024).
type bytesValue struct{ n *int64 }

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

func (v bytesValue) String() string {
	if v.n == nil {
		return "0"
	}
	return strconv.FormatInt(*v.n, 10)
}

func (v bytesValue) Set(s string) error {
	num, mult := s, int64(1)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size (a number of bytes, or 500MB, 10GiB)", s)
	}
	*v.n = n * mult
	return nil
}

// retentionFlags registers the policy flags serve and retention share.
func retentionFlags(fs *flag.FlagSet) *session.RetentionPolicy {
	p := &session.RetentionPolicy{}
	fs.Var(ageValue{&p.ArchiveClosedAfter}, "retention-archive-closed-after", "archive (and compact) sessions closed for longer than this `age`: 30d, 36h (0: never)")
	fs.Var(ageValue{&p.DeleteArchivesAfter}, "retention-delete-archives-after", "delete archive files older than this `age` (365d), except the last copy of a session's log (0: never)")
	fs.Var(bytesValue{&p.MaxArchiveBytes}, "retention-max-archive-bytes", "cap the archive directory at this `size` (50GB, 10GiB, bytes): the oldest archives that are not a last copy go first (0: no cap)")
	return p
}

func runRetention(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	cl := newCommandLine("retention", stdout, stderr)
	fs := cl.fs
	data := fs.String("data", "./sessiond-data", "data directory of the SQLite store")
	storeURL := fs.String("store", "", "a PostgreSQL URL to read instead of --data")
	archiveDir := fs.String("archive-dir", "", archiveDirFlagUsage)
	jsonOut := fs.Bool("json", false, "print the plan as JSON")
	policy := retentionFlags(fs)
	if _, code, ok := cl.parse(args); !ok {
		return code
	}
	if !policy.Enabled() {
		return cl.usageError("no rule given: pass at least one --retention-* flag")
	}
	pg := isPostgresURL(*storeURL)
	if *storeURL != "" && !pg {
		return cl.usageError(fmt.Sprintf("--store %q is not a PostgreSQL URL", *storeURL))
	}
	if *archiveDir == noArchives {
		return cl.usageError("--archive-dir - turns the archives off, and retention needs them: give --archive-dir DIR, or leave it out for <data>/archives")
	}
	*archiveDir = resolveArchiveDir(*archiveDir, *data)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var in store.Inspector
	var err error
	if pg {
		in, err = postgres.OpenInspector(ctx, *storeURL)
	} else {
		in, err = sqlite.OpenInspector(ctx, *data)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sessiond retention: %v\n", err)
		return 1
	}
	defer in.Close()
	plan, err := session.PlanRetention(ctx, &inspectorReader{in: in}, *archiveDir, *policy, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "sessiond retention: %v\n", err)
		return 1
	}
	if *jsonOut {
		printJSON(stdout, plan)
		return 0
	}
	for _, s := range plan.Archive {
		fmt.Fprintf(stdout, "archive %s (closed %s)\n", s.SessionID, s.ClosedAt)
	}
	for _, a := range plan.Delete {
		fmt.Fprintf(stdout, "delete %s (session %s, archived %s, %d bytes, %s)\n", a.Name, a.SessionID, a.ArchivedAt, a.Bytes, a.Reason)
	}
	for _, a := range plan.Kept {
		fmt.Fprintf(stdout, "keep %s: %s\n", a.Name, a.Detail)
	}
	fmt.Fprintf(stdout, "dry run: %d sessions to archive, %d archives to delete (%d kept as last copies); archives %d bytes now, %d after\n",
		len(plan.Archive), len(plan.Delete), len(plan.Kept), plan.ArchiveBytes, plan.ArchiveBytesAfter)
	return 0
}

// inspectorReader reads what retention planning needs through a read-only inspector, so
// that a dry run works beside a running server.
type inspectorReader struct {
	in store.Inspector
	// lifecycles are those of the sessions ListSessions last returned, read with them, so
	// that Lifecycle need not read those sessions a second time.
	lifecycles map[string]store.Lifecycle
}

// session decodes one session's rows.
func (r *inspectorReader) session(ctx context.Context, id string) (*store.Session, store.Lifecycle, error) {
	var sess *store.Session
	var lc store.Lifecycle
	err := r.in.InspectSession(ctx, id, func(raw *store.RawSession) error {
		var err error
		sess, err = store.DecodeSession(store.SessionColumns{Record: raw.Record, Snapshot: raw.Snapshot, Lineage: raw.Lineage, ActiveBranch: raw.ActiveBranch}, raw.LastSequence)
		if err != nil {
			return fmt.Errorf("session %s: %w (sessiond fsck says more)", id, err)
		}
		if raw.Lifecycle != nil {
			if err := json.Unmarshal(raw.Lifecycle, &lc); err != nil {
				return fmt.Errorf("session %s: lifecycle: %w (sessiond fsck says more)", id, err)
			}
		}
		return nil
	})
	return sess, lc, err
}

func (r *inspectorReader) GetSession(ctx context.Context, id string) (*store.Session, error) {
	s, _, err := r.session(ctx, id)
	return s, err
}

// Lifecycle answers from what ListSessions read, or reads the session.
func (r *inspectorReader) Lifecycle(ctx context.Context, id string) (store.Lifecycle, error) {
	if lc, ok := r.lifecycles[id]; ok {
		return lc, nil
	}
	_, lc, err := r.session(ctx, id)
	return lc, err
}

// ListSessions reads the next 1,000 ids after f.After and returns those of f.Status; the
// cursor is the last id read, so a page may be empty with more to come. It keeps the
// lifecycles of the sessions it returns, for Lifecycle.
func (r *inspectorReader) ListSessions(ctx context.Context, f store.ListFilter) ([]*store.Session, string, error) {
	if f.AgentID != "" || f.Project != "" || f.ForkedFrom != "" {
		return nil, "", errors.New("inspectorReader filters by status only")
	}
	ids, err := r.in.InspectSessionIDs(ctx, f.After, 1000)
	if err != nil {
		return nil, "", err
	}
	var out []*store.Session
	lifecycles := make(map[string]store.Lifecycle)
	for _, id := range ids {
		s, lc, err := r.session(ctx, id)
		if errors.Is(err, store.ErrSessionNotFound) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if f.Status == "" || s.Record.Status == f.Status {
			out = append(out, s)
			lifecycles[id] = lc
		}
	}
	r.lifecycles = lifecycles
	next := ""
	if len(ids) == 1000 {
		next = ids[len(ids)-1]
	}
	return out, next, nil
}
