package heartbeat

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/runtime/kafkaconn"
	"kmirror/internal/runtime/startstop"
	"kmirror/repo"
)

// Topic holds the heartbeats on the destination cluster.
const Topic = "__mirror_heartbeats"

// Config wires a Heartbeats.
type Config struct {
	Destination kafkaconn.Config
	// DeploymentID (repo.DeploymentID) and InstanceID make the key of this
	// instance's heartbeats; only the same deployment's are read.
	DeploymentID, InstanceID string
	// ReplicationFactor of the topic when kmirror creates it; -1 is the
	// cluster's default.
	ReplicationFactor int16
	// ReadInterval is how often the reader checks that it has read every
	// heartbeat up to the topic's end; default 250ms.
	ReadInterval time.Duration
	Logger       *slog.Logger
	// Now is the clock, for tests; default time.Now.
	Now func() time.Time
}

// Heartbeats writes this instance's heartbeats and reads everyone's.
type Heartbeats struct {
	startstop.Base
	cfg    Config
	log    *slog.Logger
	prefix string // the deployment's keys start with it

	producer *kgo.Client
	admin    *kadm.Client
	created  bool // the topic is known to exist; the writer's only

	mu sync.Mutex
	// seen is, per instance of this deployment, the newest session seen
	// and when this instance first read a heartbeat of it.
	seen map[string]sighting
	// caughtUp is when the reader last listed the topic's end and had read
	// every heartbeat before it; zero until then.
	caughtUp time.Time
}

type sighting struct {
	session int64
	at      time.Time
}

// heartbeat is a record's value.
type heartbeat struct {
	Session int64 `json:"session"`
}

// New returns Heartbeats; Start begins reading.
func New(cfg Config) (*Heartbeats, error) {
	if cfg.DeploymentID == "" || cfg.InstanceID == "" {
		return nil, errors.New("heartbeat: DeploymentID and InstanceID are required")
	}
	cfg.ReadInterval = cmp.Or(cfg.ReadInterval, 250*time.Millisecond)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	producer, err := cfg.Destination.NewClient(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(Topic))
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	return &Heartbeats{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), prefix: cfg.DeploymentID + "/",
		producer: producer, admin: kadm.NewClient(producer), seen: map[string]sighting{}}, nil
}

// Start begins reading everyone's heartbeats. The destination need not be
// reachable yet.
func (h *Heartbeats) Start(ctx context.Context) error {
	if _, ok := h.StartInit(ctx); !ok {
		return startstop.ErrStarted
	}
	h.Go(h.read)
	return nil
}

// Stop stops reading and closes the clients.
func (h *Heartbeats) Stop() {
	if h.StopAndHalt() {
		h.producer.Close()
	}
}

// Beat writes a heartbeat of session and returns once the destination has
// acknowledged it.
func (h *Heartbeats) Beat(ctx context.Context, session int64) error {
	if !h.created {
		if err := h.createTopic(ctx); err != nil {
			return err
		}
		h.created = true
	}
	v, _ := json.Marshal(heartbeat{Session: session})
	r := &kgo.Record{Key: []byte(h.prefix + h.cfg.InstanceID), Value: v, Partition: 0}
	return h.producer.ProduceSync(ctx, r).FirstErr()
}

// createTopic makes the heartbeat topic, compacted, with one partition.
func (h *Heartbeats) createTopic(ctx context.Context) error {
	compact := "compact"
	resp, err := h.admin.CreateTopic(ctx, 1, h.cfg.ReplicationFactor, map[string]*string{"cleanup.policy": &compact}, Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create %s: %w", Topic, err)
	}
	return nil
}

// Spared says, at this moment, which expired sessions' leases must not be
// taken yet (repo.Spared): those whose heartbeats this instance saw less
// than ttl ago, or every one when it has not read the heartbeats to their
// end within margin (it cannot tell who is alive). Ends is when the first
// of them stops being spared.
func (h *Heartbeats) Spared(grace, ttl, margin time.Duration) repo.Spared {
	now := h.cfg.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := repo.Spared{Grace: grace}
	if h.caughtUp.IsZero() || now.Sub(h.caughtUp) > margin {
		s.All = true
		return s
	}
	for id, seen := range h.seen {
		if now.Sub(seen.at) < ttl {
			s.Owners = append(s.Owners, id)
			s.Sessions = append(s.Sessions, seen.session)
			if ends := seen.at.Add(ttl); s.Ends.IsZero() || ends.Before(s.Ends) {
				s.Ends = ends
			}
		}
	}
	return s
}

// read follows the topic from its start: every heartbeat it reads is
// recorded as seen now; every ReadInterval it lists the topic's end, and
// once it has read up to it, it is caught up as of the listing.
func (h *Heartbeats) read(ctx context.Context) {
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	next := int64(0) // the next offset to read
	for ctx.Err() == nil {
		if cl == nil {
			var err error
			cl, err = h.cfg.Destination.NewClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
				Topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxWait(h.cfg.ReadInterval))
			if err != nil {
				h.log.Warn("heartbeats: cannot read", "err", err)
				h.wait(ctx)
				continue
			}
		}
		listed := h.cfg.Now()
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ends, err := h.admin.ListEndOffsets(lctx, Topic)
		cancel()
		end := int64(-1)
		if err == nil {
			if o, ok := ends.Lookup(Topic, 0); ok && o.Err == nil {
				end = o.Offset
			}
		}
		for end >= 0 && next < end && ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*h.cfg.ReadInterval)
			fs := cl.PollFetches(pctx)
			cancel()
			got := false
			fs.EachRecord(func(r *kgo.Record) {
				got = true
				next = r.Offset + 1
				h.record(r)
			})
			if !got {
				break // not caught up this round
			}
		}
		if end >= 0 && next >= end {
			h.mu.Lock()
			h.caughtUp = listed
			h.mu.Unlock()
		}
		h.wait(ctx)
	}
}

func (h *Heartbeats) wait(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(h.cfg.ReadInterval):
	}
}

// record notes a heartbeat of this deployment as seen now.
func (h *Heartbeats) record(r *kgo.Record) {
	id, ok := strings.CutPrefix(string(r.Key), h.prefix)
	if !ok {
		return // another deployment's
	}
	var hb heartbeat
	if json.Unmarshal(r.Value, &hb) != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, ok := h.seen[id]; !ok || hb.Session >= cur.session {
		h.seen[id] = sighting{session: hb.Session, at: h.cfg.Now()}
	}
}
