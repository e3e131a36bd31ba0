-- A mirror may name its source Schema Registry, whose subjects a sync
-- copies to the destination's. The secrets among the new columns
-- (schema_registry_password, schema_registry_bearer_token,
-- schema_registry_tls_key_pem) are write-only through the API and stored
-- sealed, as sasl_password is.
ALTER TABLE mirrors
    ADD COLUMN schema_registry_urls            text[] CHECK (cardinality(schema_registry_urls) > 0),
    ADD COLUMN schema_registry_username        text,
    ADD COLUMN schema_registry_password        text,
    ADD COLUMN schema_registry_bearer_token    text,
    ADD COLUMN schema_registry_tls_ca_pem      text,
    ADD COLUMN schema_registry_tls_cert_pem    text,
    ADD COLUMN schema_registry_tls_key_pem     text,
    ADD COLUMN schema_registry_tls_server_name text,
    -- The registry's settings only with its URLs.
    ADD CONSTRAINT mirrors_schema_registry_settings CHECK (schema_registry_urls IS NOT NULL OR
        num_nonnulls(schema_registry_username, schema_registry_password, schema_registry_bearer_token,
            schema_registry_tls_ca_pem, schema_registry_tls_cert_pem, schema_registry_tls_key_pem,
            schema_registry_tls_server_name) = 0),
    -- Basic auth or a bearer token, not both.
    ADD CONSTRAINT mirrors_schema_registry_auth CHECK (
        num_nonnulls(schema_registry_username, schema_registry_password) = 0 OR schema_registry_bearer_token IS NULL);

-- A restore brings no secret back, these included.
ALTER TABLE mirrors DROP CONSTRAINT mirrors_missing_credentials_check;
ALTER TABLE mirrors ADD CONSTRAINT mirrors_missing_credentials_check
    CHECK (missing_credentials <@ ARRAY['sasl_password', 'tls_key_pem', 'aws_secret_access_key',
        'aws_session_token', 'sasl_oauthbearer_client_secret', 'schema_registry.basic_auth_password',
        'schema_registry.bearer_token', 'schema_registry.tls_key_pem']::text[]);
