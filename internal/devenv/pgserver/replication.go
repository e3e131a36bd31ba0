package pgserver

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
)

// StartStandby starts a streaming standby of s: a base backup of s's data
// (pg_basebackup -R, which also writes the standby's primary_conninfo),
// started on its own port. cfg.Dir, cfg.Port, cfg.Logger and cfg.Settings
// are the standby's. Promote makes it the primary.
func (s *Server) StartStandby(ctx context.Context, cfg Config) (*Server, error) {
	st := &Server{
		bins:     s.bins,
		as:       s.as,
		logger:   cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		settings: cfg.Settings,
	}
	if err := st.makeDirs(cfg.Dir); err != nil {
		return nil, err
	}
	return st.launch(ctx, cfg.Port, func(ctx context.Context) error {
		backup := filepath.Join(filepath.Dir(s.bins.pgCtl), "pg_basebackup")
		cmd := st.as.command(ctx, st.baseDir, backup, "-D", st.dataDir, "-R", "-X", "stream",
			"-h", "127.0.0.1", "-p", fmt.Sprint(s.port), "-U", "postgres", "--no-sync", "--checkpoint=fast")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("pg_basebackup from port %d: %w\n%s", s.port, err, out)
		}
		return nil
	})
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Crash stops the server as a power cut would (pg_ctl stop -m immediate):
// no checkpoint, every session cut. Stop still removes its directory.
func (s *Server) Crash(ctx context.Context) error {
	if out, err := s.pgCtl(ctx, "stop", "-D", s.dataDir, "-m", "immediate", "-w", "-t", seconds(pgCtlTimeout)); err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %w: %s", err, out)
	}
	s.logger.Info("postgres crashed on purpose", "port", s.port)
	return nil
}

// Promote ends a standby's recovery: it becomes a primary that takes
// writes.
func (s *Server) Promote(ctx context.Context) error {
	if out, err := s.pgCtl(ctx, "promote", "-D", s.dataDir, "-w", "-t", seconds(pgCtlTimeout)); err != nil {
		return fmt.Errorf("pg_ctl promote: %w: %s", err, out)
	}
	s.logger.Info("postgres standby promoted", "port", s.port)
	return nil
}

// running says whether pg_ctl finds the server running (status exits 3
// when it does not).
func (s *Server) running() bool {
	_, err := s.pgCtl(context.Background(), "status", "-D", s.dataDir)
	return err == nil
}
