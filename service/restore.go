package service

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"kmirror/repo"
)

// RestoreResult says what a restore rebuilt, and what an operator must
// still do.
type RestoreResult struct {
	Mirrors    int
	Topics     int
	Partitions int
	// OffsetRuns counts the offset-map runs restored, over
	// OffsetMapPartitions partitions.
	OffsetRuns          int
	OffsetMapPartitions int
	// SyncedACLs counts the ACLs kmirror had created on the destination
	// and remembers again.
	SyncedACLs int
	// Lowered lists the partitions whose checkpoint was moved back to the
	// end of their offset map (the map was published a little earlier than
	// the checkpoint): PREPARING walks the source from there and maps the
	// rest again, exactly.
	Lowered []string
	// NeedCredentials lists the mirrors whose source secrets were redacted
	// in __mirror_state: they are needs_credentials until PATCH sets them.
	NeedCredentials []MirrorCredentials
}

// MirrorCredentials names a mirror and the secrets it needs again.
type MirrorCredentials struct {
	Mirror  string
	Missing []string
}

// StateSnapshot is __mirror_state decoded: the latest value of every key.
type StateSnapshot struct {
	Mirrors    []MirrorRecord
	Topics     []TopicRecord
	Partitions []PartitionRecord
	// OffsetMaps holds each partition's runs from every chunk, in source
	// order.
	OffsetMaps map[repo.PartitionID][]repo.OffsetRun
	// OffsetMapChunks counts the offset-map records.
	OffsetMapChunks int
	SyncedACLs      []SyncedACLsRecord
}

// DecodeState decodes the latest __mirror_state value of every key (a nil
// value is a tombstone and was dropped by the reader).
func DecodeState(latest map[string][]byte) (StateSnapshot, error) {
	snap := StateSnapshot{OffsetMaps: map[repo.PartitionID][]repo.OffsetRun{}}
	for _, key := range sortedKeys(latest) {
		val := latest[key]
		var err error
		version := 0
		switch {
		case strings.HasPrefix(key, "mirror/"):
			var m MirrorRecord
			err = json.Unmarshal(val, &m)
			version = m.Version
			snap.Mirrors = append(snap.Mirrors, m)
		case strings.HasPrefix(key, "topic/"):
			var t TopicRecord
			err = json.Unmarshal(val, &t)
			version = t.Version
			snap.Topics = append(snap.Topics, t)
		case strings.HasPrefix(key, "partition/"):
			var p PartitionRecord
			err = json.Unmarshal(val, &p)
			version = p.Version
			snap.Partitions = append(snap.Partitions, p)
		case strings.HasPrefix(key, "offsets/"):
			var o OffsetMapRecord
			err = json.Unmarshal(val, &o)
			version = o.Version
			id := repo.PartitionID{Mirror: o.Mirror, Topic: o.Topic, Partition: o.Partition}
			for _, r := range o.Runs {
				snap.OffsetMaps[id] = append(snap.OffsetMaps[id], repo.OffsetRun{SrcStart: r[0], DstStart: r[1], Count: r[2]})
			}
			snap.OffsetMapChunks++
		case strings.HasPrefix(key, "acls/"):
			var a SyncedACLsRecord
			err = json.Unmarshal(val, &a)
			version = a.Version
			snap.SyncedACLs = append(snap.SyncedACLs, a)
		default:
			return snap, fmt.Errorf("unknown key %q in %s", key, StateTopic)
		}
		if err != nil {
			return snap, fmt.Errorf("decode %s: %w", key, err)
		}
		if version > RecordVersion {
			return snap, fmt.Errorf("%s: record version %d is newer than this kmirror understands (%d)", key, version, RecordVersion)
		}
	}
	for id, runs := range snap.OffsetMaps {
		sort.Slice(runs, func(i, j int) bool { return runs[i].SrcStart < runs[j].SrcStart })
		snap.OffsetMaps[id] = runs
	}
	return snap, nil
}

// DestinationTopics maps each (mirror, topic) that the snapshot has a
// topic or partition record of to the topic's destination name: its
// record's, or for a record published before records kept it, the name the
// mirror's restored config gives it (its topic.name.prefix, fixed once a
// mirror has topics, and the source name).
func (snap StateSnapshot) DestinationTopics() map[[2]string]string {
	configs := make(map[string]map[string]string, len(snap.Mirrors))
	for _, m := range snap.Mirrors {
		configs[m.Name] = m.Config
	}
	out := make(map[[2]string]string, len(snap.Topics))
	for _, t := range snap.Topics {
		out[[2]string{t.Mirror, t.Topic}] = cmp.Or(t.DestinationTopic, DestinationTopic(configs[t.Mirror], t.Topic))
	}
	for _, p := range snap.Partitions {
		if k := [2]string{p.Mirror, p.Topic}; out[k] == "" {
			out[k] = DestinationTopic(configs[p.Mirror], p.Topic)
		}
	}
	return out
}

// Restore rebuilds an empty database from the latest __mirror_state value
// of every key. Checkpoints may be a little old; alignment in PREPARING
// makes them exact. Leases start free.
func (s *Control) Restore(ctx context.Context, latest map[string][]byte) (RestoreResult, error) {
	var res RestoreResult
	snap, err := DecodeState(latest)
	if err != nil {
		return res, err
	}
	err = repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		existing, err := repo.MirrorsList(ctx, tx)
		if err != nil {
			return err
		}
		if len(existing) > 0 {
			return &ConflictError{Detail: fmt.Sprintf("the database already has %d mirror(s); restore needs an empty one", len(existing))}
		}
		known := map[string]bool{}
		dests := snap.DestinationTopics()
		for _, m := range snap.Mirrors {
			missing := missingCredentials(m.Source)
			row := repo.Mirror{Name: m.Name, Source: repo.Source{BootstrapServers: m.Source.BootstrapServers,
				SecurityProtocol: m.Source.SecurityProtocol, SASLMechanism: m.Source.SASLMechanism,
				SASLUsername: m.Source.SASLUsername, TLSCAPEM: m.Source.TLSCAPEM, TLSCertPEM: m.Source.TLSCertPEM,
				TLSServerName: m.Source.TLSServerName, AWSAccessKeyID: m.Source.AWSAccessKeyID, AWSRegion: m.Source.AWSRegion,
				OAuthTokenEndpointURL: m.Source.OAuthTokenEndpointURL, OAuthClientID: m.Source.OAuthClientID,
				OAuthScope: m.Source.OAuthScope, OAuthExtensions: m.Source.OAuthExtensions},
				Config: m.Config, MissingCredentials: missing}
			if r := m.Source.SchemaRegistry; r != nil {
				row.SchemaRegistryURLs, row.SchemaRegistryUsername = r.URLs, r.BasicAuthUsername
				row.SchemaRegistryTLSCAPEM, row.SchemaRegistryTLSCertPEM = r.TLSCAPEM, r.TLSCertPEM
				row.SchemaRegistryTLSServerName = r.TLSServerName
			}
			if _, err := repo.MirrorsInsert(ctx, tx, row); err != nil {
				return fmt.Errorf("restore mirror %s: %w", m.Name, err)
			}
			if len(missing) > 0 {
				res.NeedCredentials = append(res.NeedCredentials, MirrorCredentials{Mirror: m.Name, Missing: missing})
			}
			known[m.Name] = true
			res.Mirrors++
		}
		for _, t := range snap.Topics {
			if !known[t.Mirror] {
				continue // a topic record that outlived its mirror's
			}
			if err := repo.TopicsUpsert(ctx, tx, repo.TopicsUpsertParams{Mirror: t.Mirror, Topic: t.Topic,
				DestTopic: dests[[2]string{t.Mirror, t.Topic}], DesiredState: t.DesiredState, ReplicationFactor: t.ReplicationFactor, Recreate: t.Recreate,
				Partitions: int32(t.Partitions)}); err != nil {
				return fmt.Errorf("restore topic %s/%s: %w", t.Mirror, t.Topic, err)
			}
			res.Topics++
		}
		for _, p := range snap.Partitions {
			id := repo.PartitionID{Mirror: p.Mirror, Topic: p.Topic, Partition: p.Partition}
			runs, lowered := fitOffsetMap(snap.OffsetMaps[id], &p)
			lastSrc, lastDst := restoredLastMirrored(p, runs)
			n, err := repo.PartitionsRestore(ctx, tx, repo.PartitionsRestoreParams{Mirror: p.Mirror, Topic: p.Topic,
				Partition: p.Partition, State: p.State, PreviousState: p.PreviousState, Error: p.Error,
				SrcNext: p.SrcNext, DstNext: p.DstNext, LostRecords: p.LostRecords,
				LastMirroredSrc: lastSrc, LastMirroredDst: lastDst})
			if err != nil {
				return fmt.Errorf("restore partition %s/%s/%d: %w", p.Mirror, p.Topic, p.Partition, err)
			}
			if n == 0 {
				continue // its topic was not restored
			}
			res.Partitions++
			if len(runs) > 0 {
				if err := repo.OffsetRunsRestore(ctx, tx, id, runs); err != nil {
					return fmt.Errorf("restore the offset map of %s/%s/%d: %w", p.Mirror, p.Topic, p.Partition, err)
				}
				res.OffsetRuns += len(runs)
				res.OffsetMapPartitions++
			}
			if lowered {
				res.Lowered = append(res.Lowered, fmt.Sprintf("%s/%s/%d", p.Mirror, p.Topic, p.Partition))
			}
		}
		for _, a := range snap.SyncedACLs {
			if !known[a.Mirror] {
				continue
			}
			for _, acl := range a.ACLs {
				if err := repo.SyncedACLsInsert(ctx, tx, a.Mirror, acl.row()); err != nil {
					return fmt.Errorf("restore an ACL of mirror %s: %w", a.Mirror, err)
				}
				res.SyncedACLs++
			}
		}
		return repo.EventsInsert(ctx, tx, repo.Event{Kind: EventStateRestored, Message: fmt.Sprintf(
			"restored %d mirror(s), %d topic(s), %d partition state(s), %d offset-map run(s) and %d synced ACL(s) from %s",
			res.Mirrors, res.Topics, res.Partitions, res.OffsetRuns, res.SyncedACLs, StateTopic)})
	})
	return res, err
}

// fitOffsetMap makes a partition's restored runs agree with its restored
// checkpoint. Runs come in source order; one that overlaps an earlier run
// (a chunk left over from before a truncation) is dropped, and so is what
// maps past the checkpoint (published before the checkpoint record that
// says those records were not verified). When the map ends before the
// checkpoint, the checkpoint is moved back to the map's end and lowered is
// true: PREPARING then finds the records written after it on the
// destination, walks the source to prove them, and maps them again. Not
// for a PAUSED partition: it resumes from its checkpoint without aligning,
// so a lowered one would copy records again. Its map stays short, which
// makes translation round the unmapped tail down (a duplicate, never a
// skip); a PAUSED record's map is complete anyway unless the database was
// changed behind the relay.
func fitOffsetMap(runs []repo.OffsetRun, p *PartitionRecord) (fit []repo.OffsetRun, lowered bool) {
	if p.SrcNext == nil || p.DstNext == nil {
		return nil, false
	}
	dstNext := *p.DstNext
	for _, r := range runs {
		if r.Count <= 0 || r.DstStart >= dstNext {
			continue
		}
		if n := len(fit); n > 0 {
			last := fit[n-1]
			if r.SrcStart < last.SrcStart+last.Count || r.DstStart < last.DstStart+last.Count {
				continue
			}
		}
		r.Count = min(r.Count, dstNext-r.DstStart)
		fit = append(fit, r)
	}
	if n := len(fit); n > 0 {
		last := fit[n-1]
		if end := last.DstStart + last.Count; end < dstNext && p.State != StatePaused {
			src := last.SrcStart + last.Count
			p.SrcNext, p.DstNext = &src, &end
			return fit, true
		}
	}
	return fit, false
}

// restoredLastMirrored is a restored partition's last mirrored offsets: the
// record's, unless the fitted map ends before them (the record was
// published before a truncation the map shows) or the record predates
// them; then the map's end, which is what the restored database will
// translate with.
func restoredLastMirrored(p PartitionRecord, fit []repo.OffsetRun) (src, dst *int64) {
	if p.LastMirroredSrc != nil && p.LastMirroredDst != nil {
		src, dst = p.LastMirroredSrc, p.LastMirroredDst
	}
	if n := len(fit); n > 0 {
		last := fit[n-1]
		s, d := last.SrcStart+last.Count-1, last.DstStart+last.Count-1
		if src == nil || s < *src {
			src, dst = &s, &d
		}
	}
	return src, dst
}
