package heartbeat

import (
	"cmp"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
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
	// Keys reads the deployment's heartbeat keys (repo.HeartbeatKeysList);
	// required. Heartbeats are signed with the newest key that signs, and a
	// heartbeat no key read verifies is ignored and counted.
	Keys func(context.Context) ([]repo.HeartbeatKeyRow, error)
	// KeysReload is how often the keys are read again; default 5s.
	KeysReload time.Duration
	// ReplicationFactor of the topic when kmirror creates it; -1 is the
	// cluster's default.
	ReplicationFactor int16
	// ReadInterval is how often the reader checks that it has read every
	// heartbeat up to the topic's end; default 250ms.
	ReadInterval time.Duration
	Logger       *slog.Logger
	Registerer   prometheus.Registerer
	// Now is the clock, for tests; default time.Now.
	Now func() time.Time
}

// Heartbeats writes this instance's heartbeats and reads everyone's.
type Heartbeats struct {
	startstop.Base
	cfg     Config
	log     *slog.Logger
	prefix  string // the deployment's keys start with it
	metrics *metrics

	admin    *kadm.Client
	producer *kgo.Client
	created  bool  // the topic is known to exist; the writer's only
	beat     int64 // the last beat written; the writer's only

	mu   sync.Mutex
	keys keyring
	// seen is, per instance of this deployment and session, the newest
	// beat verified and when this instance first read it. A session is
	// kept an hour after its last beat, so that no replayed beat is new.
	seen map[string]map[int64]sighting
	// unknown holds, per record key, the newest heartbeat signed by a key
	// this instance has not read, until the keys are read again.
	unknown map[string]*kgo.Record
	// caughtUp is when the reader last listed the topic's end and had read
	// every heartbeat before it; zero until then.
	caughtUp time.Time
}

type sighting struct {
	beat int64
	at   time.Time
}

// forget is how long a session's newest beat is remembered after it was
// seen: far longer than any grace a taker spares a session for.
const forget = time.Hour

// heartbeat is a record's value: the session, a beat number that only
// grows (a replayed record is no news), the key that signed it, and the
// MAC of the record's key, session and beat.
type heartbeat struct {
	Session int64  `json:"session"`
	Beat    int64  `json:"beat"`
	Key     int64  `json:"key"`
	MAC     []byte `json:"mac"`
}

// New returns Heartbeats; Start begins reading.
func New(cfg Config) (*Heartbeats, error) {
	if cfg.DeploymentID == "" || cfg.InstanceID == "" || cfg.Keys == nil {
		return nil, errors.New("heartbeat: DeploymentID, InstanceID and Keys are required")
	}
	cfg.ReadInterval = cmp.Or(cfg.ReadInterval, 250*time.Millisecond)
	cfg.KeysReload = cmp.Or(cfg.KeysReload, keysReload)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	adminClient, err := cfg.Destination.NewClient()
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	producer, err := newProducer(cfg)
	if err != nil {
		adminClient.Close()
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	// Beats start at the wall clock's nanoseconds, so that they grow across
	// restarts of an instance too.
	return &Heartbeats{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), prefix: cfg.DeploymentID + "/",
		metrics: m, producer: producer, admin: kadm.NewClient(adminClient), beat: time.Now().UnixNano(),
		seen: map[string]map[int64]sighting{}, unknown: map[string]*kgo.Record{}}, nil
}

// Start reads the heartbeat keys, then begins reading everyone's
// heartbeats. The destination need not be reachable yet.
func (h *Heartbeats) Start(ctx context.Context) error {
	if _, ok := h.StartInit(ctx); !ok {
		return startstop.ErrStarted
	}
	if err := h.loadKeys(ctx); err != nil {
		h.log.Warn("heartbeats: cannot read the heartbeat keys yet", "err", err)
	}
	h.Go(h.reloadKeys)
	h.Go(h.read)
	return nil
}

// Stop stops reading and closes the clients.
func (h *Heartbeats) Stop() {
	if h.StopAndHalt() {
		h.producer.Close()
		h.admin.Close()
	}
}

// Beat writes a heartbeat of session, signed, and returns once the
// destination has acknowledged it. A topic that is gone (a destination
// rebuilt empty) is made again by the next Beat.
func (h *Heartbeats) Beat(ctx context.Context, session int64) error {
	h.mu.Lock()
	ring := h.keys
	h.mu.Unlock()
	if ring.signer == 0 {
		return errors.New("no heartbeat key read from the database yet")
	}
	if !h.created {
		if err := h.createTopic(ctx); err != nil {
			return err
		}
		h.created = true
	}
	h.beat++
	id := h.prefix + h.cfg.InstanceID
	v, _ := json.Marshal(heartbeat{Session: session, Beat: h.beat, Key: ring.signer,
		MAC: mac(ring.keys[ring.signer], id, session, h.beat)})
	err := h.producer.ProduceSync(ctx, &kgo.Record{Key: []byte(id), Value: v, Partition: 0}).FirstErr()
	if err != nil {
		// The topic may be gone (a destination rebuilt empty): ask for it
		// again, which costs nothing if it is there. And kgo keeps producing
		// to the topic id it first learnt, which a topic made again does not
		// have: a new client learns the new one.
		h.created = false
		if p, perr := newProducer(h.cfg); perr == nil {
			h.producer.Close()
			h.producer = p
		}
	}
	return err
}

// newProducer is not idempotent: a heartbeat written twice is no news, and
// a producer id is one more thing a destination rebuilt empty forgets.
// Its records fail after a ReadInterval's worth of retries at most, as kgo
// does not fail a record in a retried batch when Beat's context ends.
func newProducer(cfg Config) (*kgo.Client, error) {
	return cfg.Destination.NewClient(kgo.ProducerLinger(0), kgo.DisableIdempotentWrite(),
		kgo.RecordDeliveryTimeout(heartbeatDelivery),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(Topic))
}

// heartbeatDelivery bounds a heartbeat's delivery: one older than the
// lease manager's renewal interval (5 s by default) is of no use.
const heartbeatDelivery = 5 * time.Second

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
// end within margin, or has not read the keys lately (it cannot tell who is
// alive). Ends is when the first of them stops being spared. Every session
// of an instance seen within ttl is spared, so no heartbeat of another
// session hides the real one.
func (h *Heartbeats) Spared(grace, ttl, margin time.Duration) repo.Spared {
	now := h.cfg.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := repo.Spared{Grace: grace}
	if h.caughtUp.IsZero() || now.Sub(h.caughtUp) > margin || h.keys.loaded.IsZero() ||
		now.Sub(h.keys.loaded) > staleReloads*h.cfg.KeysReload {
		s.All = true
		return s
	}
	for id, sessions := range h.seen {
		for session, seen := range sessions {
			if now.Sub(seen.at) < ttl {
				s.Owners = append(s.Owners, id)
				s.Sessions = append(s.Sessions, session)
				if ends := seen.at.Add(ttl); s.Ends.IsZero() || ends.Before(s.Ends) {
					s.Ends = ends
				}
			}
		}
	}
	return s
}

// read follows the topic from its start: every heartbeat it reads is
// recorded as seen now; every ReadInterval it lists the topic's end, and
// once it has read up to it, it is caught up as of the listing. A topic
// made again (a new id) is read again from its start.
func (h *Heartbeats) read(ctx context.Context) {
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	next := int64(0) // the next offset to read
	var topicID kadm.TopicID
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
		id, end := h.listEnd(ctx)
		if end >= 0 && id != topicID {
			if topicID != (kadm.TopicID{}) {
				h.log.Info("heartbeats: the topic was made again; reading it from its start")
				cl.Close()
				cl, next = nil, 0
				topicID = id
				continue
			}
			topicID = id
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

// listEnd returns the topic's id and end offset; -1 when it cannot tell.
func (h *Heartbeats) listEnd(ctx context.Context) (kadm.TopicID, int64) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	topics, err := h.admin.ListTopics(lctx, Topic)
	if err != nil {
		return kadm.TopicID{}, -1
	}
	td, ok := topics[Topic]
	if !ok || td.Err != nil {
		return kadm.TopicID{}, -1
	}
	ends, err := h.admin.ListEndOffsets(lctx, Topic)
	if err != nil {
		return kadm.TopicID{}, -1
	}
	if o, ok := ends.Lookup(Topic, 0); ok && o.Err == nil {
		return td.ID, o.Offset
	}
	return kadm.TopicID{}, -1
}

func (h *Heartbeats) wait(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(h.cfg.ReadInterval):
	}
}

// record notes a heartbeat of this deployment as seen now, when a key read
// from the database verifies it and its beat is newer than its session's
// last. Anything else is ignored; what fails the check is counted.
func (h *Heartbeats) record(r *kgo.Record) {
	id, ok := strings.CutPrefix(string(r.Key), h.prefix)
	if !ok {
		return // another deployment's
	}
	var hb heartbeat
	if json.Unmarshal(r.Value, &hb) != nil || hb.Session <= 0 || hb.Beat <= 0 {
		h.reject(id, "malformed", r.Offset)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.keys.keys[hb.Key]; !ok && len(h.unknown) < maxUnknown {
		// Signed after this instance last read the keys, or forged: the
		// next reading of the keys tells (recheck).
		h.unknown[string(r.Key)] = r
		return
	}
	h.verified(r, hb)
}

// verified records hb, read from r, if its key verifies it. h.mu is held.
func (h *Heartbeats) verified(r *kgo.Record, hb heartbeat) {
	id := strings.TrimPrefix(string(r.Key), h.prefix)
	key, ok := h.keys.keys[hb.Key]
	switch {
	case !ok:
		h.reject(id, "unknown_key", r.Offset)
		return
	case !hmac.Equal(hb.MAC, mac(key, string(r.Key), hb.Session, hb.Beat)):
		h.reject(id, "bad_mac", r.Offset)
		return
	}
	now := h.cfg.Now()
	sessions := h.seen[id]
	if sessions == nil {
		sessions = map[int64]sighting{}
		h.seen[id] = sessions
	}
	if cur, ok := sessions[hb.Session]; ok && hb.Beat <= cur.beat {
		return // replayed, or read again from a topic made again
	}
	sessions[hb.Session] = sighting{beat: hb.Beat, at: now}
	for session, seen := range sessions {
		if now.Sub(seen.at) > forget {
			delete(sessions, session)
		}
	}
}

// maxUnknown bounds the heartbeats held for the next reading of the keys.
const maxUnknown = 1000

// recheck checks again, after the keys were read, the heartbeats signed by
// a key unknown before; one is seen as of now, later than it was read,
// which only spares its session longer. h.mu is held.
func (h *Heartbeats) recheck() {
	pending := h.unknown
	h.unknown = map[string]*kgo.Record{}
	for _, r := range pending {
		var hb heartbeat
		_ = json.Unmarshal(r.Value, &hb)
		if _, ok := h.keys.keys[hb.Key]; !ok {
			h.reject(strings.TrimPrefix(string(r.Key), h.prefix), "unknown_key", r.Offset)
			continue
		}
		h.verified(r, hb)
	}
}

// reject counts a heartbeat that failed the check, and says so in the log
// at most once a minute.
func (h *Heartbeats) reject(instance, reason string, offset int64) {
	h.metrics.rejected.WithLabelValues(reason).Inc()
	if now := time.Now(); now.Sub(h.metrics.lastWarn.Load().(time.Time)) > time.Minute {
		h.metrics.lastWarn.Store(now)
		h.log.Warn("heartbeats: ignored a heartbeat that fails the check; a client other than kmirror writes "+Topic,
			"heartbeat_of", instance, "reason", reason, "offset", offset)
	}
}
