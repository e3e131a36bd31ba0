package schemaregistry

import (
	"fmt"
)

// IDConflictError says that the destination already uses a schema id for
// another schema, so the version that needs the id was not copied. Records
// carrying that id would decode with the wrong schema after a failover, so
// nothing is overwritten: an operator has to choose (a context per source,
// or moving the other schema away).
type IDConflictError struct {
	ID            int
	Source        string // the source subject whose version needs ID
	SourceVersion int
	Destination   string // the destination subject it was to be written under
	Holder        string // a destination subject that holds ID; empty if the registry did not say
	HolderVersion int
	Context       string // the destination context, "" for the default
}

func (e *IDConflictError) Error() string {
	holder := "another subject"
	if e.Holder != "" {
		holder = fmt.Sprintf("subject %q version %d", e.Holder, e.HolderVersion)
	}
	where := "the destination registry"
	if e.Context != "" {
		where = fmt.Sprintf("the destination registry's context %s", e.Context)
	}
	return fmt.Sprintf("schema id %d conflict: source subject %q version %d needs id %d as %q, but %s already uses it for %s with a different schema; nothing copied for this subject, nothing overwritten",
		e.ID, e.Source, e.SourceVersion, e.ID, e.Destination, where, holder)
}

// VersionConflictError says that the destination subject already has the
// version number with another schema or id: the two registries' histories
// of the subject differ (someone wrote to the destination, or the source
// was rebuilt), and the copy stops rather than overwrite.
type VersionConflictError struct {
	Source        string
	Destination   string
	Version       int
	SourceID      int
	DestinationID int
}

func (e *VersionConflictError) Error() string {
	what := "a different schema"
	if e.SourceID != e.DestinationID {
		what = fmt.Sprintf("schema id %d where the source has id %d", e.DestinationID, e.SourceID)
	}
	return fmt.Sprintf("version %d conflict: destination subject %q already has version %d with %s (source subject %q); nothing copied for this subject, nothing overwritten",
		e.Version, e.Destination, e.Version, what, e.Source)
}
