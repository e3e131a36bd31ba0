package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// restoreTimeout bounds putting a subject back to READONLY after a failed
// write, which runs even when the sync's own context has ended.
const restoreTimeout = 10 * time.Second

// Sync copies the selected subjects from src to dst: PlanSync, then Apply.
// The error is PlanSync's (a bad selection, a source that cannot list its
// subjects); each subject's own failure is in the Report. Two syncs into
// the same destination subjects must not run at once: the caller holds the
// mirror's lease for it, as for the mirror's metadata sync.
func Sync(ctx context.Context, src, dst *sr.Client, sel Selection) (*Report, error) {
	p, err := PlanSync(ctx, src, dst, sel)
	if err != nil {
		return nil, err
	}
	return p.Apply(ctx), nil
}

// Apply writes the plan to the destination in two passes. The first, in
// dependency order, puts each subject with something to write in IMPORT
// mode (forced: it may hold versions already) and writes its missing
// versions, each with the source's id and version number. The second, in
// reverse order, soft-deletes what the source soft-deleted (a referrer
// before what it references, as a registry requires), sets the
// compatibility level, and leaves each subject READONLY.
//
// A subject that fails stops at its first failed write and is put back to
// READONLY; the versions written before stay, each whole (a registry
// writes a version at once), and the next sync resumes after them. Its
// failure fails every subject whose versions need one it did not write;
// other subjects still sync.
func (p *Plan) Apply(ctx context.Context) *Report {
	// What the destination holds, by destination subject, kept current as
	// versions are written, to check each reference before a write. A
	// subject that failed its plan after its destination was read (a
	// conflict at a later version) still counts with what it has.
	onDest := map[string]map[int]bool{}
	for _, sp := range p.Subjects {
		if sp.onDest != nil {
			onDest[sp.Destination] = sp.onDest
		}
	}
	reports := make([]SubjectReport, len(p.Subjects))
	importing := make([]bool, len(p.Subjects))
	for i, sp := range p.Subjects {
		reports[i], importing[i] = p.copyVersions(ctx, sp, onDest)
	}
	for i := len(p.Subjects) - 1; i >= 0; i-- {
		p.finish(ctx, p.Subjects[i], &reports[i], importing[i])
	}
	rep := &Report{}
	for _, r := range reports {
		rep.add(r)
	}
	return rep
}

// copyVersions is a subject's first pass. It reports whether the subject
// is left in IMPORT mode for the second.
func (p *Plan) copyVersions(ctx context.Context, sp SubjectPlan, onDest map[string]map[int]bool) (SubjectReport, bool) {
	r := SubjectReport{Source: sp.Source, Destination: sp.Destination, Present: sp.Present}
	if sp.Err != nil {
		r.Err = fmt.Errorf("subject %q: %w", sp.Source, sp.Err)
		return r, false
	}
	if len(sp.Copy) == 0 && len(sp.SoftDelete) == 0 && sp.Compatibility == 0 {
		return r, false
	}
	if err := SetMode(ctx, p.dst, []string{sp.Destination}, sr.ModeImport); err != nil {
		r.Err = fmt.Errorf("subject %q: nothing copied: %w", sp.Source, err)
		return r, false
	}
	if err := p.writeVersions(ctx, sp, onDest, &r); err != nil {
		r.Err = errors.Join(fmt.Errorf("subject %q: %w", sp.Source, err), p.restoreReadOnly(ctx, sp, &r))
		return r, false
	}
	return r, true
}

// finish is a subject's second pass.
func (p *Plan) finish(ctx context.Context, sp SubjectPlan, r *SubjectReport, importing bool) {
	if r.Err != nil || (!importing && !sp.SetReadOnly) {
		return
	}
	if importing {
		if err := p.writeDeletesAndCompatibility(ctx, sp, r); err != nil {
			r.Err = errors.Join(fmt.Errorf("subject %q: %w", sp.Source, err), p.restoreReadOnly(ctx, sp, r))
			return
		}
	}
	if err := SetMode(ctx, p.dst, []string{sp.Destination}, sr.ModeReadOnly); err != nil {
		r.Err = fmt.Errorf("subject %q: %w", sp.Source, err)
		if importing {
			// Once more, past the sync's own deadline or cancellation: a
			// subject must not stay open for imports when it can be closed.
			r.Err = errors.Join(r.Err, p.restoreReadOnly(ctx, sp, r))
		}
		return
	}
	r.ModeSet = true
}

// writeVersions copies the subject's missing versions, stopping at the
// first failure.
func (p *Plan) writeVersions(ctx context.Context, sp SubjectPlan, onDest map[string]map[int]bool, r *SubjectReport) error {
	for _, vc := range sp.Copy {
		for _, ref := range vc.Schema.References {
			if !onDest[ref.Subject][ref.Version] {
				return fmt.Errorf("version %d (id %d) not copied: it references %q version %d, which is not on the destination as on the source (see that subject's error); %d of the %d missing versions were copied before it",
					vc.Version, vc.ID, ref.Subject, ref.Version, len(r.Copied), len(sp.Copy))
			}
		}
		id, err := p.dst.RegisterSchema(ctx, sp.Destination, vc.Schema, vc.ID, vc.Version)
		if err != nil {
			return fmt.Errorf("writing version %d (id %d) as %q: %w; %d of the %d missing versions were copied before it",
				vc.Version, vc.ID, sp.Destination, err, len(r.Copied), len(sp.Copy))
		}
		if id != vc.ID {
			// The registry took the schema but numbered it itself: records
			// naming vc.ID would not find it. Say so loudly; the next plan
			// sees the version and reports the conflict.
			return fmt.Errorf("writing version %d as %q: the destination registered it under id %d instead of %d (is IMPORT mode honoured?)",
				vc.Version, sp.Destination, id, vc.ID)
		}
		if onDest[sp.Destination] == nil {
			onDest[sp.Destination] = map[int]bool{}
		}
		onDest[sp.Destination][vc.Version] = true
		r.Copied = append(r.Copied, CopiedVersion{Version: vc.Version, ID: vc.ID})
	}
	return nil
}

// writeDeletesAndCompatibility soft-deletes the versions the source has
// soft-deleted (those just copied, and those deleted since an earlier
// copy), then sets the compatibility level.
func (p *Plan) writeDeletesAndCompatibility(ctx context.Context, sp SubjectPlan, r *SubjectReport) error {
	var deletes []int
	for _, vc := range sp.Copy {
		if vc.Deleted {
			deletes = append(deletes, vc.Version)
		}
	}
	deletes = append(deletes, sp.SoftDelete...)
	for _, v := range deletes {
		if err := p.dst.DeleteSchema(ctx, sp.Destination, v, sr.SoftDelete); err != nil {
			return fmt.Errorf("soft-deleting version %d of %q, as on the source: %w", v, sp.Destination, err)
		}
		r.SoftDeleted = append(r.SoftDeleted, v)
	}
	if sp.Compatibility != 0 {
		res := p.dst.SetCompatibility(ctx, sr.SetCompatibility{Level: sp.Compatibility}, sp.Destination)
		if err := res[0].Err; err != nil {
			return fmt.Errorf("setting compatibility %s on %q: %w", sp.Compatibility, sp.Destination, err)
		}
		r.Compatibility = sp.Compatibility
	}
	return nil
}

// restoreReadOnly puts a subject whose write failed back to READONLY, so no
// producer can register into it and no half-done import stays open. It runs
// under its own timeout even when ctx has ended. When the registry cannot be
// reached the subject stays in IMPORT mode until the next sync, which
// resumes the copy and sets READONLY at its end; the report says so.
func (p *Plan) restoreReadOnly(ctx context.Context, sp SubjectPlan, r *SubjectReport) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	if err := SetMode(rctx, p.dst, []string{sp.Destination}, sr.ModeReadOnly); err != nil {
		r.LeftInImport = true
		return fmt.Errorf("%q is left in IMPORT mode until the next sync (putting it back to READONLY failed, timeout %s: %w)", sp.Destination, restoreTimeout, err)
	}
	r.ModeSet = true
	return nil
}
