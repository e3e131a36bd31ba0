package schemaregistry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// subjectState is what a registry holds of one subject: every version, the
// soft-deleted ones included, since a record written while a version was
// live still names its id.
type subjectState struct {
	exists   bool
	versions []sr.SubjectSchema // by version number
	deleted  map[int]bool       // soft-deleted versions
}

func (s subjectState) byVersion(v int) (sr.SubjectSchema, bool) {
	i, ok := slices.BinarySearchFunc(s.versions, v, func(ss sr.SubjectSchema, v int) int { return ss.Version - v })
	if !ok {
		return sr.SubjectSchema{}, false
	}
	return s.versions[i], true
}

// readSubject reads a subject's versions, soft-deleted ones included. A
// subject the registry does not have is not an error: exists is false.
func readSubject(ctx context.Context, cl *sr.Client, subject string) (subjectState, error) {
	all, err := cl.SubjectVersions(sr.WithParams(ctx, sr.ShowDeleted), subject)
	if isCode(err, sr.ErrSubjectNotFound) {
		return subjectState{}, nil
	}
	if err != nil {
		return subjectState{}, fmt.Errorf("listing versions of %q: %w", subject, err)
	}
	active, err := cl.SubjectVersions(ctx, subject)
	// A subject soft-deleted as a whole answers as if it did not exist.
	if err != nil && !isCode(err, sr.ErrSubjectNotFound) && !isCode(err, sr.ErrSubjectSoftDeleted) {
		return subjectState{}, fmt.Errorf("listing live versions of %q: %w", subject, err)
	}
	slices.Sort(all)
	st := subjectState{exists: true, deleted: map[int]bool{}}
	for _, v := range all {
		if !slices.Contains(active, v) {
			st.deleted[v] = true
		}
		ss, err := cl.SchemaByVersion(sr.WithParams(ctx, sr.ShowDeleted), subject, v)
		if err != nil {
			return subjectState{}, fmt.Errorf("reading %q version %d: %w", subject, v, err)
		}
		ss.Version = v // the registry echoes it; the request is what counts
		st.versions = append(st.versions, ss)
	}
	return st, nil
}

// readMode returns a subject's mode, the registry's global one when the
// subject has none of its own.
func readMode(ctx context.Context, cl *sr.Client, subject string) (sr.Mode, error) {
	res := cl.Mode(sr.WithParams(ctx, sr.DefaultToGlobal), subject)
	if err := res[0].Err; err != nil {
		// sr.Mode's zero value is IMPORT: never read a failed result.
		return 0, fmt.Errorf("reading the mode of %q: %w", subject, err)
	}
	return res[0].Mode, nil
}

// readCompatibility returns the level that applies to a subject: its own,
// else the registry's global one, which is what its producers live under.
// Zero means the registry would not say.
func readCompatibility(ctx context.Context, cl *sr.Client, subject string) (sr.CompatibilityLevel, error) {
	res := cl.Compatibility(sr.WithParams(ctx, sr.DefaultToGlobal), subject)
	err := res[0].Err
	if isCode(err, sr.ErrSubjectNotFound) || isCode(err, sr.ErrSubjectLevelCompatibilityNotConfigured) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the compatibility of %q: %w", subject, err)
	}
	return res[0].Level, nil
}

// idHolder is what the destination keeps under a schema id.
type idHolder struct {
	found   bool
	schema  sr.Schema
	subject string // one subject that uses it, for the operator
	version int
}

// lookupID reads the schema a registry keeps under id in the given context
// ("" for the default one).
func lookupID(ctx context.Context, cl *sr.Client, regContext string, id int) (idHolder, error) {
	if regContext != "" {
		ctx = sr.InContext(ctx, regContext)
	}
	s, err := cl.SchemaByID(ctx, id)
	if isCode(err, sr.ErrSchemaNotFound) {
		return idHolder{}, nil
	}
	if err != nil {
		return idHolder{}, fmt.Errorf("looking up schema id %d on the destination: %w", id, err)
	}
	h := idHolder{found: true, schema: s}
	uses, err := cl.SchemaVersionsByID(sr.WithParams(ctx, sr.ShowDeleted), id)
	if err == nil && len(uses) > 0 {
		slices.SortFunc(uses, func(a, b sr.SubjectVersion) int {
			return cmp.Or(strings.Compare(a.Subject, b.Subject), a.Version-b.Version)
		})
		h.subject, h.version = uses[0].Subject, uses[0].Version
	}
	// Without the holder's name the conflict is still a conflict: the
	// message then says "another subject".
	return h, nil
}

// isCode reports whether err is the registry's answer with want's code.
func isCode(err error, want *sr.Error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.ErrorCode == want.Code
}
