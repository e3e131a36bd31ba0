package schemaregistry

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// Report says what one sync did, per subject and in total.
type Report struct {
	Subjects []SubjectReport // in the order they were synced

	Copied      int // versions written
	Present     int // versions the destination already had
	SoftDeleted int // versions soft-deleted on the destination
	Failed      int // subjects with an error
}

// SubjectReport is one subject's part of a Report.
type SubjectReport struct {
	Source      string
	Destination string
	Copied      []CopiedVersion // in the order written
	Present     int
	SoftDeleted []int
	// Compatibility is the level written this sync; zero when unchanged.
	Compatibility sr.CompatibilityLevel
	// ModeSet is true when this sync set the subject READONLY at its end.
	ModeSet bool
	// LeftInImport is true when the subject may still be in IMPORT mode:
	// a write failed and the registry could not be told READONLY. The next
	// sync resumes and sets it.
	LeftInImport bool
	Err          error
}

// CopiedVersion is a version written with the source's number and id.
type CopiedVersion struct {
	Version int
	ID      int
}

func (r *Report) add(s SubjectReport) {
	r.Subjects = append(r.Subjects, s)
	r.Copied += len(s.Copied)
	r.Present += s.Present
	r.SoftDeleted += len(s.SoftDeleted)
	if s.Err != nil {
		r.Failed++
	}
}

// Err joins the subjects' errors; nil when every subject synced.
func (r *Report) Err() error {
	var errs []error
	for _, s := range r.Subjects {
		if s.Err != nil {
			errs = append(errs, s.Err)
		}
	}
	return errors.Join(errs...)
}

// Changed reports whether the sync wrote anything.
func (r *Report) Changed() bool {
	for _, s := range r.Subjects {
		if len(s.Copied) > 0 || len(s.SoftDeleted) > 0 || s.Compatibility != 0 || s.ModeSet {
			return true
		}
	}
	return false
}

// String is the one-line summary an operator reads in a log or a status.
func (r *Report) String() string {
	if !r.Changed() && r.Failed == 0 {
		return fmt.Sprintf("schema sync: nothing to copy; %d subject(s) up to date, %d version(s) already on the destination",
			len(r.Subjects), r.Present)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "schema sync: %d version(s) copied, %d already present, %d soft-deleted; %d of %d subject(s) failed",
		r.Copied, r.Present, r.SoftDeleted, r.Failed, len(r.Subjects))
	for _, s := range r.Subjects {
		if s.Err != nil {
			fmt.Fprintf(&b, "\n  %v", s.Err)
		}
	}
	return b.String()
}
