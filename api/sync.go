package api

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"kmirror/service"
)

var (
	kindSyncUnavailable = problemKind{ProblemTypeSyncUnavailable, "Metadata sync unavailable", http.StatusServiceUnavailable}
	kindSyncTimeout     = problemKind{ProblemTypeSyncTimeout, "Metadata sync timed out", http.StatusGatewayTimeout}
)

// syncMirror godoc
//
//	@Summary		Run a metadata sync pass now
//	@Description	Asks the kmirror instance that holds the mirror's metadata-sync lease to run a pass at once (topic configs, partition growth, new and deleted topics, consumer group offsets, ACLs, paused topics), waits for it (up to 30s) and returns its result, which GET /v1/mirrors/{mirror} also shows as last_sync. A pass with errors is still 200: see ok and each kind's error. 503 when no instance runs the mirror's sync (no server with a destination cluster), 504 when the pass did not finish in time.
//	@ID				syncMirror
//	@Tags			mirrors
//	@Produce		json
//	@Param			mirror	path		string	true	"Mirror name"
//	@Success		200		{object}	service.SyncResult
//	@Failure		400	{object}	Problem	"validation: a NUL character or invalid UTF-8 in the path or query"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		403	{object}	Problem	"forbidden: the token's role is below operator"
//	@Failure		429	{object}	Problem	"rate-limited: too many changes from this token (with Retry-After)"
//	@Failure		404		{object}	Problem	"not-found: no such mirror"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503		{object}	Problem	"sync-unavailable: no instance runs the mirror's metadata sync; database-unavailable: PostgreSQL did not answer"
//	@Failure		504		{object}	Problem	"sync-timeout: the pass did not finish within 30s"
//	@Router			/v1/mirrors/{mirror}:sync [post]
func (s *server) syncMirror(w http.ResponseWriter, r *http.Request) {
	res, err := s.svc.SyncMirror(r.Context(), chi.URLParam(r, "mirror"))
	var unavailable *service.SyncUnavailableError
	switch {
	case errors.As(err, &unavailable) && unavailable.Timeout:
		writeProblem(w, r, kindSyncTimeout, unavailable.Detail, nil)
	case errors.As(err, &unavailable):
		writeProblem(w, r, kindSyncUnavailable, unavailable.Detail, nil)
	case err != nil:
		writeError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}
