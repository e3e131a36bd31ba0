package api

import (
	"encoding/json"
	"time"

	"kmirror/service"
)

// SourceSpec is a source cluster connection, with Kafka's names. Secrets
// (sasl_password, tls_key_pem) are write-only.
type SourceSpec struct {
	BootstrapServers string `json:"bootstrap_servers" example:"h1:9092,h2:9092"`
	// PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL.
	SecurityProtocol string `json:"security_protocol,omitempty" example:"PLAINTEXT"`
	// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with SASL_*.
	SASLMechanism string `json:"sasl_mechanism,omitempty"`
	SASLUsername  string `json:"sasl_username,omitempty"`
	SASLPassword  string `json:"sasl_password,omitempty"`
	TLSCAPEM      string `json:"tls_ca_pem,omitempty"`
	TLSCertPEM    string `json:"tls_cert_pem,omitempty"`
	TLSKeyPEM     string `json:"tls_key_pem,omitempty"`
	TLSServerName string `json:"tls_server_name,omitempty"`
} // @name SourceSpec

// CreateMirrorRequest is the body of POST /v1/mirrors.
type CreateMirrorRequest struct {
	Name   string            `json:"name" example:"m1"`
	Source SourceSpec        `json:"source"`
	Config map[string]string `json:"config,omitempty"`
} // @name CreateMirrorRequest

// SourcePatch changes the given source fields; omitted ones stay.
type SourcePatch struct {
	BootstrapServers *string `json:"bootstrap_servers,omitempty"`
	SecurityProtocol *string `json:"security_protocol,omitempty"`
	SASLMechanism    *string `json:"sasl_mechanism,omitempty"`
	SASLUsername     *string `json:"sasl_username,omitempty"`
	SASLPassword     *string `json:"sasl_password,omitempty"`
	TLSCAPEM         *string `json:"tls_ca_pem,omitempty"`
	TLSCertPEM       *string `json:"tls_cert_pem,omitempty"`
	TLSKeyPEM        *string `json:"tls_key_pem,omitempty"`
	TLSServerName    *string `json:"tls_server_name,omitempty"`
} // @name SourcePatch

// UpdateMirrorRequest is the body of PATCH /v1/mirrors/{mirror}: a merge
// patch. A config key set to null returns to its default.
type UpdateMirrorRequest struct {
	Source *SourcePatch       `json:"source,omitempty"`
	Config map[string]*string `json:"config,omitempty"`
} // @name UpdateMirrorRequest

// SourceView is a source connection as returned: secrets show only whether
// they are set.
type SourceView struct {
	BootstrapServers string `json:"bootstrap_servers" example:"h1:9092,h2:9092"`
	SecurityProtocol string `json:"security_protocol" example:"PLAINTEXT"`
	SASLMechanism    string `json:"sasl_mechanism,omitempty"`
	SASLUsername     string `json:"sasl_username,omitempty"`
	SASLPasswordSet  bool   `json:"sasl_password_set"`
	TLSCAPEM         string `json:"tls_ca_pem,omitempty"`
	TLSCertPEM       string `json:"tls_cert_pem,omitempty"`
	TLSKeySet        bool   `json:"tls_key_set"`
	TLSServerName    string `json:"tls_server_name,omitempty"`
} // @name SourceView

// Mirror is a mirror as returned by the API.
type Mirror struct {
	Name   string     `json:"name" example:"m1"`
	Source SourceView `json:"source"`
	// Config holds the keys set on this mirror.
	Config map[string]string `json:"config"`
	// EffectiveConfig holds every key with its set or default value.
	EffectiveConfig map[string]string `json:"effective_config"`
	// LastSync is the result of the last metadata sync pass, if any.
	LastSync *service.SyncResult `json:"last_sync,omitempty"`
	// Status summarizes the mirror's topics and partitions.
	Status    MirrorStatus `json:"status"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
} // @name Mirror

// MirrorStatus summarizes a mirror's topics and partitions.
type MirrorStatus struct {
	Topics     int `json:"topics" example:"2"`
	Partitions int `json:"partitions" example:"4"`
	// States counts partitions by actual state (UNKNOWN included); states
	// no partition is in are left out.
	States map[string]int `json:"states"`
	// Lag sums the known per-partition lag.
	Lag int64 `json:"lag" example:"3"`
	// Erroring counts partitions with an error: FAILED, or retrying in
	// their state.
	Erroring int `json:"erroring" example:"0"`
	// RecordsPerSec is the latest rate this API instance sampled (see
	// GET /v1/history); 0 until known.
	RecordsPerSec float64 `json:"records_per_sec" example:"120.5"`
} // @name MirrorStatus

// MirrorList is the body of GET /v1/mirrors.
type MirrorList struct {
	Mirrors []Mirror `json:"mirrors"`
} // @name MirrorList

// TopicsRequest selects topics by an RE2 pattern matched against whole names.
type TopicsRequest struct {
	Topic string `json:"topic" example:"orders|payments"`
} // @name TopicsRequest

// AddTopicsRequest is the body of topics:add.
type AddTopicsRequest struct {
	Topic string `json:"topic" example:"orders|payments"`
	// ReplicationFactor of the destination topics; omitted is the destination's default.
	ReplicationFactor *int `json:"replication_factor,omitempty" example:"3"`
	// Recreate, when restarting a stopped topic, drops and recreates the
	// destination topic instead of failing on divergent writes.
	Recreate bool `json:"recreate,omitempty"`
} // @name AddTopicsRequest

// TopicsResult lists the topics an action applied to.
type TopicsResult struct {
	Mirror string   `json:"mirror" example:"m1"`
	Action string   `json:"action" example:"add"`
	Topics []string `json:"topics" example:"orders,payments"`
	// Matches, for an add (dry run or not), are the source topics the
	// pattern matched with their partition counts, sorted by topic.
	Matches []TopicMatch `json:"matches,omitempty"`
} // @name TopicsResult

// TopicMatch is a source topic an add's pattern matched.
type TopicMatch struct {
	Topic      string `json:"topic" example:"orders"`
	Partitions int    `json:"partitions" example:"5"`
} // @name TopicMatch

// Topic is a mirror topic with a summary of its partitions.
type Topic struct {
	Mirror string `json:"mirror" example:"m1"`
	Topic  string `json:"topic" example:"orders"`
	// DesiredState is mirroring, paused or stopped.
	DesiredState      string `json:"desired_state" example:"mirroring"`
	ReplicationFactor int    `json:"replication_factor" example:"3"`
	Recreate          bool   `json:"recreate"`
	// ReadOnlyEnforced: see PartitionRow.
	ReadOnlyEnforced *bool `json:"read_only_enforced" extensions:"x-nullable"`
	Partitions       int   `json:"partitions" example:"3"`
	// States counts partitions by actual state.
	States map[string]int `json:"states"`
	// Lag sums the known per-partition lag.
	Lag int64 `json:"lag"`
	// RecordsPerSec is the latest rate this API instance sampled (see
	// GET /v1/history); 0 until known.
	RecordsPerSec float64   `json:"records_per_sec" example:"40.2"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
} // @name Topic

// TopicDetail is a mirror topic with its partitions.
type TopicDetail struct {
	Topic
	PartitionRows []PartitionRow `json:"partition_rows"`
} // @name TopicDetail

// TopicList is the body of GET /v1/mirrors/{mirror}/topics.
type TopicList struct {
	Topics []Topic `json:"topics"`
} // @name TopicList

// PartitionRow is one describe row.
type PartitionRow struct {
	Mirror    string `json:"mirror" example:"m1"`
	Topic     string `json:"topic" example:"orders"`
	Partition int32  `json:"partition" example:"0"`
	// SourceOffset is the source end offset, when known.
	SourceOffset *int64 `json:"source_offset" extensions:"x-nullable" example:"69"`
	// DestinationOffset is the destination end offset, when known.
	DestinationOffset *int64 `json:"destination_offset" extensions:"x-nullable" example:"66"`
	// Lag is source end offset − next source offset to mirror.
	Lag          *int64 `json:"lag" extensions:"x-nullable" example:"3"`
	State        string `json:"state" example:"MIRRORING"`
	Error        string `json:"error"`
	RetryAttempt int    `json:"retry_attempt"`
	LostRecords  int64  `json:"lost_records"`
	Owner        string `json:"owner"`
	// ReadOnlyEnforced says whether a DENY WRITE ACL keeps the destination
	// topic read-only (false: the destination has no authorizer); null
	// until the topic is first mirrored.
	ReadOnlyEnforced *bool `json:"read_only_enforced" extensions:"x-nullable"`
	// LeaseLive says a live instance holds the partition's lease. False
	// for a partition nobody owns or whose owner stopped renewing (after a
	// crash, until another takes over): its state is then what the last
	// owner left, not what is happening.
	LeaseLive bool `json:"lease_live"`
	// OwnerRenewedAt is when the owner last renewed its lease session.
	OwnerRenewedAt *time.Time `json:"owner_renewed_at" extensions:"x-nullable"`
	// ProgressedAt is when the checkpoint last moved forward.
	ProgressedAt *time.Time `json:"progressed_at" extensions:"x-nullable"`
} // @name PartitionRow

// PartitionList is one page of GET /v1/partitions.
type PartitionList struct {
	Partitions []PartitionRow `json:"partitions"`
	// NextCursor, when present, reads the next page: pass it as cursor
	// with the same filters. Absent on the last page.
	NextCursor string `json:"next_cursor,omitempty" example:"eyJtIjoibTEiLCJ0Ijoib3JkZXJzIiwicCI6OTk5fQ"`
} // @name PartitionList

// Translation maps a source offset to the destination.
type Translation struct {
	SourceOffset      int64 `json:"source_offset" example:"120"`
	DestinationOffset int64 `json:"destination_offset" example:"118"`
	Exact             bool  `json:"exact"`
} // @name Translation

// Instance is a kmirror server process.
type Instance struct {
	ID          string     `json:"id"`
	Hostname    string     `json:"hostname"`
	Version     string     `json:"version"`
	StartedAt   time.Time  `json:"started_at"`
	HeartbeatAt time.Time  `json:"heartbeat_at"`
	StoppedAt   *time.Time `json:"stopped_at,omitempty"`
	Live        bool       `json:"live"`
	// Leases counts the partitions whose lease this instance's live
	// session holds.
	Leases int `json:"leases" example:"12"`
} // @name Instance

// InstanceList is the body of GET /v1/instances.
type InstanceList struct {
	Instances []Instance `json:"instances"`
} // @name InstanceList

// Event is an audit-log entry, as streamed by /v1/events.
type Event struct {
	ID        int64          `json:"id"`
	At        time.Time      `json:"at"`
	Kind      string         `json:"kind" example:"topics.added"`
	Mirror    string         `json:"mirror,omitempty"`
	Topic     string         `json:"topic,omitempty"`
	Partition *int32         `json:"partition,omitempty"`
	Message   string         `json:"message"`
	Data      map[string]any `json:"data,omitempty"`
} // @name Event

// History is the lag and throughput this API instance sampled.
type History struct {
	// IntervalSeconds is the time between samples.
	IntervalSeconds float64 `json:"interval_seconds" example:"5"`
	// WindowSeconds is how far back samples are kept.
	WindowSeconds float64         `json:"window_seconds" example:"600"`
	Series        []HistorySeries `json:"series"`
} // @name History

// HistorySeries is a mirror's total (no topic) or one mirror topic's
// history, oldest point first.
type HistorySeries struct {
	Mirror string         `json:"mirror" example:"demo"`
	Topic  string         `json:"topic,omitempty" example:"orders"`
	Points []HistoryPoint `json:"points"`
} // @name HistorySeries

// HistoryPoint is one sample.
type HistoryPoint struct {
	At time.Time `json:"at"`
	// Lag sums the known per-partition lag.
	Lag int64 `json:"lag" example:"3"`
	// RecordsPerSec is how many records were mirrored per second since the
	// previous sample; 0 on a series' first point.
	RecordsPerSec float64 `json:"records_per_sec" example:"120.5"`
} // @name HistoryPoint

// Whoami is the caller as the server sees it.
type Whoami struct {
	// AuthEnabled says the server checks bearer tokens.
	AuthEnabled bool `json:"auth_enabled"`
	// Role is admin (may do anything) or viewer (may only read).
	Role string `json:"role" enums:"admin,viewer" example:"admin"`
} // @name Whoami

func mirrorView(m service.Mirror) Mirror {
	src := m.Source
	v := Mirror{
		Name: m.Name,
		Source: SourceView{BootstrapServers: src.BootstrapServers, SecurityProtocol: src.SecurityProtocol,
			SASLMechanism: src.SASLMechanism, SASLUsername: src.SASLUsername,
			SASLPasswordSet: src.SASLPasswordSet, TLSCAPEM: src.TLSCAPEM, TLSCertPEM: src.TLSCertPEM,
			TLSKeySet: src.TLSKeySet, TLSServerName: src.TLSServerName},
		Config: m.Config, EffectiveConfig: service.EffectiveConfig(m.Config),
		Status: MirrorStatus{Topics: m.Status.Topics, Partitions: m.Status.Partitions,
			States: m.Status.States, Lag: m.Status.Lag, Erroring: m.Status.Erroring,
			RecordsPerSec: m.Status.RecordsPerSec},
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
	}
	if v.Status.States == nil {
		v.Status.States = map[string]int{}
	}
	if len(m.LastSync) > 0 {
		var r service.SyncResult
		if json.Unmarshal(m.LastSync, &r) == nil {
			v.LastSync = &r
		}
	}
	return v
}

func partitionView(p service.PartitionRow) PartitionRow {
	return PartitionRow{Mirror: p.Mirror, Topic: p.Topic, Partition: p.Partition,
		SourceOffset: p.SourceOffset, DestinationOffset: p.DestinationOffset, Lag: p.Lag,
		State: p.State.String(), Error: p.Error, RetryAttempt: p.RetryAttempt,
		LostRecords: p.LostRecords, Owner: p.Owner, ReadOnlyEnforced: p.ReadOnlyEnforced,
		LeaseLive: p.LeaseLive, OwnerRenewedAt: p.OwnerRenewedAt, ProgressedAt: p.ProgressedAt}
}

func topicView(t service.Topic, sum service.PartitionSummary) Topic {
	v := Topic{Mirror: t.Mirror, Topic: t.Topic, DesiredState: string(t.DesiredState),
		ReplicationFactor: t.ReplicationFactor, Recreate: t.Recreate, ReadOnlyEnforced: t.ReadOnlyEnforced, Partitions: t.Partitions,
		States: map[string]int{}, Lag: sum.Lag, RecordsPerSec: t.RecordsPerSec, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	for state, n := range sum.States {
		v.States[state.String()] += n
	}
	return v
}

func eventView(e service.Event) Event {
	v := Event{ID: e.ID, At: e.At, Kind: e.Kind, Mirror: e.Mirror, Topic: e.Topic,
		Partition: e.Partition, Message: e.Message}
	if len(e.Data) > 0 {
		_ = json.Unmarshal(e.Data, &v.Data)
	}
	return v
}

func historyView(h service.ProgressHistory) History {
	out := History{IntervalSeconds: h.Interval.Seconds(), WindowSeconds: h.Window.Seconds(),
		Series: make([]HistorySeries, len(h.Series))}
	for i, s := range h.Series {
		points := make([]HistoryPoint, len(s.Points))
		for j, p := range s.Points {
			points[j] = HistoryPoint{At: p.At, Lag: p.Lag, RecordsPerSec: p.RecordsPerSec}
		}
		out.Series[i] = HistorySeries{Mirror: s.Mirror, Topic: s.Topic, Points: points}
	}
	return out
}
