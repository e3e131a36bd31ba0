package repo

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// Source is a mirror's source cluster connection, with Kafka's names, and
// its source Schema Registry, if any. The secrets (SASLPassword, TLSKeyPEM,
// AWSSecretAccessKey, AWSSessionToken, OAuthClientSecret,
// SchemaRegistryPassword, SchemaRegistryBearerToken,
// SchemaRegistryTLSKeyPEM) are stored sealed when the servers have a key.
type Source struct {
	BootstrapServers string
	SecurityProtocol string
	SASLMechanism    string
	SASLUsername     string
	SASLPassword     string
	TLSCAPEM         string
	TLSCertPEM       string
	TLSKeyPEM        string
	TLSServerName    string
	// AWS_MSK_IAM: static keys, or none for the default credential chain.
	AWSAccessKeyID     string
	AWSSecretAccessKey string
	AWSSessionToken    string
	AWSRegion          string
	// OAUTHBEARER: the client credentials grant and the SASL extensions.
	OAuthTokenEndpointURL string
	OAuthClientID         string
	OAuthClientSecret     string
	OAuthScope            string
	OAuthExtensions       map[string]string
	// The source Schema Registry: none when SchemaRegistryURLs is empty.
	SchemaRegistryURLs          []string
	SchemaRegistryUsername      string
	SchemaRegistryPassword      string
	SchemaRegistryBearerToken   string
	SchemaRegistryTLSCAPEM      string
	SchemaRegistryTLSCertPEM    string
	SchemaRegistryTLSKeyPEM     string
	SchemaRegistryTLSServerName string
}

// Mirror is one row of mirrors: a named link from a source cluster.
type Mirror struct {
	Name string
	Source
	Config   map[string]string
	LastSync json.RawMessage
	// SchemaSync is the last Schema Registry sync's result, nil before one.
	SchemaSync json.RawMessage
	// MissingCredentials names the secrets a restored mirror still needs
	// ("sasl_password", "tls_key_pem", ...); its partitions are not leased
	// until it is empty.
	MissingCredentials []string
	CreatedAt          time.Time
	UpdatedAt          time.Time
	// Incarnation tells this mirror from earlier, deleted ones of its name:
	// each creation takes a new one.
	Incarnation int64
}

const mirrorColumns = `name, bootstrap_servers, security_protocol,
	coalesce(sasl_mechanism, ''), coalesce(sasl_username, ''), coalesce(sasl_password, ''),
	coalesce(tls_ca_pem, ''), coalesce(tls_cert_pem, ''), coalesce(tls_key_pem, ''),
	coalesce(tls_server_name, ''), config, last_sync, missing_credentials, created_at, updated_at, incarnation,
	coalesce(aws_access_key_id, ''), coalesce(aws_secret_access_key, ''), coalesce(aws_session_token, ''),
	coalesce(aws_region, ''), coalesce(sasl_oauthbearer_token_endpoint_url, ''), coalesce(sasl_oauthbearer_client_id, ''),
	coalesce(sasl_oauthbearer_client_secret, ''), coalesce(sasl_oauthbearer_scope, ''), sasl_oauthbearer_extensions,
	schema_registry_urls, coalesce(schema_registry_username, ''), coalesce(schema_registry_password, ''),
	coalesce(schema_registry_bearer_token, ''), coalesce(schema_registry_tls_ca_pem, ''),
	coalesce(schema_registry_tls_cert_pem, ''), coalesce(schema_registry_tls_key_pem, ''),
	coalesce(schema_registry_tls_server_name, ''), schema_sync`

type scanner interface{ Scan(dest ...any) error }

func scanMirror(row scanner) (Mirror, error) {
	var m Mirror
	err := row.Scan(&m.Name, &m.BootstrapServers, &m.SecurityProtocol, &m.SASLMechanism,
		&m.SASLUsername, &m.SASLPassword, &m.TLSCAPEM, &m.TLSCertPEM, &m.TLSKeyPEM,
		&m.TLSServerName, &m.Config, &m.LastSync, &m.MissingCredentials, &m.CreatedAt, &m.UpdatedAt, &m.Incarnation,
		&m.AWSAccessKeyID, &m.AWSSecretAccessKey, &m.AWSSessionToken, &m.AWSRegion, &m.OAuthTokenEndpointURL,
		&m.OAuthClientID, &m.OAuthClientSecret, &m.OAuthScope, &m.OAuthExtensions,
		&m.SchemaRegistryURLs, &m.SchemaRegistryUsername, &m.SchemaRegistryPassword, &m.SchemaRegistryBearerToken,
		&m.SchemaRegistryTLSCAPEM, &m.SchemaRegistryTLSCertPEM, &m.SchemaRegistryTLSKeyPEM, &m.SchemaRegistryTLSServerName,
		&m.SchemaSync)
	if m.Config == nil {
		m.Config = map[string]string{}
	}
	return m, interpret(err)
}

// nonNilStrings makes an absent list an empty array: the column is NOT NULL.
func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// MirrorsInsert adds a mirror; a taken name is ErrConflict.
func MirrorsInsert(ctx context.Context, q DBTX, m Mirror) (Mirror, error) {
	return scanMirror(q.QueryRow(ctx, `
		INSERT INTO mirrors (name, bootstrap_servers, security_protocol, sasl_mechanism,
			sasl_username, sasl_password, tls_ca_pem, tls_cert_pem, tls_key_pem, tls_server_name, config,
			missing_credentials, aws_access_key_id, aws_secret_access_key, aws_session_token, aws_region,
			sasl_oauthbearer_token_endpoint_url, sasl_oauthbearer_client_id, sasl_oauthbearer_client_secret,
			sasl_oauthbearer_scope, sasl_oauthbearer_extensions, schema_registry_urls, schema_registry_username,
			schema_registry_password, schema_registry_bearer_token, schema_registry_tls_ca_pem,
			schema_registry_tls_cert_pem, schema_registry_tls_key_pem, schema_registry_tls_server_name)
		VALUES ($1, $2, $3, nullif($4, ''), nullif($5, ''), nullif($6, ''), nullif($7, ''),
			nullif($8, ''), nullif($9, ''), nullif($10, ''), $11, $12, nullif($13, ''), nullif($14, ''),
			nullif($15, ''), nullif($16, ''), nullif($17, ''), nullif($18, ''), nullif($19, ''), nullif($20, ''), $21,
			$22, nullif($23, ''), nullif($24, ''), nullif($25, ''), nullif($26, ''), nullif($27, ''), nullif($28, ''),
			nullif($29, ''))
		RETURNING `+mirrorColumns,
		append([]any{m.Name, m.BootstrapServers, m.SecurityProtocol, m.SASLMechanism, m.SASLUsername,
			m.SASLPassword, m.TLSCAPEM, m.TLSCertPEM, m.TLSKeyPEM, m.TLSServerName, nonNil(m.Config),
			nonNilStrings(m.MissingCredentials)}, mechanismArgs(m.Source)...)...))
}

// MirrorsUpdate replaces a mirror's source and config.
func MirrorsUpdate(ctx context.Context, q DBTX, m Mirror) (Mirror, error) {
	return scanMirror(q.QueryRow(ctx, `
		UPDATE mirrors SET bootstrap_servers = $2, security_protocol = $3,
			sasl_mechanism = nullif($4, ''), sasl_username = nullif($5, ''),
			sasl_password = nullif($6, ''), tls_ca_pem = nullif($7, ''),
			tls_cert_pem = nullif($8, ''), tls_key_pem = nullif($9, ''),
			tls_server_name = nullif($10, ''), config = $11, missing_credentials = $12,
			aws_access_key_id = nullif($13, ''), aws_secret_access_key = nullif($14, ''),
			aws_session_token = nullif($15, ''), aws_region = nullif($16, ''),
			sasl_oauthbearer_token_endpoint_url = nullif($17, ''), sasl_oauthbearer_client_id = nullif($18, ''),
			sasl_oauthbearer_client_secret = nullif($19, ''), sasl_oauthbearer_scope = nullif($20, ''),
			sasl_oauthbearer_extensions = $21, schema_registry_urls = $22,
			schema_registry_username = nullif($23, ''), schema_registry_password = nullif($24, ''),
			schema_registry_bearer_token = nullif($25, ''), schema_registry_tls_ca_pem = nullif($26, ''),
			schema_registry_tls_cert_pem = nullif($27, ''), schema_registry_tls_key_pem = nullif($28, ''),
			schema_registry_tls_server_name = nullif($29, ''), updated_at = now()
		WHERE name = $1
		RETURNING `+mirrorColumns,
		append([]any{m.Name, m.BootstrapServers, m.SecurityProtocol, m.SASLMechanism, m.SASLUsername,
			m.SASLPassword, m.TLSCAPEM, m.TLSCertPEM, m.TLSKeyPEM, m.TLSServerName, nonNil(m.Config),
			nonNilStrings(m.MissingCredentials)}, mechanismArgs(m.Source)...)...))
}

// mechanismArgs are the AWS and OAuth columns' arguments ($13 to $21), then
// the Schema Registry's ($22 to $29).
func mechanismArgs(s Source) []any {
	var ext any // NULL, not a JSON null, when there are none
	if len(s.OAuthExtensions) > 0 {
		ext = s.OAuthExtensions
	}
	var urls any // NULL, not an empty array, when there is no registry
	if len(s.SchemaRegistryURLs) > 0 {
		urls = s.SchemaRegistryURLs
	}
	return []any{s.AWSAccessKeyID, s.AWSSecretAccessKey, s.AWSSessionToken, s.AWSRegion, s.OAuthTokenEndpointURL,
		s.OAuthClientID, s.OAuthClientSecret, s.OAuthScope, ext,
		urls, s.SchemaRegistryUsername, s.SchemaRegistryPassword, s.SchemaRegistryBearerToken, s.SchemaRegistryTLSCAPEM,
		s.SchemaRegistryTLSCertPEM, s.SchemaRegistryTLSKeyPEM, s.SchemaRegistryTLSServerName}
}

// MirrorsGet returns one mirror, or ErrNotFound.
func MirrorsGet(ctx context.Context, q DBTX, name string) (Mirror, error) {
	return scanMirror(q.QueryRow(ctx, `SELECT `+mirrorColumns+` FROM mirrors WHERE name = $1`, name))
}

// MirrorsGetForUpdate returns one mirror and locks its row until the
// transaction ends, serializing actions on the same mirror.
func MirrorsGetForUpdate(ctx context.Context, q DBTX, name string) (Mirror, error) {
	return scanMirror(q.QueryRow(ctx, `SELECT `+mirrorColumns+` FROM mirrors WHERE name = $1 FOR UPDATE`, name))
}

// MirrorsList returns every mirror by name.
func MirrorsList(ctx context.Context, q DBTX) ([]Mirror, error) {
	return collectMirrors(q.Query(ctx, `SELECT `+mirrorColumns+` FROM mirrors ORDER BY name`))
}

// collectMirrors scans the mirrors a query returned.
func collectMirrors(rows pgx.Rows, err error) ([]Mirror, error) {
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []Mirror
	for rows.Next() {
		m, err := scanMirror(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, interpret(rows.Err())
}

// MirrorsExist returns which of names are mirrors.
func MirrorsExist(ctx context.Context, q DBTX, names []string) (map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT name FROM mirrors WHERE name = ANY($1::text[])`, names)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	out := make(map[string]bool, len(names))
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, interpret(err)
		}
		out[name] = true
	}
	return out, interpret(rows.Err())
}

// MirrorsDelete removes a mirror with its topics and partitions.
func MirrorsDelete(ctx context.Context, q DBTX, name string) error {
	tag, err := q.Exec(ctx, `DELETE FROM mirrors WHERE name = $1`, name)
	if err != nil {
		return interpret(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// MirrorSecrets are a mirror's stored secrets, as stored (sealed or not).
type MirrorSecrets struct {
	Name               string
	SASLPassword       string
	TLSKeyPEM          string
	AWSSecretAccessKey string
	AWSSessionToken    string
	OAuthClientSecret  string

	SchemaRegistryPassword    string
	SchemaRegistryBearerToken string
	SchemaRegistryTLSKeyPEM   string
}

// MirrorsListSecrets returns every mirror's stored secrets by name; with
// forUpdate it locks the rows, in name order, until the transaction ends.
func MirrorsListSecrets(ctx context.Context, q DBTX, forUpdate bool) ([]MirrorSecrets, error) {
	sql := `SELECT name, coalesce(sasl_password, ''), coalesce(tls_key_pem, ''), coalesce(aws_secret_access_key, ''),
		coalesce(aws_session_token, ''), coalesce(sasl_oauthbearer_client_secret, ''), coalesce(schema_registry_password, ''),
		coalesce(schema_registry_bearer_token, ''), coalesce(schema_registry_tls_key_pem, '') FROM mirrors ORDER BY name`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []MirrorSecrets
	for rows.Next() {
		var m MirrorSecrets
		if err := rows.Scan(&m.Name, &m.SASLPassword, &m.TLSKeyPEM, &m.AWSSecretAccessKey, &m.AWSSessionToken,
			&m.OAuthClientSecret, &m.SchemaRegistryPassword, &m.SchemaRegistryBearerToken, &m.SchemaRegistryTLSKeyPEM); err != nil {
			return nil, interpret(err)
		}
		out = append(out, m)
	}
	return out, interpret(rows.Err())
}

// MirrorsSetSecrets replaces a mirror's stored secrets (and nothing else:
// updated_at stays, a key rotation is no change of the mirror).
func MirrorsSetSecrets(ctx context.Context, q DBTX, m MirrorSecrets) error {
	tag, err := q.Exec(ctx, `UPDATE mirrors SET sasl_password = nullif($2, ''), tls_key_pem = nullif($3, ''),
			aws_secret_access_key = nullif($4, ''), aws_session_token = nullif($5, ''),
			sasl_oauthbearer_client_secret = nullif($6, ''), schema_registry_password = nullif($7, ''),
			schema_registry_bearer_token = nullif($8, ''), schema_registry_tls_key_pem = nullif($9, '')
		WHERE name = $1`, m.Name, m.SASLPassword, m.TLSKeyPEM, m.AWSSecretAccessKey, m.AWSSessionToken, m.OAuthClientSecret,
		m.SchemaRegistryPassword, m.SchemaRegistryBearerToken, m.SchemaRegistryTLSKeyPEM)
	if err != nil {
		return interpret(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// MirrorCopyConfig is what the data plane reads of a mirror: its set
// configuration, and how many partitions its topics that are to be
// mirrored have (a per-mirror limit is shared out by them).
type MirrorCopyConfig struct {
	Config     map[string]string
	Partitions int
}

// MirrorsListCopyConfigs returns every mirror's MirrorCopyConfig by name.
func MirrorsListCopyConfigs(ctx context.Context, q DBTX) (map[string]MirrorCopyConfig, error) {
	rows, err := q.Query(ctx, `
		SELECT m.name, m.config, (SELECT count(*) FROM mirror_partitions p
			JOIN mirror_topics t ON t.mirror = p.mirror AND t.topic = p.topic
			WHERE p.mirror = m.name AND t.desired_state = 'mirroring')
		FROM mirrors m`)
	if err != nil {
		return nil, interpret(err)
	}
	out := map[string]MirrorCopyConfig{}
	for rows.Next() {
		var name string
		var c MirrorCopyConfig
		if err := rows.Scan(&name, &c.Config, &c.Partitions); err != nil {
			rows.Close()
			return nil, interpret(err)
		}
		out[name] = c
	}
	return out, interpret(rows.Err())
}
