package testdb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Stats is a snapshot of one database's activity counters, for benchmarks
// that report what kmirror costs Postgres. Take one before and one after a
// window and call Rates.
//
// The cumulative counters (pg_stat_database, pg_stat_user_tables) are
// flushed by each backend at most once a second and by an idle one within
// about ten seconds, so measure over windows of a minute or more.
// pg_stat_statements counts at once, but needs the module preloaded
// (shared_preload_libraries): a server from internal/devenv/pgserver has it when
// the machine's PostgreSQL ships it; elsewhere Statements is nil.
type Stats struct {
	At        time.Time
	Commits   int64 // xact_commit
	Rollbacks int64
	Deadlocks int64
	// Tables are the rows each table had inserted, updated and deleted.
	Tables map[string]TableWrites
	// Statements, by normalized query text, when pg_stat_statements is
	// loaded; nil otherwise.
	Statements map[string]Statement
}

// TableWrites are one table's row counts (n_tup_ins, n_tup_upd, n_tup_del).
type TableWrites struct{ Inserted, Updated, Deleted int64 }

// Total is the rows written.
func (w TableWrites) Total() int64 { return w.Inserted + w.Updated + w.Deleted }

// Statement is one normalized statement's calls, the rows it returned or
// affected, and its total execution time in the server.
type Statement struct {
	Calls, Rows int64
	ExecMillis  float64
}

// EnableStatements creates the pg_stat_statements extension in the pool's
// database and reports whether its counts can be read (the module must be
// preloaded by the server).
func EnableStatements(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	if _, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "58P01" { // undefined_file: not installed
			return false, nil
		}
		return false, err
	}
	_, err := pool.Exec(ctx, `SELECT 1 FROM pg_stat_statements LIMIT 1`)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55000" { // "must be loaded via shared_preload_libraries"
		return false, nil
	}
	return err == nil, err
}

// ReadStats takes a snapshot of the pool's database. withStatements reads
// pg_stat_statements too (see EnableStatements).
func ReadStats(ctx context.Context, pool *pgxpool.Pool, withStatements bool) (Stats, error) {
	// This connection's own pending counts are flushed first; other
	// backends flush on their own schedule (see Stats).
	if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		return Stats{}, fmt.Errorf("pg_stat_force_next_flush: %w", err)
	}
	s := Stats{At: time.Now(), Tables: map[string]TableWrites{}}
	if err := pool.QueryRow(ctx, `SELECT xact_commit, xact_rollback, deadlocks
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.Commits, &s.Rollbacks, &s.Deadlocks); err != nil {
		return Stats{}, fmt.Errorf("pg_stat_database: %w", err)
	}
	rows, err := pool.Query(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables`)
	if err != nil {
		return Stats{}, fmt.Errorf("pg_stat_user_tables: %w", err)
	}
	for rows.Next() {
		var name string
		var w TableWrites
		if err := rows.Scan(&name, &w.Inserted, &w.Updated, &w.Deleted); err != nil {
			return Stats{}, err
		}
		s.Tables[name] = w
	}
	if err := rows.Err(); err != nil {
		return Stats{}, err
	}
	if !withStatements {
		return s, nil
	}
	s.Statements = map[string]Statement{}
	rows, err = pool.Query(ctx, `SELECT query, calls, rows, total_exec_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if err != nil {
		return Stats{}, fmt.Errorf("pg_stat_statements: %w", err)
	}
	for rows.Next() {
		var q string
		var st Statement
		if err := rows.Scan(&q, &st.Calls, &st.Rows, &st.ExecMillis); err != nil {
			return Stats{}, err
		}
		// One text can appear under several users or query ids.
		q = oneLine(q)
		old := s.Statements[q]
		s.Statements[q] = Statement{Calls: old.Calls + st.Calls, Rows: old.Rows + st.Rows, ExecMillis: old.ExecMillis + st.ExecMillis}
	}
	return s, rows.Err()
}

var spaces = regexp.MustCompile(`\s+`)

func oneLine(q string) string { return strings.TrimSpace(spaces.ReplaceAllString(q, " ")) }

// StatsRates are per-second rates between two snapshots.
type StatsRates struct {
	Seconds   float64
	Commits   float64
	Rollbacks float64
	Deadlocks int64 // a count, not a rate
	// Tables are rows written per second, by table; tables with none are
	// left out.
	Tables map[string]float64
	// Statements are calls and rows per second by query (nil without
	// pg_stat_statements); ones not called are left out, and so are the
	// snapshots' own reads.
	Statements map[string]StatementRate
}

// StatementRate is one statement's calls and rows per second, and the
// mean time one call took to execute in the server (lock waits included).
type StatementRate struct{ Calls, Rows, MeanMillis float64 }

// Rates returns the rates from before to s.
func (s Stats) Rates(before Stats) StatsRates {
	secs := s.At.Sub(before.At).Seconds()
	r := StatsRates{Seconds: secs, Commits: float64(s.Commits-before.Commits) / secs,
		Rollbacks: float64(s.Rollbacks-before.Rollbacks) / secs, Deadlocks: s.Deadlocks - before.Deadlocks,
		Tables: map[string]float64{}}
	for name, w := range s.Tables {
		if n := w.Total() - before.Tables[name].Total(); n > 0 {
			r.Tables[name] = float64(n) / secs
		}
	}
	if s.Statements == nil || before.Statements == nil {
		return r
	}
	r.Statements = map[string]StatementRate{}
	for q, st := range s.Statements {
		if isStatsQuery(q) {
			continue
		}
		b := before.Statements[q]
		if n := st.Calls - b.Calls; n > 0 {
			r.Statements[q] = StatementRate{Calls: float64(n) / secs, Rows: float64(st.Rows-b.Rows) / secs,
				MeanMillis: (st.ExecMillis - b.ExecMillis) / float64(n)}
		}
	}
	return r
}

// isStatsQuery recognizes ReadStats's own statements.
func isStatsQuery(q string) bool {
	for _, s := range []string{"pg_stat_force_next_flush", "FROM pg_stat_database", "FROM pg_stat_user_tables", "FROM pg_stat_statements"} {
		if strings.Contains(q, s) {
			return true
		}
	}
	return false
}

// TotalStatements is the statements per second (nil Statements: 0).
func (r StatsRates) TotalStatements() float64 {
	var n float64
	for _, st := range r.Statements {
		n += st.Calls
	}
	return n
}

// TotalRows is the rows written per second over all tables.
func (r StatsRates) TotalRows() float64 {
	var n float64
	for _, v := range r.Tables {
		n += v
	}
	return n
}

// TableSummary lists the tables written, busiest first: "mirror_partitions
// 10.2, instances 0.2" (rows per second).
func (r StatsRates) TableSummary() string {
	names := slices.SortedFunc(maps.Keys(r.Tables), func(a, b string) int {
		return cmp.Or(cmp.Compare(r.Tables[b], r.Tables[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.1f", n, r.Tables[n])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// TopStatements lists the n most frequent statements, one a line:
// calls/s, rows/s, mean execution time and the start of the query text.
func (r StatsRates) TopStatements(n int) string {
	qs := slices.SortedFunc(maps.Keys(r.Statements), func(a, b string) int {
		return cmp.Or(cmp.Compare(r.Statements[b].Calls, r.Statements[a].Calls), cmp.Compare(a, b))
	})
	var b strings.Builder
	for i, q := range qs {
		if i == n {
			break
		}
		st := r.Statements[q]
		if len(q) > 110 {
			q = q[:110] + "…"
		}
		fmt.Fprintf(&b, "  %8.2f calls/s %9.1f rows/s %8.2f ms  %s\n", st.Calls, st.Rows, st.MeanMillis, q)
	}
	return b.String()
}
