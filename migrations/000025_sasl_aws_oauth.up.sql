-- Sources may sign in with AWS_MSK_IAM (Amazon MSK) and OAUTHBEARER (OIDC
-- client credentials: Confluent Cloud, Event Hubs, Redpanda Cloud, ...).
-- The secrets among the new columns (aws_secret_access_key,
-- aws_session_token, sasl_oauthbearer_client_secret) are write-only through
-- the API and stored sealed, as sasl_password is.
ALTER TABLE mirrors DROP CONSTRAINT mirrors_sasl_mechanism_check;
ALTER TABLE mirrors ADD CONSTRAINT mirrors_sasl_mechanism_check
    CHECK (sasl_mechanism IN ('PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512', 'AWS_MSK_IAM', 'OAUTHBEARER'));

ALTER TABLE mirrors
    ADD COLUMN aws_access_key_id                   text,
    ADD COLUMN aws_secret_access_key               text,
    ADD COLUMN aws_session_token                   text,
    ADD COLUMN aws_region                          text,
    ADD COLUMN sasl_oauthbearer_token_endpoint_url text,
    ADD COLUMN sasl_oauthbearer_client_id          text,
    ADD COLUMN sasl_oauthbearer_client_secret      text,
    ADD COLUMN sasl_oauthbearer_scope              text,
    ADD COLUMN sasl_oauthbearer_extensions         jsonb
        CHECK (jsonb_typeof(sasl_oauthbearer_extensions) = 'object'),
    -- Each mechanism's settings only with that mechanism.
    ADD CONSTRAINT mirrors_aws_settings CHECK (sasl_mechanism = 'AWS_MSK_IAM' OR
        num_nonnulls(aws_access_key_id, aws_secret_access_key, aws_session_token, aws_region) = 0),
    ADD CONSTRAINT mirrors_oauthbearer_settings CHECK (
        CASE WHEN sasl_mechanism = 'OAUTHBEARER'
            THEN sasl_oauthbearer_token_endpoint_url IS NOT NULL AND sasl_oauthbearer_client_id IS NOT NULL
            ELSE num_nonnulls(sasl_oauthbearer_token_endpoint_url, sasl_oauthbearer_client_id,
                sasl_oauthbearer_client_secret, sasl_oauthbearer_scope, sasl_oauthbearer_extensions) = 0
        END);

-- A restore brings no secret back, these included.
ALTER TABLE mirrors DROP CONSTRAINT mirrors_missing_credentials_check;
ALTER TABLE mirrors ADD CONSTRAINT mirrors_missing_credentials_check
    CHECK (missing_credentials <@ ARRAY['sasl_password', 'tls_key_pem', 'aws_secret_access_key',
        'aws_session_token', 'sasl_oauthbearer_client_secret']::text[]);
