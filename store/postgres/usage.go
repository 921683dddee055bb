package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// The usage rollup (store/usage.go, migration 0012): an append whose batch holds an event that
// counts (store.UsageCounts) takes the locking path (appendOnce), whose write batch adds the
// rollup's rows (queueUsage) in the append's transaction; the one-statement path (direct.go)
// carries only batches that count nothing. Usage sums the rows of the days asked.

// usageDayCols are usage_days' count columns, in store.UsageTotals' order.
var usageDayCols = []string{"usage_events", "input_tokens", "output_tokens", "total_tokens", "runs_completed", "runs_failed", "runs_stopped", "run_ms", "tool_calls", "tool_failures", "tool_denied"}

// satSet is the SET list of an upsert adding excluded's counts to the row's (table t),
// saturating at 2^63-1 (store.SatAdd) without computing an overflowing sum.
func satSet(cols []string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprintf("%[1]s = CASE WHEN t.%[1]s > %[2]d - excluded.%[1]s THEN %[2]d ELSE t.%[1]s + excluded.%[1]s END", c, int64(math.MaxInt64))
	}
	return strings.Join(parts, ", ")
}

var (
	qUsageDays = func() string {
		arrays := make([]string, len(usageDayCols))
		for i := range usageDayCols {
			arrays[i] = fmt.Sprintf("$%d::bigint[]", i+3)
		}
		return `INSERT INTO usage_days AS t (day, sk, ` + strings.Join(usageDayCols, ", ") + `)
		SELECT u.day, $1, u.` + strings.Join(usageDayCols, ", u.") + ` FROM unnest($2::integer[], ` + strings.Join(arrays, ", ") + `) AS u (day, ` + strings.Join(usageDayCols, ", ") + `)
		ON CONFLICT (day, sk) DO UPDATE SET ` + satSet(usageDayCols)
	}()
	qUsageTools = `INSERT INTO usage_tools AS t (day, sk, tool, calls, failures, denied)
		SELECT u.day, $1, u.tool, u.calls, u.failures, u.denied FROM unnest($2::integer[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[]) AS u (day, tool, calls, failures, denied)
		ON CONFLICT (day, sk, tool) DO UPDATE SET ` + satSet([]string{"calls", "failures", "denied"})
)

// countsUsage reports whether a batch holds an event that may change the rollup.
func countsUsage(events []*contract.EncodedEvent) bool {
	for _, ev := range events {
		if store.UsageCounts(ev.EventType) {
			return true
		}
	}
	return false
}

// queueUsage adds to b the upserts of the rollup of events (added to session sk's log).
func queueUsage(b *pgx.Batch, sk int64, events []store.StoredEvent) error {
	var r store.UsageRollup
	for i := range events {
		if err := r.Add(&events[i]); err != nil {
			return err
		}
	}
	queueRollup(b, sk, &r)
	return nil
}

// queueRollup adds to b the upserts of r's rows to session sk's.
func queueRollup(b *pgx.Batch, sk int64, r *store.UsageRollup) {
	if r.Empty() {
		return
	}
	days := r.Days()
	dayNums := make([]int32, len(days))
	cols := make([][]int64, len(usageDayCols))
	for i := range cols {
		cols[i] = make([]int64, len(days))
	}
	for j, d := range days {
		dayNums[j] = int32(d.Day)
		t := d.UsageTotals
		for i, v := range []int64{t.UsageEvents, t.InputTokens, t.OutputTokens, t.TotalTokens, t.RunsCompleted, t.RunsFailed, t.RunsStopped, t.RunDurationMs, t.ToolCalls, t.ToolFailures, t.ToolDenied} {
			cols[i][j] = v
		}
	}
	args := []any{sk, dayNums}
	for _, c := range cols {
		args = append(args, c)
	}
	b.Queue(qUsageDays, args...)
	tools := r.Tools()
	if len(tools) == 0 {
		return
	}
	tDays, names := make([]int32, len(tools)), make([]string, len(tools))
	calls, fails, denied := make([]int64, len(tools)), make([]int64, len(tools)), make([]int64, len(tools))
	for i, t := range tools {
		tDays[i], names[i], calls[i], fails[i], denied[i] = int32(t.Day), t.Tool, t.Calls, t.Failures, t.Denied
	}
	b.Queue(qUsageTools, sk, tDays, names, calls, fails, denied)
}

// dropUsageRows deletes session sk's rollup rows in tx.
func dropUsageRows(ctx context.Context, tx pgx.Tx, sk int64) error {
	for _, q := range []string{`DELETE FROM usage_days WHERE sk = $1`, `DELETE FROM usage_tools WHERE sk = $1`} {
		if _, err := tx.Exec(ctx, q, sk); err != nil {
			return fmt.Errorf("drop usage rollup: %w", err)
		}
	}
	return nil
}

// RebuildUsage implements store.UsageStore: one transaction per session, holding the lock
// every writer of the session takes.
func (s *Store) RebuildUsage(ctx context.Context, progress func(done int)) (int, error) {
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("rebuild usage: %w", err)
	}
	defer s.inflight.Done()
	var sks []int64
	rows, err := s.pool.Query(ctx, `SELECT sk FROM sessions ORDER BY sk`)
	if err != nil {
		return 0, fmt.Errorf("rebuild usage: list sessions: %w", err)
	}
	for rows.Next() {
		var sk int64
		if err := rows.Scan(&sk); err != nil {
			rows.Close()
			return 0, fmt.Errorf("rebuild usage: list sessions: %w", err)
		}
		sks = append(sks, sk)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("rebuild usage: list sessions: %w", err)
	}
	rebuilt := 0
	for i, sk := range sks {
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT FROM sessions WHERE sk = $1 FOR NO KEY UPDATE`, sk); err != nil {
				return fmt.Errorf("lock session: %w", err)
			}
			lc, err := loadLifecycle(ctx, tx, sk)
			if err != nil {
				return fmt.Errorf("read lifecycle: %w", err)
			}
			if lc.CompactedThrough != nil {
				return nil
			}
			erows, err := tx.Query(ctx, `SELECT seq, event_type, run_id, data FROM events WHERE sk = $1 AND event_type IN ('usage', 'status', 'tool') ORDER BY seq`, sk)
			if err != nil {
				return fmt.Errorf("read events: %w", err)
			}
			var r store.UsageRollup
			for erows.Next() {
				var e store.StoredEvent
				if err := erows.Scan(&e.Sequence, &e.EventType, &e.RunID, &e.Data); err != nil {
					erows.Close()
					return fmt.Errorf("read events: %w", err)
				}
				if err := r.Add(&e); err != nil {
					erows.Close()
					return err
				}
			}
			erows.Close()
			if err := erows.Err(); err != nil {
				return fmt.Errorf("read events: %w", err)
			}
			if err := dropUsageRows(ctx, tx, sk); err != nil {
				return err
			}
			b := &pgx.Batch{}
			queueRollup(b, sk, &r)
			if b.Len() > 0 {
				if err := tx.SendBatch(ctx, b).Close(); err != nil {
					return fmt.Errorf("write usage rollup: %w", err)
				}
			}
			rebuilt++
			return nil
		})
		if err != nil {
			return rebuilt, fmt.Errorf("rebuild usage: session %d: %w", sk, err)
		}
		if progress != nil {
			progress(i + 1)
		}
	}
	// The sessions' dimensions, which a trigger keeps, are made again too.
	if err := s.inTx(ctx, func(tx pgx.Tx) error {
		for _, q := range []string{`LOCK TABLE usage_sessions IN EXCLUSIVE MODE`, `DELETE FROM usage_sessions`,
			`INSERT INTO usage_sessions (sk, id, project, agent_id, model) SELECT sk, id, project, agent_id, usage_model(snapshot) FROM sessions`,
			`UPDATE usage_state SET built = true`} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return rebuilt, fmt.Errorf("rebuild usage: the sessions' dimensions: %w", err)
	}
	return rebuilt, nil
}

// buildUsageOnce builds the rollup when the store holds logs from before it existed
// (usage_state.built false: migration 0012 on an existing store). Instances opening at once
// may both build: each session's rebuild replaces its rows under the session's lock.
func (s *Store) buildUsageOnce(ctx context.Context) error {
	var built bool
	if err := s.pool.QueryRow(ctx, `SELECT built FROM usage_state`).Scan(&built); err != nil {
		return fmt.Errorf("usage rollup state: %w", err)
	}
	if built {
		return nil
	}
	_, err := s.RebuildUsage(ctx, nil)
	return err
}

// usageDimCols maps each dimension to its column in the query's rows (usage_sessions as s: a
// session's id, project, agent and model, kept narrow by a trigger, migration 0012); text
// compares in byte order, as on SQLite.
var usageDimCols = map[string]string{
	store.UsageByProject: `s.project COLLATE "C"`,
	store.UsageByAgent:   `s.agent_id COLLATE "C"`,
	store.UsageByModel:   `s.model COLLATE "C"`,
	store.UsageBySession: `s.id`,
	store.UsageByDay:     `u.day`,
}

// usageSQL builds the two statements of a usage query and their arguments, as the SQLite
// driver's usageSQL does: the range's day rows summed per session first, and only those sums
// joined with the sessions when the query groups by a dimension of the session.
func usageSQL(q store.UsageQuery) (days, tools string, args []any) {
	args = []any{q.From, q.To}
	var conds []string
	for _, f := range []struct{ col, v string }{{"project", q.Project}, {"agent_id", q.AgentID}, {"model", q.Model}, {"id", q.SessionID}} {
		if f.v != "" {
			args = append(args, f.v)
			conds = append(conds, fmt.Sprintf("%s = $%d", f.col, len(args)))
		}
	}
	filter := ""
	if len(conds) > 0 {
		filter = " AND sk IN (SELECT sk FROM usage_sessions WHERE " + strings.Join(conds, " AND ") + ")"
	}
	maxCount := int64(math.MaxInt64)
	var dims []string
	session := false
	for _, d := range q.By {
		dims = append(dims, usageDimCols[d])
		session = session || d != store.UsageByDay
	}
	tail := ""
	if len(dims) > 0 {
		tail = " GROUP BY " + strings.Join(dims, ", ")
	}
	tail += " HAVING count(*) > 0" // no group at all when no row matched
	if len(dims) > 0 {
		tail += " ORDER BY " + strings.Join(dims, ", ")
	}
	sel := ""
	if len(dims) > 0 {
		sel = strings.Join(dims, ", ") + ", "
	}
	outer := make([]string, len(usageDayCols))
	if session {
		inner := make([]string, len(usageDayCols))
		for i, c := range usageDayCols {
			inner[i] = fmt.Sprintf("sum(%s) AS c%d", c, i)
			outer[i] = fmt.Sprintf("LEAST(sum(u.c%d), %d)::bigint", i, maxCount)
		}
		dayCol, dayGroup := "", ""
		if q.Has(store.UsageByDay) {
			dayCol, dayGroup = ", day", ", day"
		}
		in := "SELECT sk" + dayCol + ", " + strings.Join(inner, ", ") + " FROM usage_days WHERE day BETWEEN $1 AND $2" + filter + " GROUP BY sk" + dayGroup
		if q.Has(store.UsageBySession) {
			// Each of the inner rows is a group already (a session has one project, agent
			// and model): they are only joined and sorted.
			cols := make([]string, len(usageDayCols))
			for i := range cols {
				cols[i] = fmt.Sprintf("LEAST(u.c%d, %d)::bigint", i, maxCount)
			}
			days = "SELECT " + sel + strings.Join(cols, ", ") + " FROM (" + in + ") AS u JOIN usage_sessions AS s ON s.sk = u.sk ORDER BY " + strings.Join(dims, ", ")
		} else {
			days = "SELECT " + sel + strings.Join(outer, ", ") + " FROM (" + in + ") AS u JOIN usage_sessions AS s ON s.sk = u.sk" + tail
		}
	} else {
		for i, c := range usageDayCols {
			outer[i] = fmt.Sprintf("LEAST(coalesce(sum(u.%s), 0), %d)::bigint", c, maxCount)
		}
		days = "SELECT " + sel + strings.Join(outer, ", ") + " FROM usage_days AS u WHERE day BETWEEN $1 AND $2" + filter + tail
	}
	tools = fmt.Sprintf(`SELECT tool, LEAST(sum(calls), %[1]d)::bigint, LEAST(sum(failures), %[1]d)::bigint, LEAST(sum(denied), %[1]d)::bigint
		FROM usage_tools WHERE day BETWEEN $1 AND $2`, maxCount) + filter + " GROUP BY tool ORDER BY tool"
	return days, tools, args
}

// Usage implements store.UsageStore.
func (s *Store) Usage(ctx context.Context, q store.UsageQuery) (store.UsageReport, error) {
	q, err := store.NormalizeUsageQuery(q)
	if err != nil {
		return store.UsageReport{}, err
	}
	if err := s.enter(); err != nil {
		return store.UsageReport{}, fmt.Errorf("usage: %w", err)
	}
	defer s.inflight.Done()
	daysQ, toolsQ, args := usageSQL(q)
	var rep store.UsageReport
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		rep = store.UsageReport{}
		rows, err := tx.Query(ctx, daysQ, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var g store.UsageGroup
			var day int32
			dest := make([]any, 0, len(q.By)+len(usageDayCols))
			for _, d := range q.By {
				switch d {
				case store.UsageByProject:
					dest = append(dest, &g.Project)
				case store.UsageByAgent:
					dest = append(dest, &g.AgentID)
				case store.UsageByModel:
					dest = append(dest, &g.Model)
				case store.UsageBySession:
					dest = append(dest, &g.SessionID)
				case store.UsageByDay:
					dest = append(dest, &day)
				}
			}
			t := &g.UsageTotals
			dest = append(dest, &t.UsageEvents, &t.InputTokens, &t.OutputTokens, &t.TotalTokens, &t.RunsCompleted, &t.RunsFailed, &t.RunsStopped, &t.RunDurationMs, &t.ToolCalls, &t.ToolFailures, &t.ToolDenied)
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return err
			}
			g.Day = int64(day)
			rep.Total.Add(g.UsageTotals)
			if len(rep.Groups) < q.Limit {
				rep.Groups = append(rep.Groups, g)
			} else {
				rep.Truncated = true
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		trows, err := tx.Query(ctx, toolsQ, args...)
		if err != nil {
			return err
		}
		defer trows.Close()
		for trows.Next() {
			var t store.ToolUsage
			if err := trows.Scan(&t.Tool, &t.Calls, &t.Failures, &t.Denied); err != nil {
				return err
			}
			rep.Tools = append(rep.Tools, t)
		}
		return trows.Err()
	})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return store.UsageReport{}, fmt.Errorf("usage: %w", err)
		}
		return store.UsageReport{}, fmt.Errorf("usage: %w", err)
	}
	return rep, nil
}
