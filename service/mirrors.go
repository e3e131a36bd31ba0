package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"kmirror/repo"
)

// Event kinds written by the control plane.
const (
	EventMirrorCreated = "mirror.created"
	EventMirrorUpdated = "mirror.updated"
	EventMirrorDeleted = "mirror.deleted"
	EventTopicsAdded   = "topics.added"
	EventTopicsPaused  = "topics.paused"
	EventTopicsResumed = "topics.resumed"
	EventTopicsRemoved = "topics.removed"
	// EventStateRestored is kmirror restore rebuilding the database.
	EventStateRestored = "state.restored"
)

// EventKinds lists every event kind, for the API's enum.
var EventKinds = []string{EventMirrorCreated, EventMirrorUpdated, EventMirrorDeleted,
	EventSyncRequested, EventTopicsAdded, EventTopicsPaused, EventTopicsResumed,
	EventTopicsRemoved, EventTopicsAutoAdded, EventTopicsSourceDeleted,
	EventTopicPartitionsAdded, EventPartitionState, EventPartitionOwner,
	EventPartitionRealigned, EventStateRestored, EventSchemasCopied, EventSchemaSyncFailed,
	EventSchemaSyncRecovered, EventSchemasWritable}

// MirrorInput is a new mirror as an operator gives it.
type MirrorInput struct {
	Name   string
	Source SourceInput
	Config map[string]string
}

// Mirror is a mirror as the service hands it out. Its source carries no
// secrets, only whether each one is set.
type Mirror struct {
	Name   string
	Source SourceRecord
	// Config holds the keys set on this mirror.
	Config map[string]string
	// LastSync is the last metadata sync pass's SyncResult as JSON, empty
	// before the first.
	LastSync json.RawMessage
	// SchemaSync is the last Schema Registry sync's SchemaSyncResult as
	// JSON, empty before the first or without a source registry.
	SchemaSync json.RawMessage
	// State is MirrorReady, or MirrorNeedsCredentials after a restore until
	// the secrets in MissingCredentials are entered again.
	State              MirrorState
	MissingCredentials []string
	// Status summarizes the mirror's topics and partitions.
	Status    MirrorStatus
	CreatedAt time.Time
	UpdatedAt time.Time
	// Incarnation tells this mirror from earlier, deleted ones of its name:
	// each creation takes a new one, and its events carry it.
	Incarnation int64
}

func mirrorOf(m repo.Mirror) Mirror {
	out := Mirror{Name: m.Name, Source: RedactedSource(m), Config: m.Config, LastSync: m.LastSync, SchemaSync: m.SchemaSync,
		State: MirrorReady, MissingCredentials: m.MissingCredentials,
		Status: emptyStatus(), CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, Incarnation: m.Incarnation}
	if len(m.MissingCredentials) > 0 {
		out.State = MirrorNeedsCredentials
	}
	return out
}

// WriteOpts are the query options of a mirror create or update.
type WriteOpts struct {
	// DryRun validates (and checks connectivity) without writing anything.
	DryRun bool
	// SkipConnectivityCheck does not contact the source cluster.
	SkipConnectivityCheck bool
}

// CreateMirror validates a mirror, checks that its source answers, and
// stores it.
func (s *Control) CreateMirror(ctx context.Context, in MirrorInput, opts WriteOpts) (Mirror, error) {
	if in.Source.SecurityProtocol == "" {
		in.Source.SecurityProtocol = "PLAINTEXT"
	}
	var v validation
	validateMirrorName(&v, in.Name)
	validateSource(&v, in.Source)
	validateConfig(&v, in.Config)
	if err := v.err(); err != nil {
		return Mirror{}, err
	}
	if err := s.requireKey(in.Source); err != nil {
		return Mirror{}, err
	}
	m := repo.Mirror{Name: in.Name, Source: in.Source, Config: maps.Clone(in.Config)}
	if m.Config == nil {
		m.Config = map[string]string{}
	}
	if !opts.SkipConnectivityCheck {
		if _, err := s.sourceTopics(ctx, ConnOf(m)); err != nil {
			return Mirror{}, err
		}
	}
	if opts.DryRun {
		if _, err := repo.MirrorsGet(ctx, s.pool, m.Name); err == nil {
			return Mirror{}, mirrorExists(m.Name)
		}
		return mirrorOf(m), nil
	}
	sealed, err := s.sealSecrets(m)
	if err != nil {
		return Mirror{}, err
	}
	var out repo.Mirror
	err = repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if out, err = repo.MirrorsInsert(ctx, tx, sealed); err != nil {
			if errors.Is(err, repo.ErrConflict) {
				return mirrorExists(m.Name)
			}
			return err
		}
		return recordChange(ctx, tx, repo.Event{Kind: EventMirrorCreated, Mirror: out.Name,
			Message: fmt.Sprintf("mirror %s created (source %s)", out.Name, out.BootstrapServers)},
			MirrorKey(out.Name), mirrorRecord(out))
	})
	if err != nil {
		return Mirror{}, err
	}
	s.log.InfoContext(ctx, "mirror created", "mirror", out.Name, "source", out.BootstrapServers)
	return mirrorOf(out), nil
}

func mirrorExists(name string) error {
	return &ConflictError{Detail: fmt.Sprintf("mirror %s already exists", name)}
}

func mirrorNotFound(name string) error {
	return &NotFoundError{Kind: "mirror", Detail: fmt.Sprintf("mirror %s does not exist", name)}
}

// GetMirror returns one mirror with its status.
func (s *Control) GetMirror(ctx context.Context, name string) (Mirror, error) {
	m, err := s.mirror(ctx, name)
	if err != nil {
		return Mirror{}, err
	}
	out := mirrorOf(m)
	if out.Status, err = s.mirrorStatus(ctx, s.pool, name); err != nil {
		return Mirror{}, err
	}
	return out, nil
}

// mirror returns one mirror's row, secrets included, for the service's own use.
func (s *Control) mirror(ctx context.Context, name string) (repo.Mirror, error) {
	m, err := repo.MirrorsGet(ctx, s.pool, name)
	if errors.Is(err, repo.ErrNotFound) {
		return m, mirrorNotFound(name)
	}
	return m, err
}

// ListMirrors returns every mirror with its status.
func (s *Control) ListMirrors(ctx context.Context) ([]Mirror, error) {
	list, err := repo.MirrorsList(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	statuses, err := s.mirrorStatuses(ctx, s.pool, "")
	if err != nil {
		return nil, err
	}
	out := make([]Mirror, len(list))
	for i, m := range list {
		out[i] = mirrorOf(m)
		if st, ok := statuses[m.Name]; ok { // else created between the two queries
			out[i].Status = st
		}
	}
	return out, nil
}

// SourcePatch replaces the source fields that are non-nil.
type SourcePatch struct {
	BootstrapServers, SecurityProtocol, SASLMechanism, SASLUsername, SASLPassword,
	TLSCAPEM, TLSCertPEM, TLSKeyPEM, TLSServerName *string

	AWSAccessKeyID, AWSSecretAccessKey, AWSSessionToken, AWSRegion *string

	OAuthTokenEndpointURL, OAuthClientID, OAuthClientSecret, OAuthScope *string
	// OAuthExtensions replaces the whole set; an empty one clears it.
	OAuthExtensions *map[string]string

	// SchemaRegistry patches the source Schema Registry's fields.
	SchemaRegistry *SchemaRegistryPatch
}

// MirrorPatch is a merge patch of a mirror: Config entries set to nil return
// to their defaults.
type MirrorPatch struct {
	Source *SourcePatch
	Config map[string]*string
}

// UpdateMirror applies a patch. The source is checked before any row is
// locked, so a slow or unreachable source never holds a lock (or a pooled
// connection) that leases, checkpoints or other requests wait on; the row
// is then locked and, if another update came first, the patch is applied
// again to the newer row.
func (s *Control) UpdateMirror(ctx context.Context, name string, patch MirrorPatch, opts WriteOpts) (Mirror, error) {
	for attempt := 0; ; attempt++ {
		cur, err := repo.MirrorsGet(ctx, s.pool, name)
		if errors.Is(err, repo.ErrNotFound) {
			return Mirror{}, mirrorNotFound(name)
		} else if err != nil {
			return Mirror{}, err
		}
		// In clear, so a patch of one TLS field is checked against the other.
		plain, err := s.openSecrets(cur)
		if err != nil {
			return Mirror{}, err
		}
		m, err := patchMirror(plain, patch)
		if err != nil {
			return Mirror{}, err
		}
		if err := s.requirePatchKey(patch.Source); err != nil {
			return Mirror{}, err
		}
		if patch.Source != nil && !opts.SkipConnectivityCheck {
			if _, err := s.sourceTopics(ctx, ConnOf(m)); err != nil {
				return Mirror{}, err
			}
		}
		if opts.DryRun {
			if err := checkPrefixFixed(ctx, s.pool, cur, m); err != nil {
				return Mirror{}, err
			}
			out := mirrorOf(m)
			out.Status, err = s.mirrorStatus(ctx, s.pool, name)
			return out, err
		}
		sealed, err := s.sealSecrets(m)
		if err != nil {
			return Mirror{}, err
		}
		var out repo.Mirror
		var status MirrorStatus
		err = repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
			locked, err := repo.MirrorsGetForUpdate(ctx, tx, name)
			if errors.Is(err, repo.ErrNotFound) {
				return mirrorNotFound(name)
			} else if err != nil {
				return err
			}
			if !locked.UpdatedAt.Equal(cur.UpdatedAt) {
				return errMirrorChanged
			}
			if err := checkPrefixFixed(ctx, tx, locked, m); err != nil {
				return err
			}
			if out, err = repo.MirrorsUpdate(ctx, tx, sealed); err != nil {
				return err
			}
			if status, err = s.mirrorStatus(ctx, tx, name); err != nil {
				return err
			}
			return recordChange(ctx, tx, repo.Event{Kind: EventMirrorUpdated, Mirror: name,
				Message: fmt.Sprintf("mirror %s updated", name)}, MirrorKey(name), mirrorRecord(out))
		})
		if errors.Is(err, errMirrorChanged) {
			if attempt < 5 {
				continue // checked against an older row: check again
			}
			return Mirror{}, &ConflictError{Detail: fmt.Sprintf("mirror %s kept changing during the update; try again", name)}
		}
		if err != nil {
			return Mirror{}, err
		}
		updated := mirrorOf(out)
		updated.Status = status
		return updated, nil
	}
}

// errMirrorChanged: the mirror was updated between the check and the lock.
var errMirrorChanged = errors.New("the mirror changed during the update; try again")

// patchMirror applies a patch to a mirror row and validates the result.
func patchMirror(m repo.Mirror, patch MirrorPatch) (repo.Mirror, error) {
	src := m.Source
	if p := patch.Source; p != nil {
		for dst, val := range map[*string]*string{
			&src.BootstrapServers: p.BootstrapServers, &src.SecurityProtocol: p.SecurityProtocol,
			&src.SASLMechanism: p.SASLMechanism, &src.SASLUsername: p.SASLUsername,
			&src.SASLPassword: p.SASLPassword, &src.TLSCAPEM: p.TLSCAPEM,
			&src.TLSCertPEM: p.TLSCertPEM, &src.TLSKeyPEM: p.TLSKeyPEM,
			&src.TLSServerName:  p.TLSServerName,
			&src.AWSAccessKeyID: p.AWSAccessKeyID, &src.AWSSecretAccessKey: p.AWSSecretAccessKey,
			&src.AWSSessionToken: p.AWSSessionToken, &src.AWSRegion: p.AWSRegion,
			&src.OAuthTokenEndpointURL: p.OAuthTokenEndpointURL, &src.OAuthClientID: p.OAuthClientID,
			&src.OAuthClientSecret: p.OAuthClientSecret, &src.OAuthScope: p.OAuthScope,
		} {
			if val != nil {
				*dst = *val
			}
		}
		if p.OAuthExtensions != nil {
			src.OAuthExtensions = maps.Clone(*p.OAuthExtensions)
		}
		p.SchemaRegistry.apply(&src)
	}
	cfg := maps.Clone(m.Config)
	set := map[string]string{}
	for k, val := range patch.Config {
		if val == nil {
			if _, known := configKeys[k]; !known {
				set[k] = "" // reported as unknown below
			}
			delete(cfg, k)
			continue
		}
		cfg[k], set[k] = *val, *val
	}
	var v validation
	validateSource(&v, src)
	validateConfig(&v, set)
	if err := v.err(); err != nil {
		return repo.Mirror{}, err
	}
	m.Source = src
	m.Config = cfg
	m.MissingCredentials = stillMissing(m)
	return m, nil
}

// MaxDeleteWait bounds DeleteOpts.Wait.
const MaxDeleteWait = 30 * time.Second

// DeleteOpts are the options of a mirror delete.
type DeleteOpts struct {
	// Wait, up to MaxDeleteWait, is how long to wait for removed topics
	// that are still STOPPING to reach STOPPED before refusing.
	Wait time.Duration
}

// DeleteMirror removes a mirror whose topics are all stopped, writing
// tombstones for every record it had in __mirror_state. With opts.Wait it
// waits for removed topics still STOPPING; a topic not removed at all is
// refused at once, since waiting would not help.
func (s *Control) DeleteMirror(ctx context.Context, name string, opts DeleteOpts) error {
	if opts.Wait < 0 || opts.Wait > MaxDeleteWait {
		return &ValidationError{Fields: []FieldError{{Field: "wait",
			Message: fmt.Sprintf("must be between 0s and %s", MaxDeleteWait)}}}
	}
	deadline := time.Now().Add(opts.Wait)
	for {
		err := s.deleteMirror(ctx, name)
		var stopping *stillStoppingError
		if !errors.As(err, &stopping) || !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(min(100*time.Millisecond, time.Until(deadline))):
		}
	}
}

// stillStoppingError is the conflict of a delete that only STOPPING topics
// hold up.
type stillStoppingError struct{ conflict *ConflictError }

func (e *stillStoppingError) Error() string { return e.conflict.Error() }
func (e *stillStoppingError) Unwrap() error { return e.conflict }

func (s *Control) deleteMirror(ctx context.Context, name string) error {
	return repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := repo.MirrorsGetForUpdate(ctx, tx, name); errors.Is(err, repo.ErrNotFound) {
			return mirrorNotFound(name)
		} else if err != nil {
			return err
		}
		n, err := repo.TopicsCountNotStopped(ctx, tx, name)
		if err != nil {
			return err
		}
		switch {
		case n.Wanted > 0:
			return &ConflictError{Detail: fmt.Sprintf(
				"mirror %s still has %d topic(s) not removed: remove them first", name, n.Wanted+n.Stopping)}
		case n.Stopping > 0:
			return &stillStoppingError{conflict: &ConflictError{Detail: fmt.Sprintf(
				"mirror %s still has %d removed topic(s) STOPPING: wait for STOPPED, or delete with ?wait=30s", name, n.Stopping)}}
		}
		topics, err := repo.TopicsList(ctx, tx, name)
		if err != nil {
			return err
		}
		parts, err := repo.PartitionsList(ctx, tx, repo.PartitionsListParams{Mirror: name})
		if err != nil {
			return err
		}
		for _, p := range parts {
			if err := repo.OutboxInsert(ctx, tx, name, PartitionKey(name, p.Topic, p.Partition), nil); err != nil {
				return err
			}
		}
		for _, t := range topics {
			if err := repo.OutboxInsert(ctx, tx, name, TopicKey(name, t.Topic), nil); err != nil {
				return err
			}
		}
		// The offset maps' chunks too, or a mirror later created under the
		// same name would be restored with this one's runs.
		chunks, err := repo.OffsetRunsChunks(ctx, tx, name, OffsetMapChunkWidth)
		if err != nil {
			return err
		}
		for id, cs := range chunks {
			for _, c := range cs {
				if err := repo.OutboxInsert(ctx, tx, name, OffsetMapKey(name, id.Topic, id.Partition, c), nil); err != nil {
					return err
				}
			}
		}
		// And the synced-ACL set, which was published only if the sync
		// ever created one.
		if acls, err := repo.SyncedACLsList(ctx, tx, name); err != nil {
			return err
		} else if len(acls) > 0 {
			if err := repo.OutboxInsert(ctx, tx, name, SyncedACLsKey(name), nil); err != nil {
				return err
			}
		}
		if err := repo.MirrorsDelete(ctx, tx, name); err != nil {
			return err
		}
		return recordChange(ctx, tx, repo.Event{Kind: EventMirrorDeleted, Mirror: name,
			Message: fmt.Sprintf("mirror %s deleted", name)}, MirrorKey(name), nil)
	})
}

// checkPrefixFixed refuses a change of topic.name.prefix while the mirror
// has topics, stopped ones too: each row keeps the destination name it was
// created with, and a restart writes to it again. Called under the mirror
// row's lock, which topic adds take too.
func checkPrefixFixed(ctx context.Context, q repo.DBTX, cur, next repo.Mirror) error {
	was, now := cur.Config[CfgTopicNamePrefix], next.Config[CfgTopicNamePrefix]
	if was == now {
		return nil
	}
	topics, err := repo.TopicsList(ctx, q, cur.Name)
	if err != nil || len(topics) == 0 {
		return err
	}
	return &ConflictError{Detail: fmt.Sprintf(
		"cannot change %s from %q to %q: mirror %s has %d topic(s) written under the old prefix (%s, ...); "+
			"it is fixed once a mirror has topics, so create another mirror for the new names",
		CfgTopicNamePrefix, was, now, cur.Name, len(topics), topics[0].DestTopic)}
}
