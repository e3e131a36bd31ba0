package metadatasync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/vocabulary/states"
	"kmirror/repo"
	"kmirror/service"
)

// schemaWakeSpacing is the least time between two schema passes of a
// mirror that notifications woke: a burst of topic changes costs one pass.
const schemaWakeSpacing = time.Second

// schemaFullEvery is how many passes in a row may find nothing changed and
// skip the registries' subjects (a steady pass reads two lists of the
// source's and nothing of the destination's) before one reads everything
// again: what someone changed on the destination is put right within it.
const schemaFullEvery = 30

// schemaSync is one leased mirror's Schema Registry sync (docs/design.md,
// "Schema Registry"). It runs beside the metadata passes, under the same
// lease, on its own interval (schema.sync.interval.ms): each pass copies
// the subjects of the mirror's mirrored topics into the deployment's
// destination registry with their ids, leaving them READONLY, and makes
// the subjects of topics removed (failed over) READWRITE after one last
// copy.
type schemaSync struct {
	r   *mirrorSync
	dst *sr.Client
	// src is the mirror's source registry client, made again when the
	// mirror's row changes (srcKey is its updated_at then).
	src    *sr.Client
	srcKey time.Time
	// released are the destination subjects this lease made READWRITE:
	// they are not read again while their topics stay removed
	// (stillReleased marks those seen removed this pass).
	released      map[string]int // by destination subject: its versions when opened
	stillReleased map[string]bool
	// regexReleased: the regex's subjects were released, no topic being
	// mirrored; done again once a topic is mirrored and then removed.
	regexReleased bool
	// cleared: the mirror names no source registry, and its stored
	// result was cleared.
	cleared bool
	// logged is the failure last logged, "" after a success.
	logged string
	// steady is what the last full pass that succeeded saw (the source's
	// schemas and the selection), and skipped how many passes since found
	// it unchanged and read nothing more.
	steady  string
	skipped int
	last    *service.SchemaSyncResult
}

// runSchemas runs schema passes until the lease ends: at once, then every
// schema.sync.interval.ms, and when woken (a topic added, removed, paused,
// or "sync now").
func (r *mirrorSync) runSchemas(ctx context.Context, dst *sr.Client) {
	defer close(r.schemasDone)
	ss := &schemaSync{r: r, dst: dst, released: map[string]int{}, stillReleased: map[string]bool{}}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := ss.pass(ctx)
		if ctx.Err() != nil || !r.lease.Valid() {
			return
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-r.schemaWake:
			select {
			case <-ctx.Done():
				return
			case <-time.After(schemaWakeSpacing):
			}
		}
	}
}

// wakeSchemas asks for a schema pass soon.
func (r *mirrorSync) wakeSchemas() {
	select {
	case r.schemaWake <- struct{}{}:
	default:
	}
}

// pass runs one schema pass, stores its result while the lease holds, and
// returns the time until the next one.
func (ss *schemaSync) pass(ctx context.Context) time.Duration {
	r, s := ss.r, ss.r.s
	m, err := repo.MirrorsGet(ctx, s.cfg.Pool, r.name)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, repo.ErrNotFound) {
			r.log.Warn("schema sync: loading the mirror failed", "err", err)
		}
		return 5 * time.Second
	}
	cfg := service.SchemaSyncConfigOf(m.Config)
	srcCfg, ok, err := s.cfg.Service.SourceRegistry(m)
	if err == nil && !ok {
		// The mirror names no source registry (any more): nothing to
		// sync, and no result to show. One write clears an old result.
		ss.src = nil
		if !ss.cleared {
			ss.cleared = ss.save(ctx, nil)
		}
		return cfg.Interval
	}
	ss.cleared = false
	res := &service.SchemaSyncResult{Instance: s.cfg.InstanceID, Epoch: r.lease.Epoch, StartedAt: time.Now().UTC()}
	if err == nil {
		err = ss.sync(ctx, m, srcCfg, cfg, res)
	}
	if err != nil {
		res.Error = err.Error()
	}
	res.FinishedAt = time.Now().UTC()
	res.Finish()
	if ctx.Err() != nil {
		return cfg.Interval // the lease ended mid-pass: not this instance's result to store
	}
	ss.save(ctx, res)
	s.schemaMetrics.observe(r.name, res)
	// A failure is logged when it starts or changes, not every pass: the
	// stored result and the events say it too.
	summary := ""
	if !res.OK {
		summary = res.Error
		for _, sub := range res.Subjects {
			summary += sub.Error
		}
	}
	switch {
	case !res.OK && summary != ss.logged:
		r.log.Warn("schema sync failed", "subjects", len(res.Subjects), "failed", res.Failed, "err", res.Error)
	case res.OK && ss.logged != "":
		r.log.Info("schema sync succeeded again", "subjects", len(res.Subjects))
	}
	ss.logged = summary
	if res.Copied > 0 {
		r.log.Info("schema sync copied versions", "copied", res.Copied, "subjects", len(res.Subjects))
	}
	return cfg.Interval
}

// sync copies the mirrored topics' subjects and releases the removed
// ones'.
func (ss *schemaSync) sync(ctx context.Context, m repo.Mirror, srcCfg schemaregistry.Config, cfg service.SchemaSyncConfig, res *service.SchemaSyncResult) error {
	if ss.dst == nil {
		return errors.New("the deployment has no destination Schema Registry: start every server with " +
			"--destination-schema-registry-url (KMIRROR_DESTINATION_SCHEMA_REGISTRY_URL)")
	}
	if ss.src == nil || !ss.srcKey.Equal(m.UpdatedAt) {
		cl, err := schemaregistry.NewClient(srcCfg)
		if err != nil {
			return fmt.Errorf("source registry: %w", err)
		}
		ss.src, ss.srcKey = cl, m.UpdatedAt
	}
	topics, err := repo.TopicsList(ctx, ss.r.s.cfg.Pool, m.Name)
	if err != nil {
		return fmt.Errorf("loading the mirror's topics: %w", err)
	}
	var mirrored, removed []string
	for _, t := range topics {
		if t.DesiredState == states.DesiredStopped {
			removed = append(removed, t.Topic)
		} else {
			mirrored = append(mirrored, t.Topic)
		}
	}
	base := schemaregistry.Selection{TopicPrefix: service.EffectiveConfig(m.Config)[service.CfgTopicNamePrefix],
		Context: cfg.Context}

	// Nothing changed since the last full pass that succeeded: its result
	// stands, and the registries are spared a read of every subject.
	steady := ss.steadyKey(ctx, base, cfg, mirrored, removed)
	if steady != "" && steady == ss.steady && ss.skipped < schemaFullEvery && ss.last != nil {
		ss.skipped++
		res.Subjects = ss.last.Subjects
		res.Versions, res.Failed = ss.last.Versions, ss.last.Failed
		return nil
	}
	ss.steady, ss.skipped, ss.last = "", 0, nil
	defer func() {
		if res.Error == "" && res.Failed == 0 && res.Copied == 0 && res.SoftDeleted == 0 && steady != "" && ctx.Err() == nil {
			// Only a pass that found everything in step: a pass that
			// wrote is checked once more before passes are skipped.
			ss.steady, ss.last = steady, res
		}
	}()

	// Every topic was removed (a whole failover): the regex's subjects
	// open with the topics' rather than stay closed.
	allRemoved := len(mirrored) == 0 && len(removed) > 0

	// The mirrored topics' subjects, and those the regex selects.
	kept := map[string]bool{}
	if len(mirrored) > 0 || (cfg.SubjectRegex != "" && !allRemoved) {
		sel := base
		sel.Topics, sel.SubjectRegex = mirrored, cfg.SubjectRegex
		rep, err := ss.apply(ctx, sel)
		if err != nil {
			return err
		}
		res.AddReport(rep, service.SchemaModeReadOnly)
		for _, sub := range rep.Subjects {
			kept[sub.Destination] = true
		}
	}

	// The removed topics' subjects: one last copy, then READWRITE, with
	// the regex's once every topic was removed. A subject a mirrored
	// topic still needs (a shared reference) stays READONLY.
	sel := base
	sel.Topics = removed
	if allRemoved {
		sel.SubjectRegex = cfg.SubjectRegex
	}
	return ss.release(ctx, sel, kept, res)
}

// steadyKey sums up what a pass depends on: the source's schemas (every
// subject's versions, soft-deleted ones included, in two requests) and the
// selection. "" when the source cannot list them all at once (a registry
// without GET /schemas): every pass is then a full one.
func (ss *schemaSync) steadyKey(ctx context.Context, base schemaregistry.Selection, cfg service.SchemaSyncConfig, mirrored, removed []string) string {
	all, err := ss.src.AllSchemas(sr.WithParams(ctx, sr.ShowDeleted))
	if err != nil {
		return ""
	}
	live, err := ss.src.AllSchemas(ctx)
	if err != nil {
		return ""
	}
	h := sha256.New()
	for _, list := range [][]sr.SubjectSchema{all, live} {
		for _, s := range list {
			fmt.Fprintf(h, "%s\x00%d\x00%d\x00%s\x00%v\x01", s.Subject, s.Version, s.ID, s.Schema.Schema, s.Schema.References)
		}
		h.Write([]byte{2})
	}
	fmt.Fprintf(h, "%q %q %q %q %q", base.TopicPrefix, base.Context, cfg.SubjectRegex, mirrored, removed)
	return hex.EncodeToString(h.Sum(nil))
}

// apply plans a sync and applies it while the lease holds.
func (ss *schemaSync) apply(ctx context.Context, sel schemaregistry.Selection) (*schemaregistry.Report, error) {
	plan, err := schemaregistry.PlanSync(ctx, ss.src, ss.dst, sel)
	if err != nil {
		return nil, err
	}
	if !ss.r.lease.Valid() {
		return nil, errSyncLeaseLost
	}
	return plan.Apply(ctx), nil
}

// release makes the subjects of sel READWRITE on the destination, after a
// last copy of what the source added since the previous pass. A failover
// must not wait on a source that is down: when that copy cannot be made,
// the subjects are released with what the destination has, and each says
// so. Subjects this lease released already are only reported; those a
// previous lease released (READWRITE on the destination) are left out of
// the last copy, which would close them to the destination's producers for
// a moment.
func (ss *schemaSync) release(ctx context.Context, sel schemaregistry.Selection, kept map[string]bool, res *service.SchemaSyncResult) error {
	if sel.SubjectRegex == "" {
		ss.regexReleased = false
	}
	var pending []string // removed topics with a subject not yet released here
	for d := range ss.stillReleased {
		ss.stillReleased[d] = false
	}
	for _, t := range sel.Topics {
		for _, suffix := range []string{"-key", "-value"} {
			d := sel.DestinationSubject(t + suffix)
			if versions, ok := ss.released[d]; ok {
				ss.stillReleased[d] = true
				res.Subjects = append(res.Subjects, service.SchemaSubject{Source: t + suffix, Destination: d,
					Versions: versions, Mode: service.SchemaModeReadWrite})
			} else if !slices.Contains(pending, t) {
				pending = append(pending, t)
			}
		}
	}
	for d, still := range ss.stillReleased {
		if !still {
			delete(ss.released, d) // its topic is mirrored again, or gone
			delete(ss.stillReleased, d)
		}
	}
	if ss.regexReleased {
		sel.SubjectRegex = ""
	}
	if len(pending) == 0 && sel.SubjectRegex == "" {
		return nil
	}
	sel.Topics = pending
	plan, planErr := schemaregistry.PlanSync(ctx, ss.src, ss.dst, sel)
	var subjects []schemaregistry.SubjectPlan
	if planErr == nil {
		subjects = plan.Subjects
	} else {
		// The source registry cannot be read: release what the
		// destination has of the removed topics' subjects.
		for _, t := range pending {
			for _, suffix := range []string{"-key", "-value"} {
				subjects = append(subjects, schemaregistry.SubjectPlan{Source: t + suffix,
					Destination: sel.DestinationSubject(t + suffix)})
			}
		}
	}
	var candidates []string
	for _, sp := range subjects {
		if !kept[sp.Destination] {
			candidates = append(candidates, sp.Destination)
		}
	}
	modes, err := ss.modes(ctx, candidates)
	if err != nil {
		return err
	}
	if !ss.r.lease.Valid() {
		return errSyncLeaseLost
	}
	copied := map[string]schemaregistry.SubjectReport{}
	if planErr == nil {
		plan.Subjects = slices.DeleteFunc(plan.Subjects, func(sp schemaregistry.SubjectPlan) bool {
			return kept[sp.Destination] || modes[sp.Destination] == sr.ModeReadWrite
		})
		for _, sub := range plan.Apply(ctx).Subjects {
			copied[sub.Destination] = sub
			if _, ok := modes[sub.Destination]; !ok && sub.Err == nil && len(sub.Copied) > 0 {
				modes[sub.Destination] = sr.ModeReadOnly // written by this last copy
			}
		}
	}
	var toOpen []string
	for _, d := range candidates {
		if m, exists := modes[d]; exists && m != sr.ModeReadWrite {
			toOpen = append(toOpen, d)
		}
	}
	if !ss.r.lease.Valid() {
		return errSyncLeaseLost
	}
	modeErr := schemaregistry.SetMode(ctx, ss.dst, toOpen, sr.ModeReadWrite)
	for _, sp := range subjects {
		m, exists := modes[sp.Destination]
		if kept[sp.Destination] || !exists {
			continue // still mirrored, or not on the destination: nothing to open
		}
		sub := copied[sp.Destination]
		s := service.SchemaSubject{Source: sp.Source, Destination: sp.Destination, Versions: sp.Present + len(sub.Copied)}
		for _, c := range sub.Copied {
			s.Copied = append(s.Copied, fmt.Sprintf("v%d id %d", c.Version, c.ID))
		}
		if modeErr != nil && m != sr.ModeReadWrite {
			s.Error = modeErr.Error()
			res.Failed++
		} else {
			s.Mode = service.SchemaModeReadWrite
			ss.released[sp.Destination] = s.Versions
			ss.stillReleased[sp.Destination] = true
			switch {
			case planErr != nil:
				s.Error = "released without a last copy: the source registry could not be read (" + planErr.Error() +
					"); the destination keeps what earlier syncs copied"
			case sub.Err != nil:
				s.Error = "released with what the destination has: " + sub.Err.Error()
			}
		}
		res.Subjects = append(res.Subjects, s)
		res.Versions += s.Versions
		res.Copied += len(sub.Copied)
	}
	if modeErr == nil && sel.SubjectRegex != "" {
		ss.regexReleased = true
	}
	if planErr != nil {
		return fmt.Errorf("the last copy of the removed topics' subjects: %w", planErr)
	}
	return nil
}

// modes reads the mode of each destination subject that exists; a subject
// missing from the map is not on the destination. One with versions and no
// mode of its own reads as IMPORT, so that it is opened.
func (ss *schemaSync) modes(ctx context.Context, subjects []string) (map[string]sr.Mode, error) {
	out := map[string]sr.Mode{}
	if len(subjects) == 0 {
		return out, nil
	}
	for _, m := range ss.dst.Mode(ctx, subjects...) {
		switch {
		case m.Err == nil:
			out[m.Subject] = m.Mode
		case isNotFound(m.Err):
			vs, err := ss.dst.SubjectVersions(ctx, m.Subject)
			if err == nil && len(vs) > 0 {
				out[m.Subject] = sr.ModeImport
			} else if err != nil && !isNotFound(err) {
				return nil, fmt.Errorf("reading %q on the destination registry: %w", m.Subject, err)
			}
		default:
			return nil, fmt.Errorf("reading the mode of %q on the destination registry: %w", m.Subject, m.Err)
		}
	}
	return out, nil
}

// isNotFound reports a registry's "no such subject" or "no mode".
func isNotFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == 404
}

// save stores the pass's result while the lease holds, and reports
// whether it did.
func (ss *schemaSync) save(ctx context.Context, res *service.SchemaSyncResult) bool {
	r, s := ss.r, ss.r.s
	if !r.lease.Valid() {
		return false
	}
	sctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	err := s.cfg.Service.SaveSchemaSync(sctx, r.name, r.lease.Owner, r.lease.Epoch, res)
	if errors.Is(err, repo.ErrNotFound) {
		r.log.Info("schema sync: the lease moved on before the result was saved")
	} else if err != nil && ctx.Err() == nil {
		r.log.Warn("schema sync: saving the result failed", "err", err)
	}
	return err == nil
}
