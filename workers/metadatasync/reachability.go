package metadatasync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
)

// Reachability probes: the holder of a mirror's metadata lease asks its
// source, and every instance asks the destination, for a broker-only
// metadata request every ProbeInterval. An answer is written to Postgres
// only when it changes, so a healthy deployment writes nothing; every
// instance then reports the whole deployment from there (the mirror's
// status and kmirror_cluster_reachable). Readiness does not depend on them:
// a cluster outage must not take every instance out of service.

// errorRefreshInterval is how often the error text of a cluster that stays
// unreachable is written again when only the text changed (a client with
// several brokers reports whichever it tried last).
const errorRefreshInterval = time.Minute

// maxProbeError bounds the error text stored per cluster.
const maxProbeError = 500

// prober remembers the last answer written, so a probe writes only a
// change. It is used by one goroutine.
type prober struct {
	written *repo.Reachability
	at      time.Time
}

// changed says whether r must be written.
func (p *prober) changed(r repo.Reachability) bool {
	switch {
	case p.written == nil || p.written.Reachable != r.Reachable:
		return true
	case p.written.Error != r.Error:
		return time.Since(p.at) >= errorRefreshInterval
	}
	return false
}

func (p *prober) wrote(r repo.Reachability) {
	p.written, p.at = &r, time.Now()
}

// probe asks a cluster for a broker-only metadata request within timeout.
// A broker that could not be spoken to reads the same whatever answered
// (kafkaconn.Public); detail is the error as it came, for the log.
func probe(ctx context.Context, cl *kgo.Client, timeout time.Duration) (r repo.Reachability, detail error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout,
		fmt.Errorf("no broker answered a metadata request within %s", timeout))
	defer cancel()
	err := cl.Ping(ctx)
	if err == nil {
		return repo.Reachability{Reachable: true}, nil
	}
	if errors.Is(err, context.DeadlineExceeded) && context.Cause(ctx) != nil {
		err = context.Cause(ctx)
	}
	detail = err
	seeds, _ := cl.OptValue(kgo.SeedBrokers).([]string)
	msg := kafkaconn.Public(err, seeds).Error()
	if len(msg) > maxProbeError {
		msg = msg[:maxProbeError] + "…"
	}
	return repo.Reachability{Error: msg}, detail
}

// probeDestination records whether the destination answers this instance,
// until ctx ends.
func (s *Syncer) probeDestination(ctx context.Context) {
	var p prober
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r, detail := probe(ctx, s.dst, s.cfg.ProbeTimeout)
		if ctx.Err() != nil {
			return
		}
		if p.changed(r) {
			wctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			err := repo.InstancesSaveDestinationReachability(wctx, s.cfg.Pool, s.cfg.InstanceID, r)
			cancel()
			if err == nil {
				p.wrote(r)
				s.logChange(s.log, "destination", r, detail)
			} else if ctx.Err() == nil {
				s.log.Debug("recording the destination's reachability failed", "err", err)
			}
		}
		t.Reset(s.cfg.ProbeInterval)
	}
}

// probeSource records whether the mirror's source answers, fenced by the
// mirror's metadata lease, until ctx ends (the lease's end). It uses the
// pass's source client; until the first pass made one it waits, and a
// client that could not be made is reported as the reason.
func (r *mirrorSync) probeSource(ctx context.Context) {
	s := r.s
	var p prober
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		src, srcErr := r.currentSource()
		var res repo.Reachability
		var detail error
		switch {
		case src != nil:
			res, detail = probe(ctx, src.cl, s.cfg.ProbeTimeout)
			if cur, _ := r.currentSource(); cur != src {
				// The client was replaced (the connection changed) or
				// closed while asked: its answer is not the source's.
				t.Reset(0)
				continue
			}
			if !res.Reachable {
				res.Error = fmt.Sprintf("source cluster at %s: %s", src.servers, res.Error)
			}
		case srcErr != nil:
			res = repo.Reachability{Error: srcErr.Error()}
		default:
			t.Reset(min(s.cfg.ProbeInterval, 200*time.Millisecond)) // no client yet
			continue
		}
		if ctx.Err() != nil || !r.lease.Valid() {
			return
		}
		if p.changed(res) {
			wctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			err := repo.MirrorsSaveSourceReachability(wctx, s.cfg.Pool, repo.MirrorsSaveSourceReachabilityParams{
				Name: r.name, Owner: r.lease.Owner, Epoch: r.lease.Epoch, Reachability: res})
			cancel()
			switch {
			case err == nil:
				p.wrote(res)
				s.logChange(r.log, "source", res, detail)
			case errors.Is(err, repo.ErrNotFound):
				r.log.Debug("the metadata lease moved on before the source's reachability was recorded")
			case ctx.Err() == nil:
				r.log.Debug("recording the source's reachability failed", "err", err)
			}
		}
		t.Reset(s.cfg.ProbeInterval)
	}
}

func (s *Syncer) logChange(log *slog.Logger, cluster string, r repo.Reachability, detail error) {
	if r.Reachable {
		log.Info("cluster reachable", "cluster", cluster)
	} else {
		log.Warn("cluster unreachable", "cluster", cluster, "err", r.Error, "detail", detail)
	}
}
