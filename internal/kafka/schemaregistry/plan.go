package schemaregistry

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// Plan is what a sync would write, read from both registries and not yet
// applied. PlanSync builds it; Apply writes it. Between the two nothing is
// written, so a Plan is also a dry run.
type Plan struct {
	dst *sr.Client
	// Subjects in dependency order: each after every subject its versions
	// reference, so a reference always exists on the destination before
	// the version that needs it is written.
	Subjects []SubjectPlan
}

// SubjectPlan is one subject's part of a Plan.
type SubjectPlan struct {
	Source      string // the subject on the source
	Destination string // its name on the destination, context-qualified
	// Copy lists the versions the destination lacks, in version order.
	Copy []VersionCopy
	// Present counts the source's versions the destination already has,
	// with the same id and schema.
	Present int
	// SoftDelete lists versions both have whose source copy was
	// soft-deleted since they were copied.
	SoftDelete []int
	// Compatibility is the level to write on the destination subject; zero
	// when the destination's already matches (or the source would not say).
	Compatibility sr.CompatibilityLevel
	// SetReadOnly is set when the destination subject is not READONLY.
	SetReadOnly bool
	// Err is why this subject cannot be synced (a conflict, a registry
	// that failed to answer); nothing is written for it.
	Err error

	references []string     // source subjects its versions reference
	onDest     map[int]bool // versions the destination has as the source has them
}

// VersionCopy is one version to write, with the source's id and number.
type VersionCopy struct {
	Version int
	ID      int
	Schema  sr.Schema // references renamed for the destination
	Deleted bool      // soft-deleted on the source: written, then soft-deleted
}

// PlanSync reads the selected subjects from src, and what dst holds of
// them, and returns what a sync would write. Only a bad selection, or a
// source that cannot list its subjects for SubjectRegex, fails the whole
// plan; anything else fails one subject, in its SubjectPlan.Err.
func PlanSync(ctx context.Context, src, dst *sr.Client, sel Selection) (*Plan, error) {
	re, err := sel.validate()
	if err != nil {
		return nil, err
	}
	roots := sel.topicSubjects()
	if re != nil {
		all, err := src.Subjects(sr.WithParams(ctx, sr.ShowDeleted))
		if err != nil {
			return nil, fmt.Errorf("listing the source registry's subjects for the subject regex: %w", err)
		}
		for _, s := range all {
			// Subjects of other source contexts are not mirrored: their
			// ids are another namespace than the records' registry.
			if !strings.HasPrefix(s, ":") && re.MatchString(s) && !slices.Contains(roots, s) {
				roots = append(roots, s)
			}
		}
	}

	// Read the selected subjects, then every subject they reference, to the
	// end of the chain.
	type sourceSubject struct {
		state        subjectState
		err          error
		referencedBy string // the first subject that referenced it, if it was not selected
	}
	read := map[string]*sourceSubject{}
	var order []string
	queue := slices.Clone(roots)
	referrer := map[string]string{}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, seen := read[name]; seen {
			continue
		}
		st, err := readSubject(ctx, src, name)
		if err != nil {
			err = fmt.Errorf("source registry: %w", err)
		}
		s := &sourceSubject{state: st, err: err, referencedBy: referrer[name]}
		read[name] = s
		if err == nil && !st.exists {
			if s.referencedBy == "" {
				// A topic with no key (or no value) schema: nothing to copy.
				continue
			}
			s.err = fmt.Errorf("subject %q is referenced by %q, but the source registry does not have it", name, s.referencedBy)
		}
		order = append(order, name)
		for _, v := range st.versions {
			for _, r := range v.References {
				if strings.HasPrefix(r.Subject, ":") {
					continue // another source context: refused below
				}
				if _, ok := referrer[r.Subject]; !ok {
					referrer[r.Subject] = name
				}
				queue = append(queue, r.Subject)
			}
		}
	}

	p := &Plan{dst: dst}
	for _, name := range order {
		s := read[name]
		sp := SubjectPlan{Source: name, Destination: sel.DestinationSubject(name), Err: s.err}
		for _, v := range s.state.versions {
			for _, r := range v.References {
				if strings.HasPrefix(r.Subject, ":") && sp.Err == nil {
					sp.Err = fmt.Errorf("version %d references %q, in another source context, which kmirror does not copy", v.Version, r.Subject)
				}
				if !slices.Contains(sp.references, r.Subject) {
					sp.references = append(sp.references, r.Subject)
				}
			}
		}
		if sp.Err == nil {
			sp.Err = sel.planSubject(ctx, src, dst, &sp, s.state)
		}
		p.Subjects = append(p.Subjects, sp)
	}
	p.Subjects = dependencyOrder(p.Subjects)
	return p, nil
}

// planSubject compares a subject's source versions with the destination's
// and fills sp. It returns an error, and plans no write, at the first
// version that conflicts: versions are written in order, so nothing after a
// conflict could be written anyway.
func (sel Selection) planSubject(ctx context.Context, src, dst *sr.Client, sp *SubjectPlan, source subjectState) error {
	dest, err := readSubject(ctx, dst, sp.Destination)
	if err != nil {
		return fmt.Errorf("destination registry: %w", err)
	}
	// Only versions the destination has as the source has them count as
	// there: a reference to a version number that holds another schema on
	// the destination would resolve to the wrong schema.
	sp.onDest = map[int]bool{}
	ids := map[int]idHolder{}
	for _, v := range source.versions {
		want := sel.destinationSchema(v.Schema)
		if have, ok := dest.byVersion(v.Version); ok {
			if have.ID != v.ID || !sameSchema(have.Schema, want, sel.context()) {
				return &VersionConflictError{Source: sp.Source, Destination: sp.Destination, Version: v.Version, SourceID: v.ID, DestinationID: have.ID}
			}
			sp.Present++
			sp.onDest[v.Version] = true
			if source.deleted[v.Version] && !dest.deleted[v.Version] {
				sp.SoftDelete = append(sp.SoftDelete, v.Version)
			}
			continue
		}
		h, ok := ids[v.ID]
		if !ok {
			if h, err = lookupID(ctx, dst, sel.context(), v.ID); err != nil {
				return err
			}
			ids[v.ID] = h
		}
		if h.found && !sameSchema(h.schema, want, sel.context()) {
			return &IDConflictError{
				ID: v.ID, Source: sp.Source, SourceVersion: v.Version, Destination: sp.Destination,
				Holder: h.subject, HolderVersion: h.version, Context: sel.context(),
			}
		}
		sp.Copy = append(sp.Copy, VersionCopy{Version: v.Version, ID: v.ID, Schema: want, Deleted: source.deleted[v.Version]})
	}

	srcLevel, err := readCompatibility(ctx, src, sp.Source)
	if err != nil {
		return fmt.Errorf("source registry: %w", err)
	}
	if srcLevel != 0 {
		dstLevel, err := readCompatibility(ctx, dst, sp.Destination)
		if err != nil {
			return fmt.Errorf("destination registry: %w", err)
		}
		if dstLevel != srcLevel {
			sp.Compatibility = srcLevel
		}
	}
	mode, err := readMode(ctx, dst, sp.Destination)
	if err != nil {
		return fmt.Errorf("destination registry: %w", err)
	}
	sp.SetReadOnly = mode != sr.ModeReadOnly
	return nil
}

// dependencyOrder sorts subjects so that each comes after the subjects it
// references, keeping the given order otherwise. Subjects in a reference
// cycle cannot be ordered: they fail with an error naming the cycle.
func dependencyOrder(subjects []SubjectPlan) []SubjectPlan {
	index := map[string]int{}
	for i, s := range subjects {
		index[s.Source] = i
	}
	const (
		unvisited = iota
		visiting
		done
	)
	state := make([]int, len(subjects))
	var out []SubjectPlan
	var visit func(i int, path []string)
	visit = func(i int, path []string) {
		switch state[i] {
		case done:
			return
		case visiting:
			// Mark every subject of the cycle; they are emitted when their
			// own visits finish.
			start := slices.Index(path, subjects[i].Source)
			cycle := append(slices.Clone(path[start:]), subjects[i].Source)
			for _, name := range cycle {
				s := &subjects[index[name]]
				if s.Err == nil {
					s.Err = fmt.Errorf("reference cycle %s: the versions cannot be written in an order where every reference exists", strings.Join(cycle, " -> "))
				}
			}
			return
		}
		state[i] = visiting
		for _, ref := range subjects[i].references {
			if j, ok := index[ref]; ok && j != i {
				visit(j, append(path, subjects[i].Source))
			}
		}
		state[i] = done
		out = append(out, subjects[i])
	}
	for i := range subjects {
		visit(i, nil)
	}
	return out
}
