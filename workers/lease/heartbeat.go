package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/notifier"
	"kmirror/internal/startstop"
	"kmirror/repo"
)

// HeartbeatConfig wires a Heartbeat.
type HeartbeatConfig struct {
	Pool       *pgxpool.Pool
	InstanceID string
	Hostname   string
	Version    string
	// Interval between heartbeats; default 5s.
	Interval time.Duration
	Logger   *slog.Logger
	// StopBudget, when set, bounds Stop's last write by the instance's
	// shutdown budget.
	StopBudget *startstop.Budget
}

// Heartbeat registers this instance and keeps its heartbeat fresh, so other
// instances count it when they compute their fair share.
type Heartbeat struct {
	startstop.Base
	cfg HeartbeatConfig
	log *slog.Logger
}

// NewHeartbeat returns a Heartbeat; Start registers the instance.
func NewHeartbeat(cfg HeartbeatConfig) (*Heartbeat, error) {
	if cfg.Pool == nil || cfg.InstanceID == "" {
		return nil, errors.New("heartbeat: Pool and InstanceID are required")
	}
	cfg.Interval = cmp.Or(cfg.Interval, 5*time.Second)
	return &Heartbeat{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default())}, nil
}

// Start registers the instance and begins heartbeating.
func (h *Heartbeat) Start(ctx context.Context) error {
	if _, ok := h.StartInit(ctx); !ok {
		return startstop.ErrStarted
	}
	if err := repo.InstancesRegister(ctx, h.cfg.Pool, h.cfg.InstanceID, h.cfg.Hostname, h.cfg.Version); err != nil {
		h.StopInit()
		return fmt.Errorf("register instance: %w", err)
	}
	h.Go(h.run)
	return nil
}

func (h *Heartbeat) run(ctx context.Context) {
	notifier.Loop(ctx, h.cfg.Interval, nil, h.beat)
}

func (h *Heartbeat) beat(ctx context.Context) {
	beatCtx, cancel := context.WithTimeout(ctx, h.cfg.Interval)
	err := repo.InstancesHeartbeat(beatCtx, h.cfg.Pool, h.cfg.InstanceID)
	if errors.Is(err, repo.ErrNotFound) {
		err = repo.InstancesRegister(beatCtx, h.cfg.Pool, h.cfg.InstanceID, h.cfg.Hostname, h.cfg.Version)
	}
	cancel()
	if err != nil && ctx.Err() == nil {
		h.log.WarnContext(ctx, "instance heartbeat failed", "err", err)
	}
}

// Crash ends heartbeating without marking the instance stopped, as a
// crashed process would. It exists for crash tests.
func (h *Heartbeat) Crash() {
	h.StopAndHalt()
}

// Stop ends heartbeating and marks the instance stopped.
func (h *Heartbeat) Stop() {
	if !h.StopAndHalt() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.StopBudget.Bound(5*time.Second, time.Second))
	defer cancel()
	if err := repo.InstancesStop(ctx, h.cfg.Pool, h.cfg.InstanceID); err != nil {
		h.log.Warn("marking instance stopped failed", "err", err)
	}
}
