package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"kmirror/service"
)

// CheckMirrorRequest is a preflight's body; it may be omitted.
type CheckMirrorRequest struct {
	// Topic, an RE2 pattern matching whole source topic names as
	// topics:add takes it, checks the topics it matches; omitted, the
	// mirror's own topics.
	Topic string `json:"topic,omitempty" example:"orders|payments"`
	// ReplicationFactor the destination topics would be created with: 1
	// to 32767, or -1 (the same as omitting it) for the destination's
	// default.replication.factor.
	ReplicationFactor *int `json:"replication_factor,omitempty" minimum:"-1" maximum:"32767" example:"3"`
} // @name CheckMirrorRequest

// checkMirror godoc
//
//	@Summary		Check what a mirror needs of its clusters (preflight)
//	@Description	Checks, against the mirror's source cluster and this server's destination cluster with kmirror's own credentials, everything the mirror will need, before it needs it: on the source, describe and read the topics, describe their configs, list groups and read their offsets, describe ACLs; on the destination, an authorizer and the right to create and delete the ACLs that keep mirrored topics read-only, an idempotent producer id, creating, writing and configuring the topics, writing group offsets, message size limits against the source's, and the replication factor against min.insync.replicas.
//	@Description	One row per check: pass; warn, a feature beside the copy will not work (config, group offset or ACL sync, read-only enforcement); fail, the copy itself will not. Each row that does not pass says what to grant. Permissions are read from what the brokers say the principal may do (KIP-430) or by asking without doing (CreateTopics with validate_only): nothing is changed on either cluster, nor in the database. A cluster that cannot be reached is a failed connect row, not an error: the answer is 200 whenever the checks ran. A mirror that names a source Schema Registry also gets rows for it (its subjects listed with the mirror's credentials) and for the server's destination registry (IMPORT mode set on a probe subject that holds nothing, then its mode deleted: the one change a check makes), or a warn when the server has none; a registry row that fails means the schemas will not be copied.
//	@ID				checkMirror
//	@Tags			mirrors
//	@Accept			json
//	@Produce		json
//	@Param			mirror	path		string				true	"Mirror name"
//	@Param			body	body		CheckMirrorRequest	false	"Topics to check (default: the mirror's)"
//	@Success		200		{object}	service.CheckResult
//	@Failure		400		{object}	Problem	"malformed-json, unknown-field or validation (a bad pattern or replication factor; each field in errors)"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		403	{object}	Problem	"forbidden: the token's role is below operator"
//	@Failure		429	{object}	Problem	"rate-limited: too many changes from this token (with Retry-After)"
//	@Failure		404		{object}	Problem	"not-found: no such mirror; no-match: the pattern matched no topic"
//	@Failure		413	{object}	Problem	"body-too-large: a body over 1 MiB"
//	@Failure		415	{object}	Problem	"unsupported-media-type: a body that is not JSON"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"source-unavailable: the source cluster did not answer when listing the topics a pattern matches; database-unavailable: PostgreSQL did not answer (with Retry-After); secret-key-unavailable: the mirror's secrets are sealed under a key this server has not loaded yet (with Retry-After)"
//	@Router			/v1/mirrors/{mirror}:check [post]
func (s *server) checkMirror(w http.ResponseWriter, r *http.Request) {
	var req CheckMirrorRequest
	if hasBody(r) {
		if err := readJSON(r, &req); err != nil {
			writeError(w, r, err)
			return
		}
	}
	res, err := s.svc.CheckMirror(r.Context(), chi.URLParam(r, "mirror"),
		service.CheckInput{Topic: req.Topic, ReplicationFactor: req.ReplicationFactor})
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
