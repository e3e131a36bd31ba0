package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/runtime/startstop"
	"kmirror/repo"
)

// Defaults of HistoryConfig.
const (
	DefaultHistoryInterval = 5 * time.Second
	DefaultHistoryWindow   = 10 * time.Minute
)

// historySampleTimeout bounds one sample's query.
const historySampleTimeout = 5 * time.Second

// HistoryConfig wires a History.
type HistoryConfig struct {
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Interval between samples; default 5s.
	Interval time.Duration
	// Window is how far back samples are kept; default 10m.
	Window time.Duration
}

func (c *HistoryConfig) validate() error {
	if c.Pool == nil {
		return errors.New("history: Pool is required")
	}
	if c.Interval <= 0 || c.Window < c.Interval {
		return fmt.Errorf("history: interval %s must be positive and no longer than the window %s", c.Interval, c.Window)
	}
	return nil
}

// History samples the progress of every mirror topic, one grouped query per
// interval, and keeps the last window of samples in memory: the lag, and
// the records mirrored per second, derived from how far the checkpoints
// moved between two samples.
//
// Its state belongs to this process: it starts empty when the instance
// starts, and each instance keeps its own. A sample that fails (the
// database away) is skipped, so the last known data keeps being served.
// A nil *History has no samples.
type History struct {
	startstop.Base
	cfg HistoryConfig
	log *slog.Logger

	mu     sync.RWMutex
	series map[seriesKey]*progressSeries
	// lastAt is when the last good sample was taken, with its monotonic
	// reading: rates divide by the time between samples, not by Interval.
	lastAt time.Time
}

// seriesKey names a mirror topic, or with topic "" the mirror's total.
type seriesKey struct{ mirror, topic string }

type progressSeries struct {
	points []ProgressPoint // oldest first
	// srcNext is the topic's sum of src_next at the last point.
	srcNext int64
}

// ProgressPoint is one sample of a series.
type ProgressPoint struct {
	At            time.Time
	Lag           int64
	RecordsPerSec float64
	// LagMs is the largest known lag in time of the series' partitions (a
	// mirror's total: of its topics); nil when none is known.
	LagMs *int64
}

// maxLagMs is the larger of two known lags in time; nil when neither is.
func maxLagMs(a, b *int64) *int64 {
	if a == nil || (b != nil && *b > *a) {
		return b
	}
	return a
}

// ProgressSeries is the history of one mirror topic, or of a mirror's total
// when Topic is "", oldest point first.
type ProgressSeries struct {
	Mirror string
	Topic  string
	Points []ProgressPoint
}

// ProgressHistory is what GET /v1/history serves.
type ProgressHistory struct {
	Interval time.Duration
	Window   time.Duration
	Series   []ProgressSeries
}

// NewHistory returns a History; Start begins sampling.
func NewHistory(cfg HistoryConfig) (*History, error) {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultHistoryInterval)
	cfg.Window = cmp.Or(cfg.Window, DefaultHistoryWindow)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &History{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), series: map[seriesKey]*progressSeries{}}, nil
}

// Start takes the first sample at once, then one every interval.
func (h *History) Start(ctx context.Context) error {
	if _, ok := h.StartInit(ctx); !ok {
		return startstop.ErrStarted
	}
	h.Go(h.run)
	return nil
}

// Stop ends sampling; what was sampled is still served.
func (h *History) Stop() {
	h.StopAndHalt()
}

func (h *History) run(ctx context.Context) {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		if err := h.sample(ctx); err != nil && ctx.Err() == nil {
			h.log.WarnContext(ctx, "progress sample failed; skipped", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *History) sample(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, historySampleTimeout)
	defer cancel()
	// The sample is dated when its statement starts, which is when its
	// snapshot is: dated when it returns, a slow statement followed by a
	// quick one would make two samples 4 ms apart, and 300 records between
	// them would read as 70,000 a second.
	at := time.Now()
	rows, err := repo.PartitionsProgress(ctx, h.cfg.Pool)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("progress sample timed out after %s: %w", historySampleTimeout, err)
	}
	if err != nil {
		return err
	}
	h.record(at, rows)
	return nil
}

// record adds a sample taken at at. A topic's rate is how far its src_next
// sum moved since the previous sample, floored at 0 (recreating a topic
// moves it back), and 0 on its first sample; a mirror's total sums its
// topics. Series missing from the sample are dropped.
func (h *History) record(at time.Time, rows []repo.TopicProgress) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var elapsed float64
	if !h.lastAt.IsZero() {
		elapsed = at.Sub(h.lastAt).Seconds()
	}
	h.lastAt = at
	stamp := at.UTC().Truncate(time.Millisecond)
	seen := map[seriesKey]bool{}
	totals := map[string]*ProgressPoint{}
	for _, r := range rows {
		total := totals[r.Mirror]
		if total == nil {
			total = &ProgressPoint{At: stamp}
			totals[r.Mirror] = total
		}
		if r.Topic == "" {
			continue // a mirror with no partitions: its total only
		}
		k := seriesKey{r.Mirror, r.Topic}
		p := ProgressPoint{At: stamp, Lag: r.Lag, LagMs: r.MaxLagMs}
		s := h.series[k]
		if s == nil {
			s = &progressSeries{}
			h.series[k] = s
		} else if elapsed > 0 {
			p.RecordsPerSec = max(float64(r.SrcNext-s.srcNext)/elapsed, 0)
		}
		s.srcNext = r.SrcNext
		h.add(s, p)
		seen[k] = true
		total.Lag += p.Lag
		total.RecordsPerSec += p.RecordsPerSec
		total.LagMs = maxLagMs(total.LagMs, p.LagMs)
	}
	for mirror, p := range totals {
		k := seriesKey{mirror, ""}
		s := h.series[k]
		if s == nil {
			s = &progressSeries{}
			h.series[k] = s
		}
		h.add(s, *p)
		seen[k] = true
	}
	for k := range h.series {
		if !seen[k] {
			delete(h.series, k)
		}
	}
}

// add appends p to s, keeping at most Window/Interval points and none older
// than Window. Trimming only happens here, so while samples fail the last
// known points stay.
func (h *History) add(s *progressSeries, p ProgressPoint) {
	limit := max(int(h.cfg.Window/h.cfg.Interval), 1)
	drop := max(len(s.points)+1-limit, 0)
	for drop < len(s.points) && p.At.Sub(s.points[drop].At) > h.cfg.Window {
		drop++
	}
	s.points = append(s.points[drop:], p)
}

// Rate is the latest records per second of a mirror topic, or of a
// mirror's total with topic "": 0 until known.
func (h *History) Rate(mirror, topic string) float64 {
	if h == nil {
		return 0
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if s := h.series[seriesKey{mirror, topic}]; s != nil && len(s.points) > 0 {
		return s.points[len(s.points)-1].RecordsPerSec
	}
	return 0
}

// Totals returns every sampled mirror's total series, by mirror name.
func (h *History) Totals() []ProgressSeries {
	out := []ProgressSeries{}
	if h == nil {
		return out
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for k, s := range h.series {
		if k.topic == "" {
			out = append(out, seriesOf(k, s))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Mirror < out[j].Mirror })
	return out
}

// Mirror returns a mirror's total series, then one per topic by name, and
// false when the last sample did not see the mirror.
func (h *History) Mirror(mirror string) ([]ProgressSeries, bool) {
	if h == nil {
		return nil, false
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	total := h.series[seriesKey{mirror, ""}]
	if total == nil {
		return nil, false
	}
	var topics []ProgressSeries
	for k, s := range h.series {
		if k.mirror == mirror && k.topic != "" {
			topics = append(topics, seriesOf(k, s))
		}
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].Topic < topics[j].Topic })
	return append([]ProgressSeries{seriesOf(seriesKey{mirror, ""}, total)}, topics...), true
}

func seriesOf(k seriesKey, s *progressSeries) ProgressSeries {
	return ProgressSeries{Mirror: k.mirror, Topic: k.topic, Points: append([]ProgressPoint{}, s.points...)}
}

// ProgressHistory returns the sampled history: every mirror's total, or
// with mirror set, that mirror's total then one series per topic. A mirror
// the sampler has not seen yet is looked up: unknown is a NotFoundError,
// known gets an empty total.
func (s *Control) ProgressHistory(ctx context.Context, mirror string) (ProgressHistory, error) {
	out := ProgressHistory{Interval: DefaultHistoryInterval, Window: DefaultHistoryWindow}
	if s.history != nil {
		out.Interval, out.Window = s.history.cfg.Interval, s.history.cfg.Window
	}
	if mirror == "" {
		out.Series = s.history.Totals()
		return out, nil
	}
	if series, ok := s.history.Mirror(mirror); ok {
		out.Series = series
		return out, nil
	}
	if _, err := s.mirror(ctx, mirror); err != nil {
		return ProgressHistory{}, err
	}
	out.Series = []ProgressSeries{{Mirror: mirror, Points: []ProgressPoint{}}}
	return out, nil
}
