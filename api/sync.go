package api

import (
	"bytes"
	"errors"
	"io"
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
//	@Description	Asks the kmirror instance that holds the mirror's metadata-sync lease to run a pass at once (topic configs, partition growth, new and deleted topics, consumer group offsets, ACLs, paused topics), waits for it (up to 30s) and returns its result, which GET /v1/mirrors/{mirror} also shows as last_sync. A pass with errors is still 200: see ok and each kind's error. No body is needed; one that is sent follows the rules of every body (application/json, at most 1 MiB) and must be an empty object. 503 when no instance runs the mirror's sync (no server with a destination cluster), 504 when the pass did not finish in time.
//	@ID				syncMirror
//	@Tags			mirrors
//	@Produce		json
//	@Param			mirror	path		string	true	"Mirror name"
//	@Success		200		{object}	service.SyncResult
//	@Failure		400	{object}	Problem	"malformed-json or unknown-field: a body that is not an empty JSON object; validation: a NUL character or invalid UTF-8 in the path or query"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		403	{object}	Problem	"forbidden: the token's role is below operator"
//	@Failure		429	{object}	Problem	"rate-limited: too many changes from this token (with Retry-After)"
//	@Failure		404		{object}	Problem	"not-found: no such mirror"
//	@Failure		413	{object}	Problem	"body-too-large: a body over 1 MiB"
//	@Failure		415	{object}	Problem	"unsupported-media-type: a body that is not JSON"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503		{object}	Problem	"sync-unavailable: no instance runs the mirror's metadata sync; database-unavailable: PostgreSQL did not answer"
//	@Failure		504		{object}	Problem	"sync-timeout: the pass did not finish within 30s"
//	@Router			/v1/mirrors/{mirror}:sync [post]
func (s *server) syncMirror(w http.ResponseWriter, r *http.Request) {
	// The CLI and the console send no body; one that is sent is read as
	// every other route's is, so that a client's mistake is refused rather
	// than a multipart upload taken for a sync request.
	if hasBody(r) {
		var in syncRequest
		if err := readJSON(r, &in); err != nil {
			writeError(w, r, err)
			return
		}
	}
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

// syncRequest is a sync request's body: there is nothing to ask for, so it
// is the empty object when sent at all.
type syncRequest struct{}

// hasBody reports whether the request carries at least one byte of body. A
// body of unknown length (chunked) is peeked at, and its first byte put
// back.
func hasBody(r *http.Request) bool {
	switch {
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
		return false
	case r.ContentLength > 0:
		return true
	}
	var first [1]byte
	n, err := io.ReadFull(r.Body, first[:])
	if n == 0 {
		// A failed read is left for readJSON to report.
		return !errors.Is(err, io.EOF)
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(first[:n]), r.Body), r.Body}
	return true
}
