package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"kmirror/service"
)

func writeOpts(r *http.Request) (service.WriteOpts, error) {
	var opts service.WriteOpts
	for name, dst := range map[string]*bool{"dry_run": &opts.DryRun, "skip_connectivity_check": &opts.SkipConnectivityCheck} {
		if err := queryBool(r, name, dst); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// queryBool sets *dst from the query parameter name, when it is given.
func queryBool(r *http.Request, name string, dst *bool) error {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return nil
	}
	b, err := strconv.ParseBool(raw)
	if err != nil {
		return &service.ValidationError{Fields: []service.FieldError{{Field: name, Message: "must be true or false"}}}
	}
	*dst = b
	return nil
}

// createMirror godoc
//
//	@Summary		Create a mirror
//	@Description	Validates the mirror and checks that its source cluster answers (unless skip_connectivity_check). With dry_run nothing is written and 200 is returned. Secrets (sasl_password, tls_key_pem, aws_secret_access_key, aws_session_token, sasl_oauthbearer_client_secret, and schema_registry's basic_auth_password, bearer_token and tls_key_pem) are write-only: stored encrypted, never returned.
//	@ID				createMirror
//	@Tags			mirrors
//	@Accept			json
//	@Produce		json
//	@Param			body					body		CreateMirrorRequest	true	"The mirror"
//	@Param			dry_run					query		bool				false	"Validate only; write nothing"
//	@Param			skip_connectivity_check	query		bool				false	"Do not contact the source cluster"
//	@Success		201						{object}	Mirror	"created; Location names it"
//	@Header			201						{string}	Location	"/v1/mirrors/{mirror}"
//	@Success		200						{object}	Mirror	"dry run: valid, nothing written"
//	@Failure		400						{object}	Problem	"malformed-json, unknown-field or validation (each field in errors)"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		403	{object}	Problem	"forbidden: the token's role is below admin"
//	@Failure		429	{object}	Problem	"rate-limited: too many changes from this token (with Retry-After)"
//	@Failure		409						{object}	Problem	"conflict: a mirror of that name exists; secret-key-required: the source sets a secret and the server has no key to encrypt it (nothing written)"
//	@Failure		413	{object}	Problem	"body-too-large: a body over 1 MiB"
//	@Failure		415	{object}	Problem	"unsupported-media-type: a body that is not JSON"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"source-unavailable: the source cluster did not answer; database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/mirrors [post]
func (s *server) createMirror(w http.ResponseWriter, r *http.Request) {
	opts, err := writeOpts(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	var req CreateMirrorRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	src := req.Source
	in := service.MirrorInput{
		Name: req.Name, Config: req.Config,
		Source: service.SourceInput{BootstrapServers: src.BootstrapServers,
			SecurityProtocol: string(src.SecurityProtocol), SASLMechanism: string(src.SASLMechanism),
			SASLUsername: src.SASLUsername, SASLPassword: src.SASLPassword, TLSCAPEM: src.TLSCAPEM,
			TLSCertPEM: src.TLSCertPEM, TLSKeyPEM: src.TLSKeyPEM, TLSServerName: src.TLSServerName,
			AWSAccessKeyID: src.AWSAccessKeyID, AWSSecretAccessKey: src.AWSSecretAccessKey,
			AWSSessionToken: src.AWSSessionToken, AWSRegion: src.AWSRegion,
			OAuthTokenEndpointURL: src.OAuthTokenEndpointURL, OAuthClientID: src.OAuthClientID,
			OAuthClientSecret: src.OAuthClientSecret, OAuthScope: src.OAuthScope, OAuthExtensions: src.OAuthExtensions},
	}
	if sr := src.SchemaRegistry; sr != nil {
		in.Source.SchemaRegistryURLs, in.Source.SchemaRegistryUsername = sr.URLs, sr.BasicAuthUsername
		in.Source.SchemaRegistryPassword, in.Source.SchemaRegistryBearerToken = sr.BasicAuthPassword, sr.BearerToken
		in.Source.SchemaRegistryTLSCAPEM, in.Source.SchemaRegistryTLSCertPEM = sr.TLSCAPEM, sr.TLSCertPEM
		in.Source.SchemaRegistryTLSKeyPEM, in.Source.SchemaRegistryTLSServerName = sr.TLSKeyPEM, sr.TLSServerName
	}
	m, err := s.svc.CreateMirror(r.Context(), in, opts)
	if err != nil {
		writeError(w, r, err)
		return
	}
	status := http.StatusCreated
	if opts.DryRun {
		status = http.StatusOK
	} else {
		w.Header().Set("Location", "/v1/mirrors/"+m.Name)
	}
	writeJSON(w, status, mirrorView(m))
}

// listMirrors godoc
//
//	@Summary		List mirrors
//	@Description	Every mirror, by name, with its status: partitions per state, lag, erroring partitions and records/s.
//	@ID				listMirrors
//	@Tags			mirrors
//	@Produce		json
//	@Success		200	{object}	MirrorList
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/mirrors [get]
func (s *server) listMirrors(w http.ResponseWriter, r *http.Request) {
	ms, err := s.svc.ListMirrors(r.Context())
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := MirrorList{Mirrors: make([]Mirror, len(ms))}
	for i, m := range ms {
		out.Mirrors[i] = mirrorView(m)
	}
	writeJSON(w, http.StatusOK, out)
}

// getMirror godoc
//
//	@Summary		Get a mirror
//	@Description	The mirror's source (secrets only as whether they are set), its state (needs_credentials after a restore until its secrets are set again), its config and effective config, its status and its last metadata sync pass.
//	@ID				getMirror
//	@Tags			mirrors
//	@Produce		json
//	@Param			mirror	path		string	true	"Mirror name"
//	@Success		200		{object}	Mirror
//	@Failure		400	{object}	Problem	"validation: a NUL character or invalid UTF-8 in the path or query"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		404		{object}	Problem	"not-found: no such mirror"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/mirrors/{mirror} [get]
func (s *server) getMirror(w http.ResponseWriter, r *http.Request) {
	m, err := s.svc.GetMirror(r.Context(), chi.URLParam(r, "mirror"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, mirrorView(m))
}

// updateMirror godoc
//
//	@Summary		Update a mirror
//	@Description	A merge patch: given source fields replace the stored ones (source.schema_registry field by field, and {"urls": []} removes it); a config key set to null returns to its default. A changed source is checked for connectivity unless skip_connectivity_check. With dry_run nothing is written. A mirror that is needs_credentials (restored without its secrets) becomes ready once the patch has set every secret in missing_credentials; its partitions then resume.
//	@ID				updateMirror
//	@Tags			mirrors
//	@Accept			json
//	@Produce		json
//	@Param			mirror					path		string				true	"Mirror name"
//	@Param			body					body		UpdateMirrorRequest	true	"The changes"
//	@Param			dry_run					query		bool				false	"Validate only; write nothing"
//	@Param			skip_connectivity_check	query		bool				false	"Do not contact the source cluster"
//	@Success		200						{object}	Mirror
//	@Failure		400						{object}	Problem	"malformed-json, unknown-field or validation (each field in errors)"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		403	{object}	Problem	"forbidden: the token's role is below admin"
//	@Failure		429	{object}	Problem	"rate-limited: too many changes from this token (with Retry-After)"
//	@Failure		404						{object}	Problem	"not-found: no such mirror"
//	@Failure		409						{object}	Problem	"secret-key-required: the patch sets a secret and the server has no key to encrypt it (nothing written); conflict: the mirror kept changing"
//	@Failure		413	{object}	Problem	"body-too-large: a body over 1 MiB"
//	@Failure		415	{object}	Problem	"unsupported-media-type: a body that is not JSON"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"source-unavailable: the source cluster did not answer; database-unavailable: PostgreSQL did not answer (with Retry-After); secret-key-unavailable: the stored secrets are sealed under a key this server has not loaded yet (with Retry-After)"
//	@Router			/v1/mirrors/{mirror} [patch]
func (s *server) updateMirror(w http.ResponseWriter, r *http.Request) {
	opts, err := writeOpts(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	var req UpdateMirrorRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	patch := service.MirrorPatch{Config: req.Config}
	if p := req.Source; p != nil {
		patch.Source = &service.SourcePatch{BootstrapServers: p.BootstrapServers,
			SecurityProtocol: stringPtr(p.SecurityProtocol), SASLMechanism: stringPtr(p.SASLMechanism),
			SASLUsername: p.SASLUsername, SASLPassword: p.SASLPassword, TLSCAPEM: p.TLSCAPEM,
			TLSCertPEM: p.TLSCertPEM, TLSKeyPEM: p.TLSKeyPEM, TLSServerName: p.TLSServerName,
			AWSAccessKeyID: p.AWSAccessKeyID, AWSSecretAccessKey: p.AWSSecretAccessKey,
			AWSSessionToken: p.AWSSessionToken, AWSRegion: p.AWSRegion,
			OAuthTokenEndpointURL: p.OAuthTokenEndpointURL, OAuthClientID: p.OAuthClientID,
			OAuthClientSecret: p.OAuthClientSecret, OAuthScope: p.OAuthScope, OAuthExtensions: p.OAuthExtensions}
		if sr := p.SchemaRegistry; sr != nil {
			patch.Source.SchemaRegistry = &service.SchemaRegistryPatch{URLs: sr.URLs, BasicAuthUsername: sr.BasicAuthUsername,
				BasicAuthPassword: sr.BasicAuthPassword, BearerToken: sr.BearerToken, TLSCAPEM: sr.TLSCAPEM,
				TLSCertPEM: sr.TLSCertPEM, TLSKeyPEM: sr.TLSKeyPEM, TLSServerName: sr.TLSServerName}
		}
	}
	m, err := s.svc.UpdateMirror(r.Context(), chi.URLParam(r, "mirror"), patch, opts)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, mirrorView(m))
}

// deleteMirror godoc
//
//	@Summary		Delete a mirror
//	@Description	Only a mirror whose topics are all stopped can be deleted: remove its topics first. With wait (a duration up to 30s, such as 30s) the call waits for removed topics that are still STOPPING. The destination topics stay as they are.
//	@ID				deleteMirror
//	@Tags			mirrors
//	@Produce		json
//	@Param			mirror	path	string	true	"Mirror name"
//	@Param			wait	query	string	false	"How long to wait for removed topics still STOPPING (a Go duration up to 30s)"	example(30s) format(go-duration)
//	@Success		204		"deleted"
//	@Failure		400		{object}	Problem	"validation: wait is not a duration"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		403	{object}	Problem	"forbidden: the token's role is below admin"
//	@Failure		429	{object}	Problem	"rate-limited: too many changes from this token (with Retry-After)"
//	@Failure		404		{object}	Problem	"not-found: no such mirror"
//	@Failure		409		{object}	Problem	"conflict: topics that are not stopped"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/mirrors/{mirror} [delete]
func (s *server) deleteMirror(w http.ResponseWriter, r *http.Request) {
	var opts service.DeleteOpts
	if raw := r.URL.Query().Get("wait"); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil {
			writeError(w, r, &service.ValidationError{Fields: []service.FieldError{{Field: "wait",
				Message: "must be a duration such as 30s"}}})
			return
		}
		opts.Wait = d
	}
	if err := s.svc.DeleteMirror(r.Context(), chi.URLParam(r, "mirror"), opts); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// stringPtr turns a pointer to an enum value into a pointer to its string.
func stringPtr[T ~string](p *T) *string {
	if p == nil {
		return nil
	}
	s := string(*p)
	return &s
}
