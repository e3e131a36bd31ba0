package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"kmirror/internal/kafka/schemaregistry"
	"kmirror/repo"
)

// Event kinds written by the Schema Registry sync (docs/design.md, "Schema
// Registry"). Each is recorded when something changed, never once a pass.
const (
	// EventSchemasCopied: versions were written to the destination registry.
	EventSchemasCopied = "schemas.copied"
	// EventSchemaSyncFailed: a sync failed, or failed otherwise than the
	// last one did.
	EventSchemaSyncFailed = "schemas.sync_failed"
	// EventSchemaSyncRecovered: a sync succeeded after one that failed.
	EventSchemaSyncRecovered = "schemas.sync_recovered"
	// EventSchemasWritable: destination subjects were made READWRITE
	// because their topics were removed (failed over).
	EventSchemasWritable = "schemas.writable"
)

// Schema subject modes as the sync leaves them on the destination.
const (
	SchemaModeReadOnly  = "READONLY"
	SchemaModeReadWrite = "READWRITE"
)

// SchemaSyncResult is a mirror's last Schema Registry sync, stored by the
// holder of its metadata-sync lease.
type SchemaSyncResult struct {
	Instance   string    `json:"instance" example:"host-4211"`
	Epoch      int64     `json:"epoch" example:"3"`
	StartedAt  time.Time `json:"started_at" format:"date-time"`
	FinishedAt time.Time `json:"finished_at" format:"date-time"`
	// OK: every subject synced and no error stopped the pass.
	OK bool `json:"ok"`
	// Error is why the pass did not sync at all: no destination registry,
	// a source registry that cannot be reached or listed, a bad setting.
	Error    string          `json:"error,omitempty" example:"source registry: Get \"http://sr.east:8081/subjects\": connection refused"`
	Subjects []SchemaSubject `json:"subjects"`
	// Versions counts the versions on the destination as on the source,
	// over every subject; Copied and SoftDeleted this pass's writes.
	Versions    int `json:"versions" example:"12"`
	Copied      int `json:"copied" example:"1"`
	SoftDeleted int `json:"soft_deleted" example:"0"`
	Failed      int `json:"failed" example:"0"`
	// LastOKAt is when a pass last succeeded, this one or an earlier one.
	LastOKAt *time.Time `json:"last_ok_at,omitempty" format:"date-time"`
} // @name SchemaSyncResult

// SchemaSubject is one subject's part of a SchemaSyncResult.
type SchemaSubject struct {
	Source string `json:"source" example:"orders-value"`
	// Destination is the subject's name on the destination registry, with
	// the mirror's topic prefix and context.
	Destination string `json:"destination" example:":.east:east.orders-value"`
	// Versions on the destination as on the source.
	Versions int `json:"versions" example:"3"`
	// Copied lists this pass's writes as "v<version> id <id>".
	Copied []string `json:"copied,omitempty" example:"v3 id 117"`
	// Mode is READONLY while the subject's topic is mirrored, READWRITE
	// once it was failed over; empty when the sync could not set it.
	Mode  string `json:"mode,omitempty" enums:"READONLY,READWRITE" example:"READONLY"`
	Error string `json:"error,omitempty"`
} // @name SchemaSubject

// AddReport adds a sync's report to the result, its subjects in mode.
func (r *SchemaSyncResult) AddReport(rep *schemaregistry.Report, mode string) {
	for _, s := range rep.Subjects {
		sub := SchemaSubject{Source: s.Source, Destination: s.Destination, Versions: s.Present + len(s.Copied)}
		for _, c := range s.Copied {
			sub.Copied = append(sub.Copied, fmt.Sprintf("v%d id %d", c.Version, c.ID))
		}
		if s.Err != nil {
			sub.Error = s.Err.Error()
		} else {
			sub.Mode = mode
		}
		r.Subjects = append(r.Subjects, sub)
	}
	r.Versions += rep.Present + rep.Copied
	r.Copied += rep.Copied
	r.SoftDeleted += rep.SoftDeleted
	r.Failed += rep.Failed
}

// Finish sorts the subjects and sets OK.
func (r *SchemaSyncResult) Finish() {
	slices.SortFunc(r.Subjects, func(a, b SchemaSubject) int { return strings.Compare(a.Destination, b.Destination) })
	r.OK = r.Error == "" && r.Failed == 0
	if r.OK {
		at := r.FinishedAt
		r.LastOKAt = &at
	}
}

// errorSummary is what an operator reads of a failed result: the pass's
// error, or its failed subjects' errors.
func (r *SchemaSyncResult) errorSummary() string {
	if r.Error != "" {
		return r.Error
	}
	var errs []string
	for _, s := range r.Subjects {
		if s.Error != "" {
			errs = append(errs, s.Error)
		}
	}
	return strings.Join(errs, "; ")
}

// SchemaSync returns a mirror's last Schema Registry sync, nil before the
// first one or when the mirror names no source registry.
func (s *core) SchemaSync(ctx context.Context, mirror string) (*SchemaSyncResult, error) {
	raw, err := repo.MirrorsSchemaSync(ctx, s.pool, mirror)
	if errors.Is(err, repo.ErrNotFound) {
		return nil, mirrorNotFound(mirror)
	}
	if err != nil || raw == nil {
		return nil, err
	}
	var res SchemaSyncResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("mirror %s: reading its schema sync result: %w", mirror, err)
	}
	return &res, nil
}

// SaveSchemaSync stores a mirror's Schema Registry sync result (nil clears
// it) while owner holds its metadata-sync lease at epoch, and records an
// event for what changed since the result before it. repo.ErrNotFound
// means the lease moved on: nothing is stored.
func (s *Workers) SaveSchemaSync(ctx context.Context, mirror, owner string, epoch int64, res *SchemaSyncResult) error {
	return repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		prevRaw, err := repo.MirrorsSchemaSyncForUpdate(ctx, tx, mirror)
		if err != nil {
			return err
		}
		var prev *SchemaSyncResult
		if prevRaw != nil {
			prev = &SchemaSyncResult{}
			if err := json.Unmarshal(prevRaw, prev); err != nil {
				prev = nil // an unreadable result is replaced, and counts as none
			}
		}
		var raw json.RawMessage
		if res != nil {
			if !res.OK && prev != nil && res.LastOKAt == nil {
				res.LastOKAt = prev.LastOKAt
			}
			if raw, err = json.Marshal(res); err != nil {
				return err
			}
		}
		if err := repo.MirrorsSaveSchemaSync(ctx, tx, mirror, owner, epoch, raw); err != nil {
			return err
		}
		for _, e := range schemaSyncEvents(mirror, prev, res) {
			if err := repo.EventsInsert(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// maxEventSubjects bounds the subjects an event's message names.
const maxEventSubjects = 10

// schemaSyncEvents returns the events for the change from prev to res.
func schemaSyncEvents(mirror string, prev, res *SchemaSyncResult) []repo.Event {
	if res == nil {
		return nil
	}
	var out []repo.Event
	var copied []string
	for _, sub := range res.Subjects {
		for _, c := range sub.Copied {
			copied = append(copied, sub.Destination+" "+c)
		}
	}
	if len(copied) > 0 || res.SoftDeleted > 0 {
		out = append(out, repo.Event{Kind: EventSchemasCopied, Mirror: mirror,
			Message: fmt.Sprintf("copied %d schema version(s) into the destination registry with their ids (%d soft-deleted as on the source): %s",
				res.Copied, res.SoftDeleted, listSome(copied))})
	}
	switch {
	case !res.OK && (prev == nil || prev.OK || prev.errorSummary() != res.errorSummary()):
		out = append(out, repo.Event{Kind: EventSchemaSyncFailed, Mirror: mirror,
			Message: "schema sync failed: " + res.errorSummary()})
	case res.OK && prev != nil && !prev.OK:
		out = append(out, repo.Event{Kind: EventSchemaSyncRecovered, Mirror: mirror,
			Message: fmt.Sprintf("schema sync succeeded again: %d subject(s), %d version(s) in step", len(res.Subjects), res.Versions)})
	}
	wasWritable := map[string]bool{}
	if prev != nil {
		for _, sub := range prev.Subjects {
			wasWritable[sub.Destination] = sub.Mode == SchemaModeReadWrite
		}
	}
	var writable []string
	for _, sub := range res.Subjects {
		if sub.Mode == SchemaModeReadWrite && !wasWritable[sub.Destination] {
			writable = append(writable, sub.Destination)
		}
	}
	if len(writable) > 0 {
		out = append(out, repo.Event{Kind: EventSchemasWritable, Mirror: mirror,
			Message: fmt.Sprintf("%d destination subject(s) are READWRITE, their topics removed (failed over): %s",
				len(writable), listSome(writable))})
	}
	return out
}

// listSome joins up to maxEventSubjects names, saying how many more.
func listSome(names []string) string {
	if len(names) <= maxEventSubjects {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxEventSubjects], ", "), len(names)-maxEventSubjects)
}
