package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"kmirror/repo"
)

// StateTopic is the compacted internal topic on the destination that
// mirrors Postgres (docs/design.md, "Where state lives"). It is never mirrored itself.
const StateTopic = "__mirror_state"

// ErrStateTopicMissing is a cluster without __mirror_state: no kmirror ever
// wrote to it (or it lost the topic).
var ErrStateTopicMissing = errors.New(StateTopic + " does not exist")

// RecordVersion is the schema version of __mirror_state values.
const RecordVersion = 1

// Keys of __mirror_state records (docs/design.md, "Where state lives").
func MirrorKey(mirror string) string       { return "mirror/" + mirror }
func TopicKey(mirror, topic string) string { return "topic/" + mirror + "/" + topic }
func PartitionKey(mirror, topic string, p int32) string {
	return fmt.Sprintf("partition/%s/%s/%d", mirror, topic, p)
}

// PartitionOfKey names the partition of a PartitionKey (names never hold a
// slash); ok is false for any other key.
func PartitionOfKey(key string) (id repo.PartitionID, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0] != "partition" {
		return repo.PartitionID{}, false
	}
	p, err := strconv.ParseInt(parts[3], 10, 32)
	if err != nil {
		return repo.PartitionID{}, false
	}
	return repo.PartitionID{Mirror: parts[1], Topic: parts[2], Partition: int32(p)}, true
}

// MirrorRecord is a mirror's configuration as published to __mirror_state.
// Secrets are never in it: only whether each one is set.
type MirrorRecord struct {
	Version   int               `json:"version"`
	Name      string            `json:"name"`
	Source    SourceRecord      `json:"source"`
	Config    map[string]string `json:"config"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// SourceRecord is a source connection without its secrets.
type SourceRecord struct {
	BootstrapServers string `json:"bootstrap_servers"`
	SecurityProtocol string `json:"security_protocol"`
	SASLMechanism    string `json:"sasl_mechanism,omitempty"`
	SASLUsername     string `json:"sasl_username,omitempty"`
	SASLPasswordSet  bool   `json:"sasl_password_set"`
	TLSCAPEM         string `json:"tls_ca_pem,omitempty"`
	TLSCertPEM       string `json:"tls_cert_pem,omitempty"`
	TLSKeySet        bool   `json:"tls_key_set"`
	TLSServerName    string `json:"tls_server_name,omitempty"`
	// AWS_MSK_IAM
	AWSAccessKeyID        string `json:"aws_access_key_id,omitempty"`
	AWSSecretAccessKeySet bool   `json:"aws_secret_access_key_set,omitempty"`
	AWSSessionTokenSet    bool   `json:"aws_session_token_set,omitempty"`
	AWSRegion             string `json:"aws_region,omitempty"`
	// OAUTHBEARER
	OAuthTokenEndpointURL string            `json:"sasl_oauthbearer_token_endpoint_url,omitempty"`
	OAuthClientID         string            `json:"sasl_oauthbearer_client_id,omitempty"`
	OAuthClientSecretSet  bool              `json:"sasl_oauthbearer_client_secret_set,omitempty"`
	OAuthScope            string            `json:"sasl_oauthbearer_scope,omitempty"`
	OAuthExtensions       map[string]string `json:"sasl_oauthbearer_extensions,omitempty"`
	// SchemaRegistry is the source Schema Registry, if the mirror names one.
	SchemaRegistry *SchemaRegistryRecord `json:"schema_registry,omitempty"`
}

// TopicRecord is a mirror topic's desired state as published to __mirror_state.
type TopicRecord struct {
	Version int    `json:"version"`
	Mirror  string `json:"mirror"`
	Topic   string `json:"topic"`
	// DestinationTopic is the topic's destination name. Records published
	// before it was kept have none: the mirror's topic.name.prefix and
	// Topic name it then (StateSnapshot.DestinationTopic).
	DestinationTopic  string       `json:"destination_topic,omitempty"`
	DesiredState      DesiredState `json:"desired_state"`
	ReplicationFactor int          `json:"replication_factor"`
	Recreate          bool         `json:"recreate"`
	Partitions        int          `json:"partitions"`
	UpdatedAt         time.Time    `json:"updated_at"`
}

// RedactedSource returns a mirror's source connection without secrets.
func RedactedSource(m repo.Mirror) SourceRecord {
	return SourceRecord{
		BootstrapServers: m.BootstrapServers,
		SecurityProtocol: m.SecurityProtocol,
		SASLMechanism:    m.SASLMechanism,
		SASLUsername:     m.SASLUsername,
		SASLPasswordSet:  m.SASLPassword != "",
		TLSCAPEM:         m.TLSCAPEM,
		TLSCertPEM:       m.TLSCertPEM,
		TLSKeySet:        m.TLSKeyPEM != "",
		TLSServerName:    m.TLSServerName,

		AWSAccessKeyID:        m.AWSAccessKeyID,
		AWSSecretAccessKeySet: m.AWSSecretAccessKey != "",
		AWSSessionTokenSet:    m.AWSSessionToken != "",
		AWSRegion:             m.AWSRegion,

		OAuthTokenEndpointURL: m.OAuthTokenEndpointURL,
		OAuthClientID:         m.OAuthClientID,
		OAuthClientSecretSet:  m.OAuthClientSecret != "",
		OAuthScope:            m.OAuthScope,
		OAuthExtensions:       m.OAuthExtensions,

		SchemaRegistry: redactedRegistry(m.Source),
	}
}

func mirrorRecord(m repo.Mirror) MirrorRecord {
	return MirrorRecord{Version: RecordVersion, Name: m.Name, Source: RedactedSource(m),
		Config: m.Config, UpdatedAt: m.UpdatedAt}
}

func topicRecord(t repo.Topic) TopicRecord {
	return TopicRecord{Version: RecordVersion, Mirror: t.Mirror, Topic: t.Topic, DestinationTopic: t.DestTopic,
		DesiredState: t.DesiredState, ReplicationFactor: t.ReplicationFactor,
		Recreate: t.Recreate, Partitions: t.Partitions, UpdatedAt: t.UpdatedAt}
}

// recordChange writes a change's event and its outbox row in the caller's
// transaction, so neither can exist without the other.
func recordChange(ctx context.Context, q repo.DBTX, e repo.Event, key string, value any) error {
	if err := repo.EventsInsert(ctx, q, stampActor(ctx, e)); err != nil {
		return err
	}
	return repo.OutboxInsert(ctx, q, e.Mirror, key, value)
}

// recordTopics publishes the current record of each named topic with one
// event for the action.
func recordTopics(ctx context.Context, q repo.DBTX, e repo.Event, topics []string) error {
	if err := repo.EventsInsert(ctx, q, stampActor(ctx, e)); err != nil {
		return err
	}
	// One read for all of them: an add may match many topics.
	current, err := topicsByName(ctx, q, e.Mirror)
	if err != nil {
		return err
	}
	for _, name := range topics {
		t, ok := current[name]
		if !ok {
			return fmt.Errorf("topic %s of mirror %s vanished in its own transaction", name, e.Mirror)
		}
		if err := repo.OutboxInsert(ctx, q, e.Mirror, TopicKey(t.Mirror, t.Topic), topicRecord(t)); err != nil {
			return err
		}
	}
	return nil
}
