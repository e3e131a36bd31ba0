package api

import (
	"errors"
	"log/slog"
	"net/http"

	"kmirror/service"
)

// problemTypePrefix starts every problem type. The suffixes are stable: clients
// may switch on them.
const problemTypePrefix = "urn:kmirror:problem:"

// Problem is an RFC 9457 application/problem+json error body.
type Problem struct {
	// Type identifies the kind of error, for example urn:kmirror:problem:validation.
	Type   string `json:"type" example:"urn:kmirror:problem:validation"`
	Title  string `json:"title" example:"Invalid input"`
	Status int    `json:"status" example:"400"`
	Detail string `json:"detail" example:"invalid input: name: mirror name \"bad name\" must be 1-249 characters of [a-zA-Z0-9._-]"`
	// Instance is the request path.
	Instance  string `json:"instance,omitempty" example:"/v1/mirrors"`
	RequestID string `json:"request_id,omitempty"`
	// Errors lists each rejected field, for validation errors.
	Errors []service.FieldError `json:"errors,omitempty"`
	// Topics lists the topics whose state refused the action, for conflicts.
	Topics []service.TopicState `json:"topics,omitempty"`
} // @name Problem

type problemKind struct {
	suffix string
	title  string
	status int
}

var (
	kindMalformedJSON   = problemKind{"malformed-json", "Malformed JSON", http.StatusBadRequest}
	kindUnknownField    = problemKind{"unknown-field", "Unknown field", http.StatusBadRequest}
	kindValidation      = problemKind{"validation", "Invalid input", http.StatusBadRequest}
	kindTooLarge        = problemKind{"body-too-large", "Request body too large", http.StatusRequestEntityTooLarge}
	kindMediaType       = problemKind{"unsupported-media-type", "Unsupported media type", http.StatusUnsupportedMediaType}
	kindNotFound        = problemKind{"not-found", "Not found", http.StatusNotFound}
	kindNoMatch         = problemKind{"no-match", "Nothing matched", http.StatusNotFound}
	kindMethod          = problemKind{"method-not-allowed", "Method not allowed", http.StatusMethodNotAllowed}
	kindConflict        = problemKind{"conflict", "Conflict", http.StatusConflict}
	kindTransition      = problemKind{"invalid-transition", "Invalid state transition", http.StatusConflict}
	kindSourceDown      = problemKind{"source-unavailable", "Source cluster unavailable", http.StatusServiceUnavailable}
	kindDatabaseDown    = problemKind{"database-unavailable", "Database unavailable", http.StatusServiceUnavailable}
	kindUnauthenticated = problemKind{"unauthenticated", "Authentication required", http.StatusUnauthorized}
	kindForbidden       = problemKind{"forbidden", "Forbidden", http.StatusForbidden}
	kindInternal        = problemKind{"internal", "Internal error", http.StatusInternalServerError}
)

func writeProblem(w http.ResponseWriter, r *http.Request, k problemKind, detail string, extra func(*Problem)) {
	p := Problem{Type: problemTypePrefix + k.suffix, Title: k.title, Status: k.status,
		Detail: detail, Instance: r.URL.Path, RequestID: requestID(r.Context())}
	if extra != nil {
		extra(&p)
	}
	writeJSONType(w, "application/problem+json", k.status, p)
}

// writeError maps a domain error to its problem in one place.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		verr *service.ValidationError
		nf   *service.NotFoundError
		cf   *service.ConflictError
		tr   *service.InvalidTransitionError
		un   *service.UnavailableError
		be   *bodyError
	)
	switch {
	case errors.As(err, &be):
		writeProblem(w, r, be.kind, be.detail, nil)
	case errors.As(err, &verr):
		writeProblem(w, r, kindValidation, verr.Error(), func(p *Problem) { p.Errors = verr.Fields })
	case errors.As(err, &nf):
		k := kindNotFound
		if nf.Kind == "match" {
			k = kindNoMatch
		}
		writeProblem(w, r, k, nf.Detail, nil)
	case errors.As(err, &cf):
		writeProblem(w, r, kindConflict, cf.Detail, func(p *Problem) { p.Topics = cf.Topics })
	case errors.As(err, &tr):
		writeProblem(w, r, kindTransition, tr.Error(), nil)
	case errors.As(err, &un):
		writeProblem(w, r, kindSourceDown, un.Detail, nil)
	case errors.Is(err, service.ErrDatabaseUnavailable):
		logger(r.Context()).WarnContext(r.Context(), "database unavailable", slog.Any("err", err))
		w.Header().Set("Retry-After", "5")
		writeProblem(w, r, kindDatabaseDown, "the database did not answer; try again later", nil)
	default:
		logger(r.Context()).ErrorContext(r.Context(), "request failed", slog.Any("err", err))
		writeProblem(w, r, kindInternal, "internal error; see the server log for request "+requestID(r.Context()), nil)
	}
}
