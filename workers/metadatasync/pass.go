package metadatasync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
)

// errSyncLeaseLost stops a pass before a write: the mirror's metadata-sync
// lease is no longer trusted, so another instance may be syncing it.
var errSyncLeaseLost = errors.New("metadata-sync lease lost; pass abandoned")

// syncPass is one metadata sync pass over a mirror. Each kind of metadata
// is kept in step on its own: one failing does not stop the others. Every
// change on the destination is made from what the source said in this pass,
// so a source that cannot be reached changes nothing.
type syncPass struct {
	r      *mirrorSync
	ctx    context.Context
	mirror repo.Mirror
	cfg    service.SyncConfig
	res    service.SyncResult

	// topics are the mirror's topics by source name, which is their
	// identity here as everywhere; on the destination each is named
	// DestTopic (dest).
	topics map[string]repo.Topic
	parts  map[topicPartition]repo.Partition
	// elsewhere holds the destination topics of the mirror's topics that
	// another mirror writes now (only a stopped topic's can be: one
	// destination topic has one writer), by destination name.
	elsewhere map[string]repo.Writer

	src *syncSource
	// srcTopics are the source's topics and partition counts; srcErr says
	// why they are unknown.
	srcTopics map[string]int32
	srcErr    error
	// dstTopics are the mirror topics that exist on the destination, by
	// source name, with their partition counts; dstErr says why they are
	// unknown.
	dstTopics map[string]int32
	dstErr    error
}

// topicPartition names a partition of the pass's mirror by its source
// topic.
type topicPartition struct {
	topic     string
	partition int32
}

// run loads the pass's inputs, runs every kind and returns the interval
// until the next pass.
func (p *syncPass) run() time.Duration {
	s := p.r.s
	interval := s.cfg.DefaultInterval
	cfg, cfgErr := service.ParseSyncConfig(p.mirror.Config)
	if cfgErr == nil {
		p.cfg = cfg
		interval = cmp.Or(cfg.Interval, interval)
	}
	loadErr := cmp.Or(cfgErr, p.load())
	for _, k := range kinds {
		p.runKind(k, loadErr)
	}
	return interval
}

// runKind runs one kind with a panic kept to it: the kind fails with the
// panic as its error, the stack goes to the log, and the other kinds and
// the process go on.
func (p *syncPass) runKind(k kind, loadErr error) {
	defer func() {
		if v := recover(); v != nil {
			p.r.log.Error("panic in metadata sync", "kind", k.name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			k.fail(&p.res, fmt.Sprintf("panic: %v", v))
		}
	}()
	p.r.s.TestSignals.BeforeKind.Signal(k.name)
	k.run(p, loadErr)
}

// finishOutcome sets a kind's OK and Error from its error and items.
func finishOutcome(o *service.SyncOutcome, err error) {
	failed := 0
	for _, it := range o.Items {
		if it.Action == "failed" {
			failed++
		}
	}
	switch {
	case err != nil:
		o.Error = err.Error()
	case failed > 0:
		o.Error = fmt.Sprintf("%d of %d item(s) failed", failed, len(o.Items))
	}
	o.OK = o.Error == ""
}

func (p *syncPass) errorSummary() string {
	var parts []string
	for _, k := range kinds {
		if _, e := k.status(&p.res); e != "" {
			parts = append(parts, k.name+": "+e)
		}
	}
	return strings.Join(parts, "; ")
}

// load reads the mirror's topics and partitions from Postgres and the topic
// metadata of both clusters. Cluster errors are kept for the kinds that
// need them; only a database error fails the whole pass.
func (p *syncPass) load() error {
	s := p.r.s
	topics, err := repo.TopicsList(p.ctx, s.cfg.Pool, p.mirror.Name)
	if err != nil {
		return fmt.Errorf("load topics: %w", err)
	}
	parts, err := repo.PartitionsList(p.ctx, s.cfg.Pool, repo.PartitionsListParams{Mirror: p.mirror.Name})
	if err != nil {
		return fmt.Errorf("load partitions: %w", err)
	}
	p.topics = make(map[string]repo.Topic, len(topics))
	for _, t := range topics {
		p.topics[t.Topic] = t
	}
	p.parts = make(map[topicPartition]repo.Partition, len(parts))
	for _, pt := range parts {
		p.parts[topicPartition{pt.Topic, pt.Partition}] = pt
	}

	if p.src, err = p.r.source(p.mirror); err != nil {
		p.srcErr = fmt.Errorf("source cluster at %s: %w", p.mirror.BootstrapServers, err)
	} else {
		var details map[string]topicMeta
		err = p.within("source topic metadata", func(ctx context.Context) (err error) {
			details, err = freshTopicMetadata(ctx, p.src.cl)
			return err
		})
		if err != nil {
			p.srcErr = fmt.Errorf("source cluster at %s: %w", p.mirror.BootstrapServers, err)
		} else {
			p.srcTopics = make(map[string]int32, len(details))
			for name, d := range details {
				if !d.internal && !errors.Is(d.err, kerr.UnknownTopicOrPartition) {
					p.srcTopics[name] = d.partitions
				}
			}
		}
	}

	if len(p.topics) > 0 {
		dests := make([]string, 0, len(p.topics))
		var stopped []string
		for _, name := range sortedNames(p.topics) {
			dests = append(dests, p.dest(name))
			if p.topics[name].DesiredState == service.DesiredStopped {
				stopped = append(stopped, p.dest(name))
			}
		}
		// Only a stopped topic's destination name can have another writer
		// (mirror_topics_one_writer): most passes ask nothing.
		if len(stopped) > 0 {
			if p.elsewhere, err = repo.TopicsWrittenElsewhere(p.ctx, s.cfg.Pool, p.mirror.Name, stopped); err != nil {
				return fmt.Errorf("load the destination topics other mirrors write: %w", err)
			}
		}
		// Asked by name, so other mirrors' topics and local ones are
		// never seen as this mirror's.
		var details map[string]topicMeta
		err = p.within("destination topic metadata", func(ctx context.Context) (err error) {
			details, err = freshTopicMetadata(ctx, s.dst, dests...)
			return err
		})
		if err != nil {
			p.dstErr = fmt.Errorf("destination cluster: %w", err)
		}
		p.dstTopics = map[string]int32{}
		for name := range p.topics {
			if d, ok := details[p.dest(name)]; ok && d.err == nil {
				p.dstTopics[name] = d.partitions
			}
		}
	}
	return nil
}

// within runs fn bounded by the pass timeout; a timeout's error names the
// request, as in "source topic metadata timed out after 10s".
func (p *syncPass) within(what string, fn func(ctx context.Context) error) error {
	d := p.r.s.cfg.Timeout
	ctx, cancel := context.WithTimeoutCause(p.ctx, d, fmt.Errorf("%s timed out after %s", what, d))
	defer cancel()
	err := fn(ctx)
	switch {
	case err == nil:
		return nil
	case p.ctx.Err() != nil:
		return errSyncLeaseLost
	case ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// guard is called before every write: a pass that no longer holds its
// lease must not change anything.
func (p *syncPass) guard() error {
	if p.ctx.Err() != nil || !p.r.lease.Valid() {
		return errSyncLeaseLost
	}
	return nil
}

func (p *syncPass) svc() *service.Workers { return p.r.s.cfg.Service }

// mirrored reports whether a topic's desired state is mirroring or paused.
func mirrored(t repo.Topic) bool {
	return t.DesiredState == service.DesiredMirroring || t.DesiredState == service.DesiredPaused
}

// syncDeletedTopics stops mirrored topics that the source has lost on
// SourceMissingPassesToStop passes in a row. A topic counts as missing
// only when the source answers, by name, that it does not exist: a topic
// the principal may no longer describe is not a deleted one.
func (p *syncPass) syncDeletedTopics(o *service.SyncOutcome) error {
	if p.srcErr != nil {
		return p.srcErr
	}
	var candidates []string
	for _, name := range sortedNames(p.topics) {
		if _, onSource := p.srcTopics[name]; mirrored(p.topics[name]) && !onSource {
			candidates = append(candidates, name)
		}
	}
	var missing []string
	if len(candidates) > 0 {
		var details map[string]topicMeta
		err := p.within("source topic metadata", func(ctx context.Context) (err error) {
			details, err = freshTopicMetadata(ctx, p.src.cl, candidates...)
			return err
		})
		if err != nil {
			return fmt.Errorf("source cluster at %s: %w", p.mirror.BootstrapServers, err)
		}
		for _, name := range candidates {
			switch d, ok := details[name]; {
			case !ok || errors.Is(d.err, kerr.UnknownTopicOrPartition):
				missing = append(missing, name)
			case d.err == nil: // it came back
			default:
				o.Items = append(o.Items, p.item(name, "skipped",
					fmt.Sprintf("cannot tell whether it exists on the source: %v", d.err)))
			}
		}
	}
	if err := p.guard(); err != nil {
		return err
	}
	counts, err := p.svc().CountSourceMissing(p.ctx, p.mirror.Name, missing)
	if err != nil {
		return err
	}
	var stop []string
	for _, name := range missing {
		if n := counts[name]; n >= service.SourceMissingPassesToStop {
			stop = append(stop, name)
		} else {
			o.Items = append(o.Items, p.item(name, "missing", fmt.Sprintf(
				"missing on the source (%d pass(es) in a row; stopped after %d)", n, service.SourceMissingPassesToStop)))
		}
	}
	if len(stop) == 0 {
		return nil
	}
	if err := p.guard(); err != nil {
		return err
	}
	stopped, err := p.svc().StopSourceDeletedTopics(p.ctx, p.mirror.Name, stop)
	if err != nil {
		return err
	}
	for _, name := range stopped {
		t := p.topics[name]
		t.DesiredState = service.DesiredStopped
		p.topics[name] = t
		o.Items = append(o.Items, p.item(name, "stopped", fmt.Sprintf(
			"deleted on the source (missing on %d passes in a row): mirroring stops", service.SourceMissingPassesToStop)))
	}
	return nil
}

// syncNewTopics adds the source topics that match topics.include and not
// topics.exclude and that the mirror does not have yet.
func (p *syncPass) syncNewTopics(o *service.SyncOutcome) error {
	if p.cfg.TopicsInclude == nil {
		return nil // topics.include is empty: nothing is added automatically
	}
	if p.srcErr != nil {
		return p.srcErr
	}
	found := map[string]int32{}
	for name, n := range p.srcTopics {
		if _, known := p.topics[name]; known {
			continue
		}
		// A topic still without partitions (being created) waits for the
		// next pass.
		if n > 0 && service.Matches(p.cfg.TopicsInclude, name) && !service.Matches(p.cfg.TopicsExclude, name) {
			found[name] = n
		}
	}
	if len(found) == 0 {
		return nil
	}
	if err := p.guard(); err != nil {
		return err
	}
	added, err := p.svc().AddSourceTopics(p.ctx, p.mirror.Name, found)
	if err != nil {
		return err
	}
	for _, a := range added {
		it := service.SyncItem{Name: a.Topic, Action: "added",
			Detail: fmt.Sprintf("new source topic with %d partition(s) matches topics.include", a.Partitions)}
		if a.DestinationTopic != a.Topic {
			it.DestinationTopic = a.DestinationTopic
		}
		o.Items = append(o.Items, it)
	}
	return nil
}

// syncPartitions grows mirrored topics that gained partitions on the source:
// CreatePartitions on the destination, then new mirror partitions, which
// the lease manager leases and the workers mirror from their start.
func (p *syncPass) syncPartitions(o *service.SyncOutcome) error {
	if p.srcErr != nil {
		return p.srcErr
	}
	s := p.r.s
	for _, name := range sortedNames(p.topics) {
		t := p.topics[name]
		n, onSource := p.srcTopics[name]
		have := int32(t.Partitions)
		if !mirrored(t) || !onSource || n == have {
			continue
		}
		if n < have {
			o.Items = append(o.Items, p.item(name, "skipped", fmt.Sprintf(
				"the source has %d partition(s), fewer than the mirror's %d: the source topic was recreated", n, have)))
			continue
		}
		if p.dstErr != nil {
			o.Items = append(o.Items, p.item(name, "failed", p.dstErr.Error()))
			continue
		}
		if err := p.guard(); err != nil {
			return err
		}
		// A destination topic not created yet gets the source's count
		// when its first partition starts.
		dest := p.dest(name)
		if d, exists := p.dstTopics[name]; exists && d < n {
			var resp kadm.CreatePartitionsResponses
			err := p.within("destination create partitions", func(ctx context.Context) (err error) {
				resp, err = s.dstAdmin.UpdatePartitions(ctx, int(n), dest)
				return err
			})
			if err == nil {
				if r, ok := resp[dest]; ok && r.Err != nil {
					err = fmt.Errorf("%w %s", r.Err, r.ErrMessage)
				}
			}
			if err != nil {
				o.Items = append(o.Items, p.item(name, "failed",
					fmt.Sprintf("grow the destination topic to %d partitions: %v", n, err)))
				continue
			}
		}
		if e := s.cfg.Producer; e != nil {
			err := p.within("producer metadata refresh", func(ctx context.Context) error {
				return e.AwaitDestinationPartitions(ctx, dest, n)
			})
			if err != nil {
				// The new partitions' workers fail and retry until it has.
				p.r.log.Warn("the producer has not seen the new partitions yet", "topic", name, "destination_topic", dest, "err", err)
			}
		}
		added, err := p.svc().GrowTopicPartitions(p.ctx, p.mirror.Name, name, n)
		if err != nil {
			o.Items = append(o.Items, p.item(name, "failed", fmt.Sprintf("add mirror partitions: %v", err)))
			continue
		}
		o.Items = append(o.Items, p.item(name, "grown", fmt.Sprintf("from %d to %d partitions (%d added)", have, n, len(added))))
	}
	return nil
}

// syncTopicConfigs makes the destination's dynamic topic configs of topics
// that are mirroring or stopped equal to the source's, minus
// topic.properties.exclude, whose keys are never touched on either side.
// A stopped topic whose destination topic another mirror writes now is
// left to that mirror.
func (p *syncPass) syncTopicConfigs(o *service.SyncOutcome) error {
	if p.srcErr != nil {
		return p.srcErr
	}
	if p.dstErr != nil {
		return p.dstErr
	}
	s := p.r.s
	var names, dests []string
	for _, name := range sortedNames(p.topics) {
		t := p.topics[name]
		_, onSource := p.srcTopics[name]
		_, onDest := p.dstTopics[name]
		if (t.DesiredState != service.DesiredMirroring && t.DesiredState != service.DesiredStopped) || !onSource || !onDest {
			continue
		}
		if other, ok := p.writtenElsewhere(name); ok {
			o.Items = append(o.Items, p.item(name, "skipped", fmt.Sprintf(
				"the topic is stopped and mirror %s writes its destination topic %s now: its configs are that mirror's", other, p.dest(name))))
			continue
		}
		names, dests = append(names, name), append(dests, p.dest(name))
	}
	if len(names) == 0 {
		return nil
	}
	var srcCfgs, dstCfgs kadm.ResourceConfigs
	err := p.within("source topic configs", func(ctx context.Context) (err error) {
		srcCfgs, err = p.src.admin.DescribeTopicConfigs(ctx, names...)
		return err
	})
	if err != nil {
		return fmt.Errorf("source cluster at %s: %w", p.mirror.BootstrapServers, err)
	}
	err = p.within("destination topic configs", func(ctx context.Context) (err error) {
		dstCfgs, err = s.dstAdmin.DescribeTopicConfigs(ctx, dests...)
		return err
	})
	if err != nil {
		return fmt.Errorf("destination cluster: %w", err)
	}
	for _, name := range names {
		sc, err := srcCfgs.On(name, nil)
		if err == nil {
			err = sc.Err
		}
		if err != nil {
			o.Items = append(o.Items, p.item(name, "failed", fmt.Sprintf("source configs: %v", err)))
			continue
		}
		dest := p.dest(name)
		dc, err := dstCfgs.On(dest, nil)
		if err == nil {
			err = dc.Err
		}
		if err != nil {
			o.Items = append(o.Items, p.item(name, "failed", fmt.Sprintf("destination configs: %v", err)))
			continue
		}
		want, have := p.dynamicConfigs(sc), p.dynamicConfigs(dc)
		var ops []kadm.AlterConfig
		var changes []string
		for _, k := range sortedNames(want) {
			if v, ok := have[k]; !ok || v != want[k] {
				ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(want[k])})
				changes = append(changes, k+"="+want[k])
			}
		}
		for _, k := range sortedNames(have) {
			if _, ok := want[k]; !ok {
				ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
				changes = append(changes, k+" reset to the default")
			}
		}
		if len(ops) == 0 {
			continue
		}
		if err := p.guard(); err != nil {
			return err
		}
		var resp kadm.AlterConfigsResponses
		err = p.within("destination alter topic configs", func(ctx context.Context) (err error) {
			resp, err = s.dstAdmin.AlterTopicConfigs(ctx, ops, dest)
			return err
		})
		for _, r := range resp {
			if r.Err != nil && err == nil {
				err = fmt.Errorf("%w %s", r.Err, r.ErrMessage)
			}
		}
		if err != nil {
			o.Items = append(o.Items, p.item(name, "failed", fmt.Sprintf("set %s: %v", strings.Join(changes, ", "), err)))
			continue
		}
		o.Items = append(o.Items, p.item(name, "updated", strings.Join(changes, ", ")))
	}
	return nil
}

// dynamicConfigs are a topic's own (dynamic) configs that the sync keeps in
// step.
func (p *syncPass) dynamicConfigs(rc kadm.ResourceConfig) map[string]string {
	return kafkaconn.DynamicTopicConfigs(rc, p.cfg.PropertyExcluded)
}

// syncPausedTopics reports the source end offsets of paused topics. The
// partition workers of paused partitions keep storing them, fenced by
// their leases, so lag stays true while paused; the pass reads them fresh.
func (p *syncPass) syncPausedTopics(o *service.SyncOutcome) error {
	var names []string
	for _, name := range sortedNames(p.topics) {
		if p.topics[name].DesiredState == service.DesiredPaused {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	if p.srcErr != nil {
		return p.srcErr
	}
	var ends kadm.ListedOffsets
	err := p.within("source end offsets", func(ctx context.Context) (err error) {
		ends, err = p.src.admin.ListCommittedOffsets(ctx, names...)
		return err
	})
	if err != nil {
		return fmt.Errorf("source cluster at %s: %w", p.mirror.BootstrapServers, err)
	}
	for _, name := range names {
		var lag int64
		var offs []string
		for part := int32(0); part < int32(p.topics[name].Partitions); part++ {
			e, ok := ends.Lookup(name, part)
			if !ok || e.Err != nil {
				continue
			}
			offs = append(offs, fmt.Sprintf("%d:%d", part, e.Offset))
			if pt, ok := p.parts[topicPartition{name, part}]; ok {
				next := int64(0)
				if pt.SrcNext != nil {
					next = *pt.SrcNext
				}
				lag += max(e.Offset-next, 0)
			}
		}
		o.Items = append(o.Items, p.item(name, "refreshed",
			fmt.Sprintf("source end offsets [%s]; lag %d", strings.Join(offs, " "), lag)))
	}
	return nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// topicMeta is one topic of a metadata response.
type topicMeta struct {
	partitions int32
	internal   bool
	err        error
}

// freshTopicMetadata asks the cluster for the metadata of the named topics,
// or of all topics when none is named. Unlike kadm's listing, which may
// answer from the client's cache, this always asks a broker: a pass must
// see partitions added and topics deleted a moment ago.
func freshTopicMetadata(ctx context.Context, cl *kgo.Client, topics ...string) (map[string]topicMeta, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make(map[string]topicMeta, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		out[*t.Topic] = topicMeta{partitions: int32(len(t.Partitions)), internal: t.IsInternal,
			err: kerr.ErrorForCode(t.ErrorCode)}
	}
	return out, nil
}
