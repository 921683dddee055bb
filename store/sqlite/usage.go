package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"

	"github.com/sessiond/sessiond/store"
)

// The usage rollup (store/usage.go, migration 0015): the writer adds each append's counts to
// usage_days and usage_tools in the append's own transaction (writeUsage, called by
// insertEvents, so that an import counts its log too); Usage sums the rows of the days asked.

// usageDayCols are usage_days' count columns, in store.UsageTotals' order.
var usageDayCols = []string{"usage_events", "input_tokens", "output_tokens", "total_tokens", "runs_completed", "runs_failed", "runs_stopped", "run_ms", "tool_calls", "tool_failures", "tool_denied"}

// usageToolCols are usage_tools' count columns, in store.ToolTotals' order.
var usageToolCols = []string{"calls", "failures", "denied"}

// satSet is the SET list of an upsert adding excluded's counts to the row's, saturating at
// 2^63-1 (store.SatAdd) without ever computing an overflowing sum.
func satSet(cols []string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprintf("%[1]s = CASE WHEN %[1]s > %[2]d - excluded.%[1]s THEN %[2]d ELSE %[1]s + excluded.%[1]s END", c, int64(math.MaxInt64))
	}
	return strings.Join(parts, ", ")
}

var (
	qUsageDay = `INSERT INTO usage_days (day, sk, ` + strings.Join(usageDayCols, ", ") + `) VALUES (?, ?` + strings.Repeat(", ?", len(usageDayCols)) + `)
		ON CONFLICT (day, sk) DO UPDATE SET ` + satSet(usageDayCols)
	qUsageTool = `INSERT INTO usage_tools (day, sk, tool, ` + strings.Join(usageToolCols, ", ") + `) VALUES (?, ?, ?` + strings.Repeat(", ?", len(usageToolCols)) + `)
		ON CONFLICT (day, sk, tool) DO UPDATE SET ` + satSet(usageToolCols)
)

func dayArgs(sk int64, d store.UsageDay) []any {
	t := d.UsageTotals
	return []any{d.Day, sk, t.UsageEvents, t.InputTokens, t.OutputTokens, t.TotalTokens, t.RunsCompleted, t.RunsFailed, t.RunsStopped, t.RunDurationMs, t.ToolCalls, t.ToolFailures, t.ToolDenied}
}

// writeUsage adds the counts of events (just inserted into session sk's log) to the rollup.
// Most appends hold no event that counts (store.UsageCounts): they cost a look at each event's
// type and nothing else.
func (w *writer) writeUsage(sk int64, evs []store.StoredEvent) error {
	if w.s.noUsage {
		return nil
	}
	counts := false
	for i := range evs {
		if store.UsageCounts(evs[i].EventType) {
			counts = true
			break
		}
	}
	if !counts {
		return nil
	}
	w.usage.Reset()
	for i := range evs {
		if err := w.usage.Add(&evs[i]); err != nil {
			return fatal("usage rollup", err)
		}
	}
	if w.usage.Empty() {
		return nil
	}
	return w.putUsage(sk, &w.usage)
}

// putUsage adds a rollup's rows to session sk's.
func (w *writer) putUsage(sk int64, r *store.UsageRollup) error {
	day, err := w.st.prepareOnce(w.ctx, w.conn, &w.st.usageDay, "the usage rollup", func() string { return qUsageDay })
	if err != nil {
		return fatal("usage rollup", err)
	}
	for _, d := range r.Days() {
		if _, err := day.ExecContext(w.ctx, dayArgs(sk, d)...); err != nil {
			return fatal("usage rollup", err)
		}
	}
	tools := r.Tools()
	if len(tools) == 0 {
		return nil
	}
	tool, err := w.st.prepareOnce(w.ctx, w.conn, &w.st.usageTool, "the usage rollup of tools", func() string { return qUsageTool })
	if err != nil {
		return fatal("usage rollup", err)
	}
	for _, t := range tools {
		if _, err := tool.ExecContext(w.ctx, t.Day, sk, t.Tool, t.Calls, t.Failures, t.Denied); err != nil {
			return fatal("usage rollup", err)
		}
	}
	return nil
}

// dropUsage deletes session sk's rollup rows.
func (w *writer) dropUsage(sk int64) error {
	for _, q := range []string{`DELETE FROM usage_days WHERE sk = ?`, `DELETE FROM usage_tools WHERE sk = ?`} {
		if _, err := w.conn.ExecContext(w.ctx, q, sk); err != nil {
			return fatal("drop usage rollup", err)
		}
	}
	return nil
}

// qUsageEvents reads the events of a session that count in the rollup.
var qUsageEvents = inBothTables(`SELECT seq, event_type, run_id, data FROM %[1]s WHERE rid >= (?1 << 32) AND rid < ((?1 + 1) << 32) AND event_type IN ('usage', 'status', 'tool')`) + ` ORDER BY 1`

// rebuildSessionUsage replaces session sk's rollup with one computed from its log, unless part
// of its log was compacted away. It reports whether it rebuilt.
func (w *writer) rebuildSessionUsage(sk int64) (bool, error) {
	lc, err := loadLifecycle(w.ctx, w.conn, sk)
	if err != nil {
		return false, fatal("load lifecycle", err)
	}
	if lc.CompactedThrough != nil {
		return false, nil
	}
	rows, err := w.conn.QueryContext(w.ctx, qUsageEvents, sk)
	if err != nil {
		return false, fatal("read events for the usage rollup", err)
	}
	var r store.UsageRollup
	for rows.Next() {
		var e store.StoredEvent
		if err := rows.Scan(&e.Sequence, &e.EventType, &e.RunID, &e.Data); err != nil {
			rows.Close()
			return false, fatal("read events for the usage rollup", err)
		}
		if err := r.Add(&e); err != nil {
			rows.Close()
			return false, fatal("usage rollup", err)
		}
	}
	if err := rows.Close(); err != nil {
		return false, fatal("read events for the usage rollup", err)
	}
	if err := rows.Err(); err != nil {
		return false, fatal("read events for the usage rollup", err)
	}
	if err := w.dropUsage(sk); err != nil {
		return false, err
	}
	return true, w.putUsage(sk, &r)
}

// RebuildUsage implements store.UsageStore: one writer request per session (each sees its log
// as the appends before it left it), then usage_state.built is set.
func (s *Store) RebuildUsage(ctx context.Context, progress func(done int)) (int, error) {
	var sks []int64
	rows, err := s.rdb.QueryContext(ctx, `SELECT sk FROM sessions ORDER BY sk`)
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
		var did bool
		r := &request{ctx: ctx, op: func(w *writer) error {
			var err error
			did, err = w.rebuildSessionUsage(sk)
			return err
		}}
		if err := s.submit(ctx, r); err != nil {
			return rebuilt, fmt.Errorf("rebuild usage: %w", err)
		}
		if r.err != nil {
			return rebuilt, fmt.Errorf("rebuild usage: %w", r.err)
		}
		if did {
			rebuilt++
		}
		if progress != nil {
			progress(i + 1)
		}
	}
	r := &request{ctx: ctx, op: func(w *writer) error {
		// The sessions' dimensions, which triggers keep, are made again too.
		for _, q := range []string{`DELETE FROM usage_sessions`,
			`INSERT INTO usage_sessions (sk, id, project, agent_id, model) SELECT sk, id, project, agent_id, coalesce(json_extract(snapshot, '$.modelId'), '') FROM sessions`,
			`UPDATE usage_state SET built = 1`} {
			if _, err := w.conn.ExecContext(w.ctx, q); err != nil {
				return fatal("finish the usage rollup", err)
			}
		}
		return nil
	}}
	if err := s.submit(ctx, r); err != nil {
		return rebuilt, fmt.Errorf("rebuild usage: %w", err)
	}
	if r.err != nil {
		return rebuilt, fmt.Errorf("rebuild usage: %w", r.err)
	}
	return rebuilt, nil
}

// buildUsageOnce builds the rollup when the store holds logs from before it existed
// (usage_state.built = 0: migration 0015 on an existing store).
func (s *Store) buildUsageOnce(ctx context.Context) error {
	var built int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT built FROM usage_state`).Scan(&built); err != nil {
		return fmt.Errorf("open store: usage rollup state: %w", err)
	}
	if built == 1 {
		return nil
	}
	if _, err := s.RebuildUsage(ctx, nil); err != nil {
		return fmt.Errorf("open store: build the usage rollup: %w", err)
	}
	return nil
}

// usageDimCols maps each dimension to its column in the query's rows (usage_sessions as s:
// a session's id, project, agent and model, kept narrow by triggers, migration 0015).
var usageDimCols = map[string]string{
	store.UsageByProject: "s.project",
	store.UsageByAgent:   "s.agent_id",
	store.UsageByModel:   "s.model",
	store.UsageBySession: "s.id",
	store.UsageByDay:     "u.day",
}

// usageSQL builds the two statements of a usage query and their arguments. The days' rows of
// the range (usage_days' primary key starts with day) are summed per session first, and only
// those sums meet the sessions table (by its primary key) when the query groups by a
// dimension of the session, read from usage_sessions (narrow rows). The filters on the
// session's fields select the sessions first and keep their rows only.
func usageSQL(q store.UsageQuery) (days, tools string, args []any) {
	args = []any{q.From, q.To}
	var conds []string
	for _, f := range []struct{ col, v string }{{"project", q.Project}, {"agent_id", q.AgentID}, {"model", q.Model}, {"id", q.SessionID}} {
		if f.v != "" {
			conds = append(conds, f.col+" = ?")
			args = append(args, f.v)
		}
	}
	filter := ""
	if len(conds) > 0 {
		filter = " AND sk IN (SELECT sk FROM usage_sessions WHERE " + strings.Join(conds, " AND ") + ")"
	}
	sums := func(prefix string, named bool) string {
		parts := make([]string, len(usageDayCols))
		for i, c := range usageDayCols {
			if named {
				parts[i] = fmt.Sprintf("total(%s) AS c%d", c, i)
			} else {
				parts[i] = fmt.Sprintf("total(%sc%d)", prefix, i)
			}
		}
		return strings.Join(parts, ", ")
	}
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
	if session {
		dayCol, dayGroup := "", ""
		if q.Has(store.UsageByDay) {
			dayCol, dayGroup = ", day", ", day"
		}
		inner := "SELECT sk" + dayCol + ", " + sums("", true) + " FROM usage_days WHERE day BETWEEN ? AND ?" + filter + " GROUP BY sk" + dayGroup
		if q.Has(store.UsageBySession) {
			// Each of the inner rows is a group already (a session has one project, agent
			// and model): they are only joined and sorted.
			cols := make([]string, len(usageDayCols))
			for i := range cols {
				cols[i] = fmt.Sprintf("u.c%d", i)
			}
			days = "SELECT " + sel + strings.Join(cols, ", ") + " FROM (" + inner + ") AS u JOIN usage_sessions AS s ON s.sk = u.sk ORDER BY " + strings.Join(dims, ", ")
		} else {
			days = "SELECT " + sel + sums("u.", false) + " FROM (" + inner + ") AS u JOIN usage_sessions AS s ON s.sk = u.sk" + tail
		}
	} else {
		parts := make([]string, len(usageDayCols))
		for i, c := range usageDayCols {
			parts[i] = "total(u." + c + ")"
		}
		days = "SELECT " + sel + strings.Join(parts, ", ") + " FROM usage_days AS u WHERE day BETWEEN ? AND ?" + filter + tail
	}
	tools = "SELECT tool, total(calls), total(failures), total(denied) FROM usage_tools WHERE day BETWEEN ? AND ?" + filter + " GROUP BY tool ORDER BY tool"
	return days, tools, args
}

// Usage implements store.UsageStore.
func (s *Store) Usage(ctx context.Context, q store.UsageQuery) (store.UsageReport, error) {
	q, err := store.NormalizeUsageQuery(q)
	if err != nil {
		return store.UsageReport{}, err
	}
	daysQ, toolsQ, args := usageSQL(q)
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.UsageReport{}, fmt.Errorf("usage: %w", err)
	}
	defer tx.Rollback()
	var rep store.UsageReport
	rows, err := tx.QueryContext(ctx, daysQ, args...)
	if err != nil {
		return rep, fmt.Errorf("usage: %w", err)
	}
	for rows.Next() {
		var g store.UsageGroup
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
				dest = append(dest, &g.Day)
			}
		}
		var f [11]float64
		for i := range f {
			dest = append(dest, &f[i])
		}
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return rep, fmt.Errorf("usage: %w", err)
		}
		g.UsageTotals = totalsOf(f)
		rep.Total.Add(g.UsageTotals)
		if len(rep.Groups) < q.Limit {
			rep.Groups = append(rep.Groups, g)
		} else {
			rep.Truncated = true
		}
	}
	if err := rows.Close(); err != nil {
		return rep, fmt.Errorf("usage: %w", err)
	}
	if err := rows.Err(); err != nil {
		return rep, fmt.Errorf("usage: %w", err)
	}
	trows, err := tx.QueryContext(ctx, toolsQ, args...)
	if err != nil {
		return rep, fmt.Errorf("usage of tools: %w", err)
	}
	defer trows.Close()
	for trows.Next() {
		var t store.ToolUsage
		var c, f, d float64
		if err := trows.Scan(&t.Tool, &c, &f, &d); err != nil {
			return rep, fmt.Errorf("usage of tools: %w", err)
		}
		t.Calls, t.Failures, t.Denied = clampCount(c), clampCount(f), clampCount(d)
		rep.Tools = append(rep.Tools, t)
	}
	if err := trows.Err(); err != nil {
		return rep, fmt.Errorf("usage of tools: %w", err)
	}
	return rep, nil
}

// totalsOf reads the sums of usageSums.
func totalsOf(f [11]float64) store.UsageTotals {
	return store.UsageTotals{
		UsageEvents: clampCount(f[0]), InputTokens: clampCount(f[1]), OutputTokens: clampCount(f[2]), TotalTokens: clampCount(f[3]),
		RunsCompleted: clampCount(f[4]), RunsFailed: clampCount(f[5]), RunsStopped: clampCount(f[6]), RunDurationMs: clampCount(f[7]),
		ToolCalls: clampCount(f[8]), ToolFailures: clampCount(f[9]), ToolDenied: clampCount(f[10]),
	}
}

// clampCount turns a sum into a count, saturating at math.MaxInt64.
func clampCount(f float64) int64 {
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(f)
}
