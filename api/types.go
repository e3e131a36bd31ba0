package api

import (
	"cmp"
	"encoding/json"
	"time"

	"kmirror/service"
)

// SourceSpec is a source cluster connection, with Kafka's names, and the
// source's Schema Registry. Secrets (sasl_password, tls_key_pem,
// aws_secret_access_key, aws_session_token, sasl_oauthbearer_client_secret,
// and schema_registry's basic_auth_password, bearer_token and tls_key_pem)
// are write-only.
type SourceSpec struct {
	// BootstrapServers is Kafka's bootstrap.servers: host:port pairs,
	// comma-separated.
	BootstrapServers string `json:"bootstrap_servers" example:"h1:9092,h2:9092"`
	// SecurityProtocol is PLAINTEXT when omitted.
	SecurityProtocol SecurityProtocol `json:"security_protocol,omitempty" example:"PLAINTEXT"`
	// SASLMechanism is required with SASL_PLAINTEXT and SASL_SSL, and
	// refused otherwise. Each mechanism takes its own fields below and
	// refuses the others'.
	SASLMechanism SASLMechanism `json:"sasl_mechanism,omitempty" example:"SCRAM-SHA-512"`
	// SASLUsername and SASLPassword are required with PLAIN and SCRAM-*.
	SASLUsername string `json:"sasl_username,omitempty" example:"kmirror"`
	// SASLPassword is write-only: responses say only whether it is set.
	SASLPassword string `json:"sasl_password,omitempty" example:"s3cret"`
	// AWSAccessKeyID and AWSSecretAccessKey (with AWS_MSK_IAM) are static
	// keys; without them the server's AWS default credential chain signs
	// in (environment, EKS web identity, shared config, instance role).
	AWSAccessKeyID string `json:"aws_access_key_id,omitempty" example:"AKIAIOSFODNN7EXAMPLE"`
	// AWSSecretAccessKey is write-only: responses say only whether it is set.
	AWSSecretAccessKey string `json:"aws_secret_access_key,omitempty" example:"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"`
	// AWSSessionToken goes with temporary keys. Write-only.
	AWSSessionToken string `json:"aws_session_token,omitempty" example:"IQoJb3JpZ2luX2VjE..."`
	// AWSRegion is the default credential chain's region (its STS
	// endpoint); requests are signed for the region in the broker's host
	// name, as every MSK broker's carries one.
	AWSRegion string `json:"aws_region,omitempty" example:"us-east-1"`
	// OAuthTokenEndpointURL (with OAUTHBEARER, required) is the OIDC token
	// endpoint tokens are fetched from with the client credentials grant:
	// https, or http for a loopback host only.
	OAuthTokenEndpointURL string `json:"sasl_oauthbearer_token_endpoint_url,omitempty" example:"https://login.example.com/oauth2/token"`
	// OAuthClientID and OAuthClientSecret are required with OAUTHBEARER.
	OAuthClientID string `json:"sasl_oauthbearer_client_id,omitempty" example:"kmirror"`
	// OAuthClientSecret is write-only: responses say only whether it is set.
	OAuthClientSecret string `json:"sasl_oauthbearer_client_secret,omitempty" example:"s3cret"`
	// OAuthScope is the scopes to ask for, separated by spaces; empty asks
	// for the provider's default.
	OAuthScope string `json:"sasl_oauthbearer_scope,omitempty" example:"kafka"`
	// OAuthExtensions are SASL extensions sent with the token (RFC 7628):
	// letters-only keys, printable values, such as Confluent Cloud's
	// logicalCluster and identityPoolId.
	OAuthExtensions map[string]string `json:"sasl_oauthbearer_extensions,omitempty" example:"logicalCluster:lkc-abc123"`
	// TLSCAPEM, TLSCertPEM, TLSKeyPEM and TLSServerName are allowed with
	// SSL and SASL_SSL: the CA to trust, the client certificate and key for
	// mutual TLS (PEM), and the server name to verify.
	TLSCAPEM   string `json:"tls_ca_pem,omitempty" example:"-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----"`
	TLSCertPEM string `json:"tls_cert_pem,omitempty" example:"-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----"`
	// TLSKeyPEM is write-only: responses say only whether it is set.
	TLSKeyPEM     string `json:"tls_key_pem,omitempty" example:"-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----"`
	TLSServerName string `json:"tls_server_name,omitempty" example:"kafka.example.com"`
	// SchemaRegistry is the source cluster's Schema Registry, whose subjects
	// the mirror copies to the destination's; omitted, the mirror names
	// none.
	SchemaRegistry *SchemaRegistrySpec `json:"schema_registry,omitempty"`
} // @name SourceSpec

// SchemaRegistrySpec is a Schema Registry's connection. Secrets
// (basic_auth_password, bearer_token, tls_key_pem) are write-only.
type SchemaRegistrySpec struct {
	// URLs are the registry's servers, http:// or https://, tried in order
	// when one cannot be reached. Required; credentials go in their own
	// fields, never in a URL.
	URLs []string `json:"urls" example:"https://registry.example.com:8081"`
	// BasicAuthUsername and BasicAuthPassword (a Confluent Cloud API key
	// and secret, for instance) go together, and not with BearerToken.
	BasicAuthUsername string `json:"basic_auth_username,omitempty" example:"kmirror"`
	// BasicAuthPassword is write-only: responses say only whether it is set.
	BasicAuthPassword string `json:"basic_auth_password,omitempty" example:"s3cret"`
	// BearerToken is sent as Authorization: Bearer, without the word
	// Bearer. Write-only.
	BearerToken string `json:"bearer_token,omitempty" example:"eyJhbGciOi..."`
	// TLSCAPEM, TLSCertPEM, TLSKeyPEM and TLSServerName need an https URL:
	// the CA to trust (the system's roots when empty), the client
	// certificate and key for mutual TLS (PEM), and the server name to
	// verify (the URL's host when empty).
	TLSCAPEM   string `json:"tls_ca_pem,omitempty" example:"-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----"`
	TLSCertPEM string `json:"tls_cert_pem,omitempty" example:"-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----"`
	// TLSKeyPEM is write-only: responses say only whether it is set.
	TLSKeyPEM     string `json:"tls_key_pem,omitempty" example:"-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----"`
	TLSServerName string `json:"tls_server_name,omitempty" example:"registry.example.com"`
} // @name SchemaRegistrySpec

// CreateMirrorRequest is the body of POST /v1/mirrors.
type CreateMirrorRequest struct {
	// Name is 1-249 characters of [a-zA-Z0-9._-].
	Name   string     `json:"name" example:"m1"`
	Source SourceSpec `json:"source"`
	// Config sets mirror config keys (Kafka's names; values are strings, as
	// in Kafka); the others keep their defaults (see effective_config).
	Config map[string]string `json:"config,omitempty" example:"mirror.metadata.refresh.interval.ms:30000"`
} // @name CreateMirrorRequest

// SourcePatch changes the given source fields; omitted ones stay.
// The result must be a valid source as a whole (see SourceSpec).
type SourcePatch struct {
	BootstrapServers *string           `json:"bootstrap_servers,omitempty" example:"h1:9092,h2:9092"`
	SecurityProtocol *SecurityProtocol `json:"security_protocol,omitempty" example:"SASL_SSL"`
	SASLMechanism    *SASLMechanism    `json:"sasl_mechanism,omitempty" example:"SCRAM-SHA-512"`
	SASLUsername     *string           `json:"sasl_username,omitempty" example:"kmirror"`
	SASLPassword     *string           `json:"sasl_password,omitempty" example:"s3cret"`
	TLSCAPEM         *string           `json:"tls_ca_pem,omitempty"`
	TLSCertPEM       *string           `json:"tls_cert_pem,omitempty"`
	TLSKeyPEM        *string           `json:"tls_key_pem,omitempty"`
	TLSServerName    *string           `json:"tls_server_name,omitempty" example:"kafka.example.com"`

	AWSAccessKeyID     *string `json:"aws_access_key_id,omitempty" example:"AKIAIOSFODNN7EXAMPLE"`
	AWSSecretAccessKey *string `json:"aws_secret_access_key,omitempty"`
	AWSSessionToken    *string `json:"aws_session_token,omitempty"`
	AWSRegion          *string `json:"aws_region,omitempty" example:"us-east-1"`

	OAuthTokenEndpointURL *string `json:"sasl_oauthbearer_token_endpoint_url,omitempty" example:"https://login.example.com/oauth2/token"`
	OAuthClientID         *string `json:"sasl_oauthbearer_client_id,omitempty" example:"kmirror"`
	OAuthClientSecret     *string `json:"sasl_oauthbearer_client_secret,omitempty"`
	OAuthScope            *string `json:"sasl_oauthbearer_scope,omitempty" example:"kafka"`
	// OAuthExtensions replaces the whole set; {} clears it.
	OAuthExtensions *map[string]string `json:"sasl_oauthbearer_extensions,omitempty" example:"logicalCluster:lkc-abc123"`

	// SchemaRegistry changes the given registry fields; omitted ones stay.
	// {"urls": []} removes the registry with all its settings.
	SchemaRegistry *SchemaRegistryPatch `json:"schema_registry,omitempty"`
} // @name SourcePatch

// SchemaRegistryPatch changes the given fields of the source's Schema
// Registry; omitted ones stay, and "" clears one. urls replaces the whole
// list; an empty list removes the registry, every field of it, and then
// takes no other field. The result must be a valid registry as a whole
// (see SchemaRegistrySpec), or none.
type SchemaRegistryPatch struct {
	URLs              *[]string `json:"urls,omitempty" example:"https://registry.example.com:8081"`
	BasicAuthUsername *string   `json:"basic_auth_username,omitempty" example:"kmirror"`
	BasicAuthPassword *string   `json:"basic_auth_password,omitempty" example:"s3cret"`
	BearerToken       *string   `json:"bearer_token,omitempty"`
	TLSCAPEM          *string   `json:"tls_ca_pem,omitempty"`
	TLSCertPEM        *string   `json:"tls_cert_pem,omitempty"`
	TLSKeyPEM         *string   `json:"tls_key_pem,omitempty"`
	TLSServerName     *string   `json:"tls_server_name,omitempty" example:"registry.example.com"`
} // @name SchemaRegistryPatch

// UpdateMirrorRequest is the body of PATCH /v1/mirrors/{mirror}: a merge
// patch. A config key set to null returns to its default.
type UpdateMirrorRequest struct {
	Source *SourcePatch `json:"source,omitempty"`
	// Config sets the given keys; a key set to null returns to its default.
	Config map[string]*string `json:"config,omitempty" extensions:"x-nullable-values" example:"mirror.metadata.refresh.interval.ms:10000"`
} // @name UpdateMirrorRequest

// SourceView is a source connection as returned: secrets show only whether
// they are set.
type SourceView struct {
	BootstrapServers string           `json:"bootstrap_servers" example:"h1:9092,h2:9092"`
	SecurityProtocol SecurityProtocol `json:"security_protocol" example:"PLAINTEXT"`
	SASLMechanism    SASLMechanism    `json:"sasl_mechanism,omitempty" example:"SCRAM-SHA-512"`
	SASLUsername     string           `json:"sasl_username,omitempty" example:"kmirror"`
	SASLPasswordSet  bool             `json:"sasl_password_set" example:"false"`
	TLSCAPEM         string           `json:"tls_ca_pem,omitempty"`
	TLSCertPEM       string           `json:"tls_cert_pem,omitempty"`
	TLSKeySet        bool             `json:"tls_key_set" example:"false"`
	TLSServerName    string           `json:"tls_server_name,omitempty" example:"kafka.example.com"`

	AWSAccessKeyID        string `json:"aws_access_key_id,omitempty" example:"AKIAIOSFODNN7EXAMPLE"`
	AWSSecretAccessKeySet bool   `json:"aws_secret_access_key_set" example:"false"`
	AWSSessionTokenSet    bool   `json:"aws_session_token_set" example:"false"`
	AWSRegion             string `json:"aws_region,omitempty" example:"us-east-1"`

	OAuthTokenEndpointURL string            `json:"sasl_oauthbearer_token_endpoint_url,omitempty" example:"https://login.example.com/oauth2/token"`
	OAuthClientID         string            `json:"sasl_oauthbearer_client_id,omitempty" example:"kmirror"`
	OAuthClientSecretSet  bool              `json:"sasl_oauthbearer_client_secret_set" example:"false"`
	OAuthScope            string            `json:"sasl_oauthbearer_scope,omitempty" example:"kafka"`
	OAuthExtensions       map[string]string `json:"sasl_oauthbearer_extensions,omitempty" example:"logicalCluster:lkc-abc123"`

	// SchemaRegistry is the source's Schema Registry; absent when the
	// mirror names none.
	SchemaRegistry *SchemaRegistryView `json:"schema_registry,omitempty"`
} // @name SourceView

// SchemaRegistryView is a Schema Registry's connection as returned: secrets
// show only whether they are set.
type SchemaRegistryView struct {
	URLs                 []string `json:"urls" example:"https://registry.example.com:8081"`
	BasicAuthUsername    string   `json:"basic_auth_username,omitempty" example:"kmirror"`
	BasicAuthPasswordSet bool     `json:"basic_auth_password_set" example:"false"`
	BearerTokenSet       bool     `json:"bearer_token_set" example:"false"`
	TLSCAPEM             string   `json:"tls_ca_pem,omitempty"`
	TLSCertPEM           string   `json:"tls_cert_pem,omitempty"`
	TLSKeyPEMSet         bool     `json:"tls_key_pem_set" example:"false"`
	TLSServerName        string   `json:"tls_server_name,omitempty" example:"registry.example.com"`
} // @name SchemaRegistryView

// Mirror is a mirror as returned by the API.
type Mirror struct {
	Name   string     `json:"name" example:"m1"`
	Source SourceView `json:"source"`
	// State is needs_credentials after kmirror restore for a mirror that
	// had secrets: __mirror_state never carries them, so its partitions and
	// metadata sync wait (they keep their restored state and are not
	// leased) until a PATCH sets every secret in missing_credentials; then
	// it is ready and they resume.
	State MirrorState `json:"state" example:"ready"`
	// MissingCredentials names the source secrets still to be set again
	// (sasl_password, tls_key_pem, aws_secret_access_key,
	// aws_session_token, sasl_oauthbearer_client_secret,
	// schema_registry.basic_auth_password, schema_registry.bearer_token,
	// schema_registry.tls_key_pem: paths under source); empty when ready.
	MissingCredentials []string `json:"missing_credentials"`
	// Config holds the keys set on this mirror.
	Config map[string]string `json:"config" example:"mirror.metadata.refresh.interval.ms:10000"`
	// EffectiveConfig holds every key with its set or default value.
	EffectiveConfig map[string]string `json:"effective_config" example:"mirror.metadata.refresh.interval.ms:10000"`
	// LastSync is the result of the last metadata sync pass, if any.
	LastSync *service.SyncResult `json:"last_sync,omitempty"`
	// SchemaSync is the result of the last Schema Registry sync pass: the
	// subjects copied into the destination registry with their ids, their
	// modes (READONLY while mirrored, READWRITE after a failover), and
	// errors. Absent without a source schema_registry, or before the first
	// pass (which needs a server with a destination registry).
	SchemaSync *service.SchemaSyncResult `json:"schema_sync,omitempty"`
	// Status summarizes the mirror's topics and partitions.
	Status    MirrorStatus `json:"status"`
	CreatedAt time.Time    `json:"created_at" format:"date-time" example:"2026-01-02T15:04:05Z"`
	UpdatedAt time.Time    `json:"updated_at" format:"date-time" example:"2026-01-02T15:04:05Z"`
	// Incarnation tells this mirror from earlier, deleted mirrors of the
	// same name: each creation takes a new, greater one. Its events carry
	// it as mirror_incarnation.
	Incarnation int64 `json:"incarnation" example:"7"`
} // @name Mirror

// MirrorStatus summarizes a mirror's topics and partitions.
type MirrorStatus struct {
	Topics     int `json:"topics" example:"2"`
	Partitions int `json:"partitions" example:"4"`
	// States counts partitions by actual state (UNKNOWN included); states
	// no partition is in are left out.
	States PartitionStateCounts `json:"states"`
	// Lag sums the known per-partition lag.
	Lag int64 `json:"lag" example:"3"`
	// Erroring counts partitions with an error: FAILED, or retrying in
	// their state.
	Erroring int `json:"erroring" example:"0"`
	// RecordsPerSec is the latest rate this API instance sampled (see
	// GET /v1/history); 0 until known.
	RecordsPerSec float64 `json:"records_per_sec" format:"double" example:"120.5"`
	// ThrottledSeconds sums, over the mirror's partitions, how long their
	// copies have waited for the mirror's replication throttle
	// (mirror.replication.throttled.rate), each since it was added.
	ThrottledSeconds float64 `json:"throttled_seconds" format:"double" example:"12.5"`
	// Realigning counts the mirror's partitions whose new owner is
	// re-aligning them after taking them over (see PartitionRow's
	// realigning).
	Realigning int `json:"realigning" example:"0"`
	// MaxLagMs is the mirror's lag in time, the RPO: the largest lag_ms of
	// its partitions (the age of the oldest source record not yet on the
	// destination), among those where it is known. Null when no
	// partition's is known.
	MaxLagMs *int64 `json:"max_lag_ms" extensions:"x-nullable" example:"3200"`
	// Source is whether the mirror's source cluster answers the holder of
	// its metadata lease.
	Source ClusterReachability `json:"source"`
	// Destination is whether the destination cluster answers every live
	// instance (unreachable when one fails to reach it).
	Destination ClusterReachability `json:"destination"`
} // @name MirrorStatus

// ClusterReachability is whether kmirror reaches a Kafka cluster, as its
// probes (a metadata request every few seconds) last found.
type ClusterReachability struct {
	// Reachable is null while unknown: no live instance has probed the
	// cluster yet, or the one that did stopped renewing its lease.
	Reachable *bool `json:"reachable" extensions:"x-nullable" example:"true"`
	// Since is when the answer last changed.
	Since *time.Time `json:"since" format:"date-time" extensions:"x-nullable" example:"2026-01-02T15:04:05Z"`
	// Error is why the last probe failed, while unreachable.
	Error *string `json:"error" extensions:"x-nullable" example:"dial tcp 10.0.0.7:9092: connect: connection refused"`
} // @name ClusterReachability

func clusterReachabilityView(c service.ClusterReachability) ClusterReachability {
	if !c.Known {
		return ClusterReachability{}
	}
	v := ClusterReachability{Reachable: &c.Reachable, Since: &c.Since}
	if c.Error != "" {
		v.Error = &c.Error
	}
	return v
}

// MirrorList is the body of GET /v1/mirrors.
type MirrorList struct {
	Mirrors []Mirror `json:"mirrors"`
} // @name MirrorList

// TopicsRequest selects topics by an RE2 pattern matched against whole names.
type TopicsRequest struct {
	// Topic is an RE2 pattern that must match a whole topic name.
	Topic string `json:"topic" example:"orders|payments"`
} // @name TopicsRequest

// AddTopicsRequest is the body of topics:add.
type AddTopicsRequest struct {
	// Topic is an RE2 pattern that must match a whole topic name.
	Topic string `json:"topic" example:"orders|payments"`
	// ReplicationFactor of the destination topics that kmirror creates: 1
	// to 32767, or -1 (the same as omitting it) for the destination
	// cluster's default.replication.factor. A restarted topic keeps its
	// factor unless one is given.
	ReplicationFactor *int `json:"replication_factor,omitempty" minimum:"-1" maximum:"32767" example:"3"`
	// Recreate, when restarting a stopped topic, drops and recreates the
	// destination topic instead of failing on divergent writes.
	Recreate bool `json:"recreate,omitempty"`
	// Continue accepts a destination topic that already holds the source's
	// history, as after a failover when the source was mirrored from this
	// destination (failback): each partition proves the overlap from the
	// offset map in the source cluster's own __mirror_state, compares its
	// last records, and mirrors only what follows it. A partition whose
	// destination holds records past the last mirrored offset (a divergent
	// tail) goes FAILED naming them, unless keep_divergent. Where the
	// source's __mirror_state has no mirror of the partition, the
	// destination's last records are found on the source and compared one
	// by one instead. Not with recreate.
	Continue bool `json:"continue,omitempty"`
	// KeepDivergent, with continue, keeps a divergent tail and mirrors
	// after it instead of failing the partition: the tail's range is in
	// describe (divergent_tail) and in the partition's event, and offset
	// translation rounds down across it.
	KeepDivergent bool `json:"keep_divergent,omitempty"`
} // @name AddTopicsRequest

// TopicsResult lists the topics an action applied to.
type TopicsResult struct {
	Mirror string       `json:"mirror" example:"m1"`
	Action TopicsAction `json:"action" example:"add"`
	// Topics are the topics acted on, sorted.
	Topics []string `json:"topics" example:"orders,payments"`
	// Matches, for an add (dry run or not), are the source topics the
	// pattern matched with their partition counts, sorted by topic.
	Matches []TopicMatch `json:"matches,omitempty"`
	// Failover, for a remove with dry_run, is per matched topic (sorted)
	// what the destination does not have yet: what a failover now would
	// leave behind.
	Failover []TopicFailoverPreview `json:"failover,omitempty"`
	// Continuation, for an add with dry_run and continue, is per matched
	// topic (sorted) what each partition would do when it starts: how the
	// overlap with the source is proven, what is left to copy, and any
	// divergent tail.
	Continuation []TopicContinuation `json:"continuation,omitempty"`
	// Wait, present when the call was made with ?wait, is how far the
	// partitions of each topic got towards the action's target state.
	Wait *TopicsWait `json:"wait,omitempty"`
} // @name TopicsResult

// TopicsWait is the outcome of a topic action's ?wait.
type TopicsWait struct {
	// Completed says every partition reached the target state. False when
	// the wait ran out first (not an error: topics hold the current
	// counts) or, for add, pause and resume, when some partitions went
	// FAILED, which ends the wait. A remove's wait goes on past FAILED
	// partitions: they reach STOPPED by themselves.
	Completed bool `json:"completed" example:"true"`
	// WaitedMs is how long the call waited, in milliseconds.
	WaitedMs int64 `json:"waited_ms" example:"1830"`
	// Topics are the topics acted on, sorted, with their progress.
	Topics []TopicWaitProgress `json:"topics"`
} // @name TopicsWait

// TopicWaitProgress is one topic's progress towards the action's target
// state: add and resume wait for MIRRORING, pause for PAUSED, remove for
// STOPPED.
type TopicWaitProgress struct {
	Topic string `json:"topic" example:"orders"`
	// DestinationTopic is the topic's destination name.
	DestinationTopic string         `json:"destination_topic" example:"east.orders"`
	TargetState      PartitionState `json:"target_state" example:"MIRRORING"`
	// Ready counts the partitions in the target state.
	Ready int `json:"ready" example:"3"`
	// Failed counts the FAILED partitions (see GET /v1/partitions?state=FAILED).
	Failed int `json:"failed" example:"0"`
	// Total counts the topic's partitions.
	Total int `json:"total" example:"3"`
} // @name TopicWaitProgress

// TopicMatch is a source topic an add's pattern matched.
type TopicMatch struct {
	Topic string `json:"topic" example:"orders"`
	// DestinationTopic is the topic it is (or would be) written to on the
	// destination: the mirror's topic.name.prefix and topic (a restarted
	// topic keeps the name it was first added with).
	DestinationTopic string `json:"destination_topic" example:"east.orders"`
	Partitions       int    `json:"partitions" example:"5"`
	// ForeignRecords, for an add with dry_run and recreate, is how many
	// records the destination topic holds that this mirror did not write
	// (0 when it is missing or empty): recreating it deletes them.
	ForeignRecords *int64 `json:"foreign_records,omitempty" example:"1200"`
} // @name TopicMatch

// TopicFailoverPreview is what one topic's destination does not have yet,
// as a remove's dry run reads it.
type TopicFailoverPreview struct {
	Topic string `json:"topic" example:"orders"`
	// DestinationTopic is the destination topic a remove makes writable.
	DestinationTopic string `json:"destination_topic" example:"east.orders"`
	// Lag is the sum of the partitions' lags, in records (source offsets).
	Lag int64 `json:"lag" example:"12"`
	// Records is the data records a failover now would leave behind: the
	// sum of the partitions' records, with a partition's lag where its
	// records were not counted, so never below the loss; transaction
	// markers and aborted records, which lag counts, are left out.
	Records int64 `json:"records" example:"6"`
	// Partitions are the topic's partitions, by number.
	Partitions []PartitionFailoverPreview `json:"partitions"`
} // @name TopicFailoverPreview

// PartitionFailoverPreview is what one partition's destination does not
// have yet.
type PartitionFailoverPreview struct {
	Partition int32 `json:"partition" example:"1"`
	// State is the partition's state now.
	State PartitionState `json:"state" example:"MIRRORING"`
	// NextOffset is the next source offset to mirror, as describe takes it
	// (0 before anything was mirrored).
	NextOffset int64 `json:"next_offset" example:"340"`
	// SourceEndOffset is the source partition's last stable offset, read
	// from the source cluster for this call; null when the source no
	// longer has the partition.
	SourceEndOffset *int64 `json:"source_end_offset" extensions:"x-nullable" example:"352"`
	// Lag is source_end_offset − next_offset (never below 0): the records
	// a failover now would leave behind, in source offsets (transaction
	// markers and aborted records count, as in describe); null when
	// source_end_offset is.
	Lag *int64 `json:"lag" extensions:"x-nullable" example:"12"`
	// Records is how many data records the lag holds: committed records,
	// transaction markers and aborted records left out. Null when lag is,
	// or when the lag is too long to read whole (more than 512 offsets):
	// lag then bounds it.
	Records *int64 `json:"records" extensions:"x-nullable" example:"6"`
	// NewestNotCopied is the timestamp of the source's last committed
	// record when lag > 0: the newest data the destination lacks. Null
	// when nothing committed is missing (or, rarely, when the last 512
	// offsets before the end hold no committed record: a long aborted
	// transaction).
	NewestNotCopied *time.Time `json:"newest_not_copied" format:"date-time" extensions:"x-nullable" example:"2026-12-04T17:20:01.123Z"`
	// OldestNotCopied is the timestamp of the first committed record the
	// destination lacks, when lag > 0: the oldest data a failover now
	// would lose (the RPO). Null when nothing committed is missing (or,
	// rarely, when the first 520 offsets after next_offset hold no
	// committed record: a long aborted transaction).
	OldestNotCopied *time.Time `json:"oldest_not_copied" format:"date-time" extensions:"x-nullable" example:"2026-12-04T17:19:58.020Z"`
	// OldestNotCopiedAgeMs is how old oldest_not_copied was when the
	// preview was made, in milliseconds; null with it.
	OldestNotCopiedAgeMs *int64 `json:"oldest_not_copied_age_ms" extensions:"x-nullable" example:"3200"`
} // @name PartitionFailoverPreview

// TopicContinuation is what an add with continue would do with one topic's
// destination.
type TopicContinuation struct {
	Topic string `json:"topic" example:"orders"`
	// DestinationTopic is the destination topic whose history would be
	// continued.
	DestinationTopic string `json:"destination_topic" example:"east.orders"`
	// DestinationMissing: the destination has no such topic yet; it would be
	// created and copied whole.
	DestinationMissing bool `json:"destination_missing" example:"false"`
	// Partitions are the source topic's partitions, by number.
	Partitions []PartitionContinuation `json:"partitions"`
} // @name TopicContinuation

// PartitionContinuation is what one partition would do when it starts.
type PartitionContinuation struct {
	Partition int32 `json:"partition" example:"0"`
	// Outcome: copy (the destination holds nothing: copied from the
	// source's start), resume (this mirror wrote the destination and resumes
	// from its own checkpoint), continue (the destination's records are
	// proven to be the source's history: only what follows is copied) or
	// fail (the partition would go FAILED; detail says why).
	Outcome string `json:"outcome" enums:"copy,resume,continue,fail" example:"continue"`
	// Proof: offset_map (the offset map of the mirror that copied the other
	// way, from the source's __mirror_state, its last record compared on
	// both clusters) or records (the destination's last records found on
	// the source and compared one by one). Absent unless outcome is
	// continue.
	Proof string `json:"proof,omitempty" enums:"offset_map,records" example:"offset_map"`
	// ProvenBy names the mirror whose offset map proved the overlap.
	ProvenBy string `json:"proven_by,omitempty" example:"ab"`
	// The destination partition's offsets [start, end) and the source's
	// last stable offset, read for this call.
	DestinationStartOffset int64 `json:"destination_start_offset" example:"0"`
	DestinationEndOffset   int64 `json:"destination_end_offset" example:"10652"`
	SourceEndOffset        int64 `json:"source_end_offset" example:"10500"`
	// OverlapSourceOffset and OverlapDestinationOffset are the last record
	// both clusters hold (source and destination offsets); null when
	// nothing was proven.
	OverlapSourceOffset      *int64 `json:"overlap_source_offset" extensions:"x-nullable" example:"10239"`
	OverlapDestinationOffset *int64 `json:"overlap_destination_offset" extensions:"x-nullable" example:"10239"`
	// RecordsToCopy is the source offsets left to copy from where
	// mirroring would start to the source's end (transaction markers and
	// aborted records count, and are never copied).
	RecordsToCopy int64 `json:"records_to_copy" example:"260"`
	// DivergentTail is what the destination holds past the overlap that
	// the source never had; absent when there is none.
	DivergentTail *DivergentTail `json:"divergent_tail,omitempty"`
	// Detail says how the overlap was proven, or why it cannot be.
	Detail string `json:"detail" example:"destination offsets up to 10239 are the source's up to 10239, by mirror ab's offset map"`
} // @name PartitionContinuation

// DivergentTail is a range of destination offsets holding records that the
// source never had: written to the destination after the mirror in the
// other direction last read it (an unplanned failover).
type DivergentTail struct {
	// StartOffset and EndOffset bound the tail: destination offsets
	// [start_offset, end_offset).
	StartOffset int64 `json:"start_offset" example:"10240"`
	EndOffset   int64 `json:"end_offset" example:"10652"`
	// Records is how many records it holds (transaction markers and
	// aborted records not counted).
	Records int64 `json:"records" example:"412"`
} // @name DivergentTail

// Topic is a mirror topic with a summary of its partitions.
type Topic struct {
	Mirror string `json:"mirror" example:"m1"`
	// Topic is the source topic's name, which names the mirror topic in
	// every path and filter.
	Topic string `json:"topic" example:"orders"`
	// DestinationTopic is the topic it is written to on the destination:
	// the mirror's topic.name.prefix, as it was when the topic was first
	// added, and topic.
	DestinationTopic string       `json:"destination_topic" example:"east.orders"`
	DesiredState     DesiredState `json:"desired_state" example:"mirroring"`
	// ReplicationFactor of the destination topic kmirror creates; -1 is the
	// destination cluster's default.
	ReplicationFactor int `json:"replication_factor" minimum:"-1" example:"3"`
	// Recreate says the next restart drops and recreates the destination
	// topic (topics:add with recreate).
	Recreate bool `json:"recreate" example:"false"`
	// ReadOnlyEnforced: see PartitionRow.
	ReadOnlyEnforced *bool `json:"read_only_enforced" extensions:"x-nullable"`
	Partitions       int   `json:"partitions" example:"3"`
	// States counts partitions by actual state.
	States PartitionStateCounts `json:"states"`
	// Lag sums the known per-partition lag.
	Lag int64 `json:"lag" example:"0"`
	// RecordsPerSec is the latest rate this API instance sampled (see
	// GET /v1/history); 0 until known.
	RecordsPerSec float64   `json:"records_per_sec" format:"double" example:"40.2"`
	CreatedAt     time.Time `json:"created_at" format:"date-time" example:"2026-01-02T15:04:05Z"`
	UpdatedAt     time.Time `json:"updated_at" format:"date-time" example:"2026-01-02T15:04:05Z"`
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
	Mirror string `json:"mirror" example:"m1"`
	// Topic is the source topic.
	Topic string `json:"topic" example:"orders"`
	// DestinationTopic is the topic it is written to on the destination
	// (the mirror's topic.name.prefix and topic).
	DestinationTopic string `json:"destination_topic" example:"east.orders"`
	Partition        int32  `json:"partition" example:"0"`
	// SourceOffset is the source end offset, when known.
	SourceOffset *int64 `json:"source_offset" extensions:"x-nullable" example:"69"`
	// DestinationOffset is the destination end offset, when known.
	DestinationOffset *int64 `json:"destination_offset" extensions:"x-nullable" example:"66"`
	// Lag is source end offset − next source offset to mirror.
	Lag   *int64         `json:"lag" extensions:"x-nullable" example:"3"`
	State PartitionState `json:"state" example:"MIRRORING"`
	// Error is the partition's current error: why it is FAILED (kept
	// while a retry runs), or what it keeps retrying in its state; null
	// when there is none.
	Error *string `json:"error" extensions:"x-nullable" example:"source cluster 127.0.0.1:19092: dial tcp: connection refused"`
	// RetryAttempt counts the retries of a failing partition: while FAILED
	// and through each retry, until it mirrors again (0 otherwise).
	RetryAttempt int `json:"retry_attempt" example:"0"`
	// LostRecords counts source records removed by retention before they
	// were mirrored.
	LostRecords int64 `json:"lost_records" example:"0"`
	// Owner is the instance holding (or, when lease_live is false, last
	// holding) the partition's lease; null when none does.
	Owner *string `json:"owner" extensions:"x-nullable" example:"vm-a"`
	// ReadOnlyEnforced says whether a DENY WRITE ACL keeps the destination
	// topic read-only (false: the destination has no authorizer); null
	// until the topic is first mirrored.
	ReadOnlyEnforced *bool `json:"read_only_enforced" extensions:"x-nullable"`
	// LeaseLive says a live instance holds the partition's lease. False
	// for a partition nobody owns or whose owner stopped renewing (after a
	// crash, until another takes over): its state is then what the last
	// owner left, not what is happening.
	LeaseLive bool `json:"lease_live" example:"true"`
	// OwnerRenewedAt is when the owner last renewed its lease session;
	// null without an owner.
	OwnerRenewedAt *time.Time `json:"owner_renewed_at" format:"date-time" extensions:"x-nullable" example:"2026-01-02T15:04:05Z"`
	// ProgressedAt is when the checkpoint last moved forward; null before
	// it first does.
	ProgressedAt *time.Time `json:"progressed_at" format:"date-time" extensions:"x-nullable" example:"2026-01-02T15:04:05Z"`
	// LastMirroredSourceOffset is the source offset of the last record
	// copied, kept once the partition is STOPPED (after a failover, where a
	// failback continues from); current while it mirrors. Not source_offset
	// − 1 nor the checkpoint: transaction markers are never copied. Null
	// while nothing was copied.
	LastMirroredSourceOffset *int64 `json:"last_mirrored_source_offset" extensions:"x-nullable" example:"1234"`
	// LastMirroredDestinationOffset is the destination offset of that
	// record; null with LastMirroredSourceOffset.
	LastMirroredDestinationOffset *int64 `json:"last_mirrored_destination_offset" extensions:"x-nullable" example:"1230"`
	// DivergentTail is the tail a failback with keep_divergent kept and
	// mirrored after: destination records the source never had, for
	// someone to reprocess. Absent when none was kept.
	DivergentTail *DivergentTail `json:"divergent_tail,omitempty"`
	// ThrottledMs is how long this partition's copies have waited for the
	// mirror's replication throttle (mirror.replication.throttled.rate), in
	// all since it was added.
	ThrottledMs int64 `json:"throttled_ms" example:"1500"`
	// Realigning is true while the partition's new owner re-aligns it
	// after taking it over: it keeps the state it was left in (MIRRORING,
	// PAUSING or STOPPING) until alignment has found where to resume.
	Realigning bool `json:"realigning" example:"false"`
	// LagMs is the lag in time, in milliseconds: how old the oldest source
	// record not yet on the destination is (now − its timestamp, by the
	// database's clock), 0 when caught up. It keeps growing while the
	// partition is paused, failed or its owner gone. Null when unknown:
	// the source end is not known, or the checkpoint moved since the
	// record's timestamp was last read (it is read again within seconds).
	LagMs *int64 `json:"lag_ms" extensions:"x-nullable" example:"3200"`
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
	// DestinationTopic is the topic destination_offset is in: the mirror
	// topic's destination name.
	DestinationTopic  string `json:"destination_topic" example:"east.orders"`
	SourceOffset      int64  `json:"source_offset" example:"120"`
	DestinationOffset int64  `json:"destination_offset" example:"118"`
	// Exact is false when the source offset was not itself a mirrored
	// record and the answer rounded to the earlier destination offset.
	Exact bool `json:"exact" example:"true"`
} // @name Translation

// Instance is a kmirror server process.
type Instance struct {
	ID        string    `json:"id" example:"vm-a"`
	Hostname  string    `json:"hostname" example:"vm-a.example.com"`
	Version   string    `json:"version" example:"1.0.0"`
	StartedAt time.Time `json:"started_at" format:"date-time" example:"2026-01-02T15:04:05Z"`
	// HeartbeatAt is when the instance last renewed its session in the
	// database, the clock its leases hang on (its start before it opened
	// one).
	HeartbeatAt time.Time `json:"heartbeat_at" format:"date-time" example:"2026-01-02T15:04:05Z"`
	// StoppedAt is when the instance stopped cleanly; absent while it runs.
	StoppedAt *time.Time `json:"stopped_at,omitempty" format:"date-time" example:"2026-01-02T15:04:05Z"`
	// Live says its session has not expired.
	Live bool `json:"live" example:"true"`
	// TakesLeases is false for an instance that runs only the control plane
	// (started without a destination cluster): it mirrors nothing and is
	// not counted when partitions are shared out.
	TakesLeases bool `json:"takes_leases" example:"true"`
	// Leases counts the partitions whose lease this instance's live
	// session holds.
	Leases int `json:"leases" example:"12"`
} // @name Instance

// InstanceList is the body of GET /v1/instances.
type InstanceList struct {
	Instances []Instance `json:"instances"`
} // @name InstanceList

// EventStreamMessage is one message of the GET /v1/events stream as
// server-sent events frame it, "id: 42\nevent: topics.added\ndata: {...}\n\n":
// the event's id (for Last-Event-ID), its kind, and the Event as JSON, in
// the shape of its kind. It describes the stream; the server writes the
// frames itself. Data has no doc comment on purpose: swag would wrap the
// reference in an allOf to carry it, and openapi-typescript reads an allOf
// of a schema with a discriminator as inheritance and drops kind, which is
// what narrows an Event.
type EventStreamMessage struct {
	// ID is the event's id, as a decimal string.
	ID string `json:"id" example:"42"`
	// Event is the SSE event name: the event's kind.
	Event EventKind `json:"event" example:"topics.added"`
	Data  Event     `json:"data"`
} // @name EventStreamMessage

// History is the lag and throughput this API instance sampled.
type History struct {
	// IntervalSeconds is the time between samples.
	IntervalSeconds float64 `json:"interval_seconds" format:"double" example:"5"`
	// WindowSeconds is how far back samples are kept.
	WindowSeconds float64         `json:"window_seconds" format:"double" example:"600"`
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
	At time.Time `json:"at" format:"date-time" example:"2026-01-02T15:04:05Z"`
	// Lag sums the known per-partition lag.
	Lag int64 `json:"lag" example:"3"`
	// RecordsPerSec is how many records were mirrored per second since the
	// previous sample; 0 on a series' first point.
	RecordsPerSec float64 `json:"records_per_sec" format:"double" example:"120.5"`
	// LagSeconds is the lag in time: the age of the oldest source record
	// not yet on the destination, the largest over the series' partitions
	// whose lag in time is known (see PartitionRow's lag_ms). Null when
	// none is known.
	LagSeconds *float64 `json:"lag_seconds" format:"double" extensions:"x-nullable" example:"3.2"`
} // @name HistoryPoint

// Whoami is the caller as the server sees it.
type Whoami struct {
	// AuthEnabled says the server checks bearer tokens.
	AuthEnabled bool `json:"auth_enabled" example:"true"`
	// Name is the caller's token name, the actor the audit trail records;
	// "anonymous" when the server has no tokens.
	Name string `json:"name" example:"ci"`
	Role Role   `json:"role" example:"operator"`
} // @name Whoami

// Health is the body of /healthz and /readyz.
type Health struct {
	Status string `json:"status" enums:"ok,ready" example:"ok"`
} // @name Health

// TopicState is a topic whose state refused an action (in a 409 problem):
// its desired state on this mirror, or the other mirror that mirrors it.
type TopicState struct {
	Topic string `json:"topic" example:"orders"`
	// DesiredState is the topic's desired state on this mirror; absent
	// when mirrored_by is set.
	DesiredState DesiredState `json:"desired_state,omitempty" example:"paused"`
	// MirroredBy names another mirror that mirrors the topic.
	MirroredBy string `json:"mirrored_by,omitempty" example:"m2"`
	// DestinationTopic, with mirrored_by, is the destination topic that
	// other mirror writes, which this topic would be written to too.
	DestinationTopic string `json:"destination_topic,omitempty" example:"east.orders"`
} // @name TopicState

// PartitionStateCounts counts partitions by actual state; a state no
// partition is in is left out.
type PartitionStateCounts struct {
	Unknown   int `json:"UNKNOWN,omitempty" example:"0"`
	Preparing int `json:"PREPARING,omitempty" example:"0"`
	Mirroring int `json:"MIRRORING,omitempty" example:"3"`
	Pausing   int `json:"PAUSING,omitempty" example:"0"`
	Paused    int `json:"PAUSED,omitempty" example:"1"`
	Stopping  int `json:"STOPPING,omitempty" example:"0"`
	Stopped   int `json:"STOPPED,omitempty" example:"0"`
	Failed    int `json:"FAILED,omitempty" example:"0"`
} // @name PartitionStateCounts

// add counts n partitions in state, named as PartitionState names it.
func (c *PartitionStateCounts) add(state string, n int) {
	switch PartitionState(state) {
	case PartitionStateUnknown:
		c.Unknown += n
	case PartitionStatePreparing:
		c.Preparing += n
	case PartitionStateMirroring:
		c.Mirroring += n
	case PartitionStatePausing:
		c.Pausing += n
	case PartitionStatePaused:
		c.Paused += n
	case PartitionStateStopping:
		c.Stopping += n
	case PartitionStateStopped:
		c.Stopped += n
	case PartitionStateFailed:
		c.Failed += n
	}
}

func schemaRegistryView(r *service.SchemaRegistryRecord) *SchemaRegistryView {
	if r == nil {
		return nil
	}
	return &SchemaRegistryView{URLs: append([]string{}, r.URLs...), BasicAuthUsername: r.BasicAuthUsername,
		BasicAuthPasswordSet: r.BasicAuthPasswordSet, BearerTokenSet: r.BearerTokenSet, TLSCAPEM: r.TLSCAPEM,
		TLSCertPEM: r.TLSCertPEM, TLSKeyPEMSet: r.TLSKeyPEMSet, TLSServerName: r.TLSServerName}
}

func mirrorView(m service.Mirror) Mirror {
	src := m.Source
	v := Mirror{
		Name: m.Name,
		Source: SourceView{BootstrapServers: src.BootstrapServers, SecurityProtocol: SecurityProtocol(src.SecurityProtocol),
			SASLMechanism: SASLMechanism(src.SASLMechanism), SASLUsername: src.SASLUsername,
			SASLPasswordSet: src.SASLPasswordSet, TLSCAPEM: src.TLSCAPEM, TLSCertPEM: src.TLSCertPEM,
			TLSKeySet: src.TLSKeySet, TLSServerName: src.TLSServerName,
			AWSAccessKeyID: src.AWSAccessKeyID, AWSSecretAccessKeySet: src.AWSSecretAccessKeySet,
			AWSSessionTokenSet: src.AWSSessionTokenSet, AWSRegion: src.AWSRegion,
			OAuthTokenEndpointURL: src.OAuthTokenEndpointURL, OAuthClientID: src.OAuthClientID,
			OAuthClientSecretSet: src.OAuthClientSecretSet, OAuthScope: src.OAuthScope, OAuthExtensions: src.OAuthExtensions,
			SchemaRegistry: schemaRegistryView(src.SchemaRegistry)},
		Config: m.Config, EffectiveConfig: service.EffectiveConfig(m.Config),
		Status: MirrorStatus{Topics: m.Status.Topics, Partitions: m.Status.Partitions,
			Lag: m.Status.Lag, Erroring: m.Status.Erroring, Realigning: m.Status.Realigning, MaxLagMs: m.Status.MaxLagMs,
			RecordsPerSec: m.Status.RecordsPerSec, ThrottledSeconds: float64(m.Status.ThrottledMs) / 1000,
			Source: clusterReachabilityView(m.Status.Source), Destination: clusterReachabilityView(m.Status.Destination)},
		State: MirrorState(m.State), MissingCredentials: append([]string{}, m.MissingCredentials...),
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, Incarnation: m.Incarnation,
	}
	for state, n := range m.Status.States {
		v.Status.States.add(state, n)
	}
	if len(m.LastSync) > 0 {
		var r service.SyncResult
		if json.Unmarshal(m.LastSync, &r) == nil {
			v.LastSync = &r
		}
	}
	if len(m.SchemaSync) > 0 {
		var r service.SchemaSyncResult
		if json.Unmarshal(m.SchemaSync, &r) == nil {
			v.SchemaSync = &r
		}
	}
	return v
}

func partitionView(p service.PartitionRow) PartitionRow {
	v := PartitionRow{Mirror: p.Mirror, Topic: p.Topic, DestinationTopic: p.DestinationTopic, Partition: p.Partition,
		SourceOffset: p.SourceOffset, DestinationOffset: p.DestinationOffset, Lag: p.Lag,
		State: PartitionState(p.State.String()), RetryAttempt: p.RetryAttempt,
		LostRecords: p.LostRecords, Owner: nonEmpty(p.Owner), ReadOnlyEnforced: p.ReadOnlyEnforced,
		LeaseLive: p.LeaseLive, OwnerRenewedAt: p.OwnerRenewedAt, ProgressedAt: p.ProgressedAt,
		ThrottledMs: p.ThrottledMs, Realigning: p.Realigning, LagMs: p.LagMs}
	v.Error = nonEmpty(p.Error)
	if l := p.LastMirrored; l != nil {
		v.LastMirroredSourceOffset, v.LastMirroredDestinationOffset = &l.SourceOffset, &l.DestinationOffset
	}
	v.DivergentTail = divergentTailView(p.DivergentTail)
	return v
}

func divergentTailView(t *service.DivergentTail) *DivergentTail {
	if t == nil {
		return nil
	}
	return &DivergentTail{StartOffset: t.Start, EndOffset: t.End, Records: t.Records}
}

func continuationView(t service.TopicContinuation, dest string) TopicContinuation {
	v := TopicContinuation{Topic: t.Topic, DestinationTopic: cmp.Or(dest, t.Topic), DestinationMissing: t.DestinationMissing,
		Partitions: make([]PartitionContinuation, len(t.Partitions))}
	for i, p := range t.Partitions {
		v.Partitions[i] = PartitionContinuation{Partition: p.Partition, Outcome: string(p.Outcome), Proof: string(p.Proof),
			ProvenBy: p.ProvenBy, DestinationStartOffset: p.DestinationStartOffset, DestinationEndOffset: p.DestinationEndOffset,
			SourceEndOffset: p.SourceEndOffset, OverlapSourceOffset: p.OverlapSourceOffset,
			OverlapDestinationOffset: p.OverlapDestinationOffset, RecordsToCopy: p.RecordsToCopy,
			DivergentTail: divergentTailView(p.DivergentTail), Detail: p.Detail}
	}
	return v
}

func topicView(t service.Topic, sum service.PartitionSummary) Topic {
	v := Topic{Mirror: t.Mirror, Topic: t.Topic, DestinationTopic: t.DestinationTopic, DesiredState: DesiredState(t.DesiredState),
		ReplicationFactor: t.ReplicationFactor, Recreate: t.Recreate, ReadOnlyEnforced: t.ReadOnlyEnforced, Partitions: t.Partitions,
		Lag: sum.Lag, RecordsPerSec: t.RecordsPerSec, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	for state, n := range sum.States {
		v.States.add(state.String(), n)
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
			if p.LagMs != nil {
				sec := float64(*p.LagMs) / 1000
				points[j].LagSeconds = &sec
			}
		}
		out.Series[i] = HistorySeries{Mirror: s.Mirror, Topic: s.Topic, Points: points}
	}
	return out
}
