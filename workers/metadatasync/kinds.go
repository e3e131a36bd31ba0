package metadatasync

import "kmirror/service"

// kind is one kind of metadata that a pass keeps in step. kinds lists them
// once, in the order a pass runs them; results, logs and metrics all read
// this table.
type kind struct {
	name string // the label in metrics and logs, as in SyncResult's JSON
	// run runs the kind (or records loadErr, the pass's inputs' error) and
	// stores its outcome in p.res.
	run func(p *syncPass, loadErr error)
	// status reads the kind's outcome from a result.
	status func(r *service.SyncResult) (ok bool, err string)
	// fail records that the kind failed with msg.
	fail func(r *service.SyncResult, msg string)
}

var kinds = []kind{
	// Deletions first, so the other kinds skip topics it stops.
	outcomeKind("deleted_topics", (*syncPass).syncDeletedTopics, func(r *service.SyncResult) *service.SyncOutcome { return &r.DeletedTopics }),
	outcomeKind("new_topics", (*syncPass).syncNewTopics, func(r *service.SyncResult) *service.SyncOutcome { return &r.NewTopics }),
	outcomeKind("partitions", (*syncPass).syncPartitions, func(r *service.SyncResult) *service.SyncOutcome { return &r.Partitions }),
	outcomeKind("topic_configs", (*syncPass).syncTopicConfigs, func(r *service.SyncResult) *service.SyncOutcome { return &r.TopicConfigs }),
	{
		name: "group_offsets",
		run:  func(p *syncPass, loadErr error) { p.res.GroupOffsets = p.syncGroupOffsets(loadErr) },
		status: func(r *service.SyncResult) (bool, string) {
			return r.GroupOffsets.OK, r.GroupOffsets.Error
		},
		fail: func(r *service.SyncResult, msg string) { r.GroupOffsets.OK, r.GroupOffsets.Error = false, msg },
	},
	outcomeKind("acls", (*syncPass).syncACLs, func(r *service.SyncResult) *service.SyncOutcome { return &r.ACLs }),
	outcomeKind("paused_topics", (*syncPass).syncPausedTopics, func(r *service.SyncResult) *service.SyncOutcome { return &r.PausedTopics }),
}

// outcomeKind is a kind whose outcome is a plain SyncOutcome.
func outcomeKind(name string, sync func(*syncPass, *service.SyncOutcome) error, field func(*service.SyncResult) *service.SyncOutcome) kind {
	return kind{
		name: name,
		run: func(p *syncPass, loadErr error) {
			o := field(&p.res)
			err := loadErr
			if err == nil {
				err = sync(p, o)
			}
			finishOutcome(o, err)
		},
		status: func(r *service.SyncResult) (bool, string) {
			o := field(r)
			return o.OK, o.Error
		},
		fail: func(r *service.SyncResult, msg string) {
			o := field(r)
			o.OK, o.Error = false, msg
		},
	}
}

// allOK reports whether every kind of a result succeeded.
func allOK(r *service.SyncResult) bool {
	for _, k := range kinds {
		if ok, _ := k.status(r); !ok {
			return false
		}
	}
	return true
}
