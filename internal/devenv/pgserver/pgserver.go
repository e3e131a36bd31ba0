// Package pgserver runs a throw-away PostgreSQL server from the machine's own
// binaries, for `kmirror dev` and integration tests. It trades durability for
// speed (fsync off) and trusts every local connection: never use it for data
// you want to keep safe.
package pgserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// pgCtlTimeout bounds pg_ctl start and stop (its -t flag).
	pgCtlTimeout = 60 * time.Second
	// readyTimeout bounds the wait for the first pgx connection after pg_ctl
	// reports the server up.
	readyTimeout = 30 * time.Second
	// portAttempts is how often Start picks a new free port when the one it
	// picked was taken between probing and binding.
	portAttempts = 3
)

// Config configures Start.
type Config struct {
	// Dir is the parent of the data directory. Empty means a fresh temporary
	// directory that Stop removes. A given Dir is kept, and an existing
	// cluster in it is reused, so `kmirror dev` keeps its data across runs.
	Dir string
	// Port is the loopback TCP port; 0 picks a free one.
	Port int
	// Logger receives start/stop events; nil discards them.
	Logger *slog.Logger
	// Settings override the server's settings (postgresql.conf names), for
	// example synchronous_standby_names on a primary whose standby must
	// hold every commit it acknowledges.
	Settings map[string]string
}

// Server is a running PostgreSQL server. Its superuser is "postgres", with
// trust authentication on 127.0.0.1.
type Server struct {
	bins      binaries
	as        runAs
	logger    *slog.Logger
	baseDir   string
	dataDir   string
	logFile   string
	removeDir bool // baseDir is ours to delete
	port      int
	settings  map[string]string
	watchdog  *watchdog

	stopOnce sync.Once
	stopErr  error
}

// Start initialises a cluster (unless Dir already holds one), starts it and
// waits until it accepts connections.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	as, err := currentRunAs()
	if err != nil {
		return nil, err
	}
	s := &Server{
		bins:     bins,
		as:       as,
		logger:   cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		settings: cfg.Settings,
	}
	if err := s.makeDirs(cfg.Dir); err != nil {
		return nil, err
	}
	return s.launch(ctx, cfg.Port, s.initdb)
}

// launch prepares the data directory with prepare, then starts the server
// on port (0: a free one) and waits until it accepts connections. A failure
// undoes what it did.
func (s *Server) launch(ctx context.Context, port int, prepare func(context.Context) error) (*Server, error) {
	started := false
	defer func() {
		if !started {
			s.abort()
		}
	}()
	if err := prepare(ctx); err != nil {
		return nil, err
	}
	var err error
	if s.watchdog, err = startWatchdog(s.as, s.bins.pgCtl, s.dataDir, s.removable()); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		s.port = port
		if s.port == 0 {
			if s.port, err = freePort(); err != nil {
				return nil, err
			}
		}
		err = s.pgCtlStart(ctx)
		if err == nil {
			break
		}
		if port != 0 || attempt == portAttempts || !errors.Is(err, errPortInUse) {
			return nil, err
		}
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	started = true
	s.logger.InfoContext(ctx, "postgres started", "port", s.port, "data_dir", s.dataDir, "log", s.logFile)
	return s, nil
}

// URL returns a connection URL for database as the postgres superuser.
func (s *Server) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, url.PathEscape(database))
}

// Stop shuts the server down (fast mode: sessions are disconnected) and
// removes the directory Start created. Later calls return the first result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.watchdog.disarm()
		out, err := s.pgCtl(context.Background(), "stop", "-D", s.dataDir, "-m", "fast", "-w", "-t", seconds(pgCtlTimeout))
		if err != nil && s.running() {
			s.stopErr = fmt.Errorf("pg_ctl stop: %w: %s", err, out)
			return
		}
		if s.removeDir {
			if err := os.RemoveAll(s.baseDir); err != nil {
				s.stopErr = fmt.Errorf("remove postgres dir: %w", err)
				return
			}
		}
		s.logger.Info("postgres stopped", "port", s.port)
	})
	return s.stopErr
}

// makeDirs creates baseDir and dataDir and hands dataDir to the server user.
func (s *Server) makeDirs(dir string) error {
	s.baseDir = dir
	if dir == "" {
		var err error
		if s.baseDir, err = os.MkdirTemp(os.TempDir(), "kmirror-pg-"); err != nil {
			return fmt.Errorf("create postgres dir: %w", err)
		}
		s.removeDir = true
		// As root the postgres user must traverse it, and the watchdog
		// (running as that user) must be able to delete it.
		if err := s.as.chown(s.baseDir); err != nil {
			os.RemoveAll(s.baseDir)
			return fmt.Errorf("chown postgres dir: %w", err)
		}
	}
	s.dataDir = filepath.Join(s.baseDir, "data")
	s.logFile = filepath.Join(s.dataDir, "postgres.log")
	if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		return fmt.Errorf("create postgres data dir: %w", err)
	}
	return s.as.chown(s.dataDir)
}

func (s *Server) removable() string {
	if s.removeDir {
		return s.baseDir
	}
	return ""
}

// initdb creates the cluster unless dataDir already holds one.
func (s *Server) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(s.dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	cmd := s.as.command(ctx, s.baseDir, s.bins.initdb,
		"-D", s.dataDir, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", s.dataDir, err, out)
	}
	return nil
}

var errPortInUse = errors.New("port in use")

func (s *Server) pgCtlStart(ctx context.Context) error {
	settings := [][2]string{
		{"listen_addresses", "127.0.0.1"},
		{"port", fmt.Sprint(s.port)},
		{"unix_socket_directories", s.dataDir},
		// Durability buys nothing for a throw-away server.
		{"fsync", "off"},
		{"synchronous_commit", "off"},
		{"full_page_writes", "off"},
		// Parallel tests each hold a pool.
		{"max_connections", "300"},
	}
	if s.bins.statStatementsInstalled() {
		// Statement counts for benchmarks (internal/testing/testdb's ReadStats);
		// a database sees them after CREATE EXTENSION pg_stat_statements.
		settings = append(settings, [2]string{"shared_preload_libraries", "pg_stat_statements"})
	}
	var opts []string
	for _, kv := range settings {
		if v, ok := s.settings[kv[0]]; ok {
			kv[1] = v
		}
		opts = append(opts, kv[0]+"="+kv[1])
	}
	for _, k := range slices.Sorted(maps.Keys(s.settings)) {
		if !slices.ContainsFunc(settings, func(kv [2]string) bool { return kv[0] == k }) {
			opts = append(opts, k+"="+s.settings[k])
		}
	}
	var o strings.Builder
	for _, opt := range opts {
		o.WriteString(" -c " + shellQuote(opt)) // pg_ctl hands -o to /bin/sh
	}
	logStart := logSize(s.logFile)
	out, err := s.pgCtl(ctx, "start", "-D", s.dataDir, "-l", s.logFile, "-w", "-t", seconds(pgCtlTimeout), "-o", o.String())
	if err == nil {
		return nil
	}
	log := readLog(s.logFile, logStart)
	err = fmt.Errorf("pg_ctl start on port %d: %w\n%s\nserver log %s:\n%s", s.port, err, out, s.logFile, log)
	if strings.Contains(log, "Address already in use") {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return err
}

func (s *Server) pgCtl(ctx context.Context, args ...string) ([]byte, error) {
	return s.as.command(ctx, s.baseDir, s.bins.pgCtl, args...).CombinedOutput()
}

// waitReady polls until a pgx connection succeeds: pg_ctl -w only pings.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres on port %d not accepting connections after %s: %w\nserver log %s:\n%s",
				s.port, readyTimeout, err, s.logFile, readLog(s.logFile, 0))
		case <-tick.C:
		}
	}
}

// abort undoes a failed Start as far as it got.
func (s *Server) abort() {
	if s.watchdog != nil {
		s.watchdog.disarm()
	}
	if s.port != 0 {
		_, _ = s.pgCtl(context.Background(), "stop", "-D", s.dataDir, "-m", "immediate", "-w")
	}
	if s.removeDir {
		_ = os.RemoveAll(s.baseDir)
	}
}

// freePort asks the kernel for a free loopback port. Another process can take
// it before postgres binds; Start retries when that happens.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readLog returns the log from offset on, at most its last 8 KiB.
func readLog(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	if offset <= int64(len(b)) {
		b = b[offset:]
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func seconds(d time.Duration) string {
	return fmt.Sprint(int(d.Seconds()))
}
