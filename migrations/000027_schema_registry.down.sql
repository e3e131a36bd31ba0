ALTER TABLE mirrors DROP CONSTRAINT mirrors_missing_credentials_check;
ALTER TABLE mirrors ADD CONSTRAINT mirrors_missing_credentials_check
    CHECK (missing_credentials <@ ARRAY['sasl_password', 'tls_key_pem', 'aws_secret_access_key',
        'aws_session_token', 'sasl_oauthbearer_client_secret']::text[]);
ALTER TABLE mirrors
    DROP CONSTRAINT mirrors_schema_registry_settings,
    DROP CONSTRAINT mirrors_schema_registry_auth,
    DROP COLUMN schema_registry_urls,
    DROP COLUMN schema_registry_username,
    DROP COLUMN schema_registry_password,
    DROP COLUMN schema_registry_bearer_token,
    DROP COLUMN schema_registry_tls_ca_pem,
    DROP COLUMN schema_registry_tls_cert_pem,
    DROP COLUMN schema_registry_tls_key_pem,
    DROP COLUMN schema_registry_tls_server_name;
