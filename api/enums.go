package api

import "kmirror/service"

// The closed sets of values the API sends or accepts. Each is a named type
// with its constants, which swag turns into an enum schema (with the
// constants' names as x-enum-varnames, so generated clients name them the
// same); enums_test.go checks each list against the one the server uses.

// PartitionState is a mirror partition's actual state: the seed's lifecycle,
// in capitals. UNKNOWN is the absence of state (a partition no worker has
// prepared yet).
type PartitionState string // @name PartitionState

// The partition states, in lifecycle order.
const (
	PartitionStateUnknown   PartitionState = "UNKNOWN"   // no state yet
	PartitionStatePreparing PartitionState = "PREPARING" // aligning with the destination
	PartitionStateMirroring PartitionState = "MIRRORING" // copying records
	PartitionStatePausing   PartitionState = "PAUSING"   // settling in-flight records before PAUSED
	PartitionStatePaused    PartitionState = "PAUSED"    // not fetching; still read-only
	PartitionStateStopping  PartitionState = "STOPPING"  // saving the last offsets before STOPPED
	PartitionStateStopped   PartitionState = "STOPPED"   // not mirrored; the destination is writable
	PartitionStateFailed    PartitionState = "FAILED"    // retrying after a backoff, or waiting for an operator
)

// DesiredState is what an operator asked of a mirror topic, in lower case
// (a partition's actual state is in capitals: PartitionState).
type DesiredState string // @name DesiredState

// The desired states.
const (
	DesiredStateMirroring DesiredState = "mirroring" // topics:add or topics:resume
	DesiredStatePaused    DesiredState = "paused"    // topics:pause
	DesiredStateStopped   DesiredState = "stopped"   // topics:remove
)

// TopicsAction is the action a topics:* call took.
type TopicsAction string // @name TopicsAction

// The topic actions.
const (
	TopicsActionAdd    TopicsAction = "add"
	TopicsActionPause  TopicsAction = "pause"
	TopicsActionResume TopicsAction = "resume"
	TopicsActionRemove TopicsAction = "remove"
)

// MirrorState says whether a mirror can run.
type MirrorState string // @name MirrorState

// The mirror states.
const (
	MirrorStateReady            MirrorState = MirrorState(service.MirrorReady)            // every secret the mirror was configured with is set
	MirrorStateNeedsCredentials MirrorState = MirrorState(service.MirrorNeedsCredentials) // restored from __mirror_state without its secrets: nothing of it runs until PATCH sets missing_credentials again
)

// SecurityProtocol is Kafka's security.protocol of a source cluster.
type SecurityProtocol string // @name SecurityProtocol

// The security protocols.
const (
	SecurityProtocolPlaintext     SecurityProtocol = "PLAINTEXT"
	SecurityProtocolSSL           SecurityProtocol = "SSL"
	SecurityProtocolSASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SecurityProtocolSASLSSL       SecurityProtocol = "SASL_SSL"
)

// SASLMechanism is Kafka's sasl.mechanism, with SASL_PLAINTEXT or SASL_SSL.
type SASLMechanism string // @name SASLMechanism

// The SASL mechanisms.
const (
	SASLMechanismPlain       SASLMechanism = "PLAIN"
	SASLMechanismScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLMechanismScramSHA512 SASLMechanism = "SCRAM-SHA-512"
	SASLMechanismAWSMSKIAM   SASLMechanism = "AWS_MSK_IAM" // Amazon MSK's IAM access control
	SASLMechanismOAuthBearer SASLMechanism = "OAUTHBEARER" // OIDC tokens by the client credentials grant
)

// Role is what a caller may do; each role may do what the ones before it
// may.
type Role string // @name Role

// The roles, from the least to the most allowed.
const (
	RoleViewer   Role = "viewer"   // may only read (KMIRROR_API_READ_TOKEN is one)
	RoleOperator Role = "operator" // also add, pause, resume, remove and restart topics, and request a sync
	RoleAdmin    Role = "admin"    // also create, patch and delete mirrors (KMIRROR_API_TOKEN is one; anyone, when the server has no tokens)
)

// roles lists every role (checked by TestEnumsMatchTheServer).
var roles = []Role{RoleViewer, RoleOperator, RoleAdmin}

// EventKind is the kind of an event in the audit log (GET /v1/events).
type EventKind string // @name EventKind

// The event kinds.
const (
	EventKindMirrorCreated        EventKind = service.EventMirrorCreated        // a mirror was created
	EventKindMirrorUpdated        EventKind = service.EventMirrorUpdated        // a mirror's source or config changed
	EventKindMirrorDeleted        EventKind = service.EventMirrorDeleted        // a mirror was deleted
	EventKindMirrorSyncRequested  EventKind = service.EventSyncRequested        // a metadata sync pass was requested
	EventKindTopicsAdded          EventKind = service.EventTopicsAdded          // topics:add
	EventKindTopicsPaused         EventKind = service.EventTopicsPaused         // topics:pause
	EventKindTopicsResumed        EventKind = service.EventTopicsResumed        // topics:resume
	EventKindTopicsRemoved        EventKind = service.EventTopicsRemoved        // topics:remove
	EventKindTopicsAutoAdded      EventKind = service.EventTopicsAutoAdded      // the metadata sync added topics matching topics.include
	EventKindTopicsSourceDeleted  EventKind = service.EventTopicsSourceDeleted  // the metadata sync stopped topics deleted on the source
	EventKindTopicPartitionsAdded EventKind = service.EventTopicPartitionsAdded // the metadata sync grew a topic's partitions
	EventKindPartitionState       EventKind = service.EventPartitionState       // a partition changed state
	EventKindPartitionOwner       EventKind = service.EventPartitionOwner       // a new owner took over a partition and re-aligned it
	EventKindPartitionRealigned   EventKind = service.EventPartitionRealigned   // a mirroring partition re-aligned in place
	EventKindStateRestored        EventKind = service.EventStateRestored        // kmirror restore rebuilt the database
	EventKindSchemasCopied        EventKind = service.EventSchemasCopied        // the schema sync wrote versions to the destination registry
	EventKindSchemaSyncFailed     EventKind = service.EventSchemaSyncFailed     // a schema sync failed (or failed otherwise than the last)
	EventKindSchemaSyncRecovered  EventKind = service.EventSchemaSyncRecovered  // a schema sync succeeded after one that failed
	EventKindSchemasWritable      EventKind = service.EventSchemasWritable      // removed topics' destination subjects were made READWRITE
)

// ProblemType identifies the kind of an error; clients may switch on it.
type ProblemType string // @name ProblemType

// The problem types.
const (
	ProblemTypeMalformedJSON        ProblemType = "urn:kmirror:problem:malformed-json"         // 400: the body is not one JSON value
	ProblemTypeUnknownField         ProblemType = "urn:kmirror:problem:unknown-field"          // 400: the body has a field the API does not know
	ProblemTypeValidation           ProblemType = "urn:kmirror:problem:validation"             // 400: a bad value (see errors)
	ProblemTypeUnauthenticated      ProblemType = "urn:kmirror:problem:unauthenticated"        // 401: no valid bearer token
	ProblemTypeForbidden            ProblemType = "urn:kmirror:problem:forbidden"              // 403: the token's role does not allow the request
	ProblemTypeNotFound             ProblemType = "urn:kmirror:problem:not-found"              // 404: an unknown mirror, topic, partition or route
	ProblemTypeNoMatch              ProblemType = "urn:kmirror:problem:no-match"               // 404: a pattern matched nothing
	ProblemTypeMethodNotAllowed     ProblemType = "urn:kmirror:problem:method-not-allowed"     // 405
	ProblemTypeConflict             ProblemType = "urn:kmirror:problem:conflict"               // 409: a name taken, or topics whose state refuses the action (see topics)
	ProblemTypeInvalidTransition    ProblemType = "urn:kmirror:problem:invalid-transition"     // 409: a state change the lifecycle does not allow
	ProblemTypeBodyTooLarge         ProblemType = "urn:kmirror:problem:body-too-large"         // 413: a body over 1 MiB
	ProblemTypeUnsupportedMediaType ProblemType = "urn:kmirror:problem:unsupported-media-type" // 415: a body that is not JSON
	ProblemTypeRateLimited          ProblemType = "urn:kmirror:problem:rate-limited"           // 429: too many changes, or event streams, from one caller (Retry-After)
	ProblemTypeInternal             ProblemType = "urn:kmirror:problem:internal"               // 500: see the server log for the request id
	ProblemTypeSourceUnavailable    ProblemType = "urn:kmirror:problem:source-unavailable"     // 503: the source cluster did not answer
	ProblemTypeDatabaseUnavailable  ProblemType = "urn:kmirror:problem:database-unavailable"   // 503: PostgreSQL did not answer (Retry-After)
	ProblemTypeSyncUnavailable      ProblemType = "urn:kmirror:problem:sync-unavailable"       // 503: no instance runs the mirror's metadata sync
	ProblemTypeSyncTimeout          ProblemType = "urn:kmirror:problem:sync-timeout"           // 504: the sync pass did not finish in time
	ProblemTypeSecretKeyRequired    ProblemType = "urn:kmirror:problem:secret-key-required"    // 409: the request sets a source secret and the server has no key to encrypt it (nothing written)
	ProblemTypeSecretKeyUnavailable ProblemType = "urn:kmirror:problem:secret-key-unavailable" // 503: a stored secret is sealed under a key this server has not loaded yet (Retry-After)
	ProblemTypePreflightFailed      ProblemType = "urn:kmirror:problem:preflight-failed"       // 409: topics:add's checks of the clusters failed (see checks); nothing added
)
