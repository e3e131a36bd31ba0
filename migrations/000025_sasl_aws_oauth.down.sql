ALTER TABLE mirrors DROP CONSTRAINT mirrors_missing_credentials_check;
ALTER TABLE mirrors ADD CONSTRAINT mirrors_missing_credentials_check
    CHECK (missing_credentials <@ ARRAY['sasl_password', 'tls_key_pem']::text[]);
ALTER TABLE mirrors
    DROP CONSTRAINT mirrors_aws_settings,
    DROP CONSTRAINT mirrors_oauthbearer_settings,
    DROP COLUMN aws_access_key_id,
    DROP COLUMN aws_secret_access_key,
    DROP COLUMN aws_session_token,
    DROP COLUMN aws_region,
    DROP COLUMN sasl_oauthbearer_token_endpoint_url,
    DROP COLUMN sasl_oauthbearer_client_id,
    DROP COLUMN sasl_oauthbearer_client_secret,
    DROP COLUMN sasl_oauthbearer_scope,
    DROP COLUMN sasl_oauthbearer_extensions;
ALTER TABLE mirrors DROP CONSTRAINT mirrors_sasl_mechanism_check;
ALTER TABLE mirrors ADD CONSTRAINT mirrors_sasl_mechanism_check
    CHECK (sasl_mechanism IN ('PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'));
