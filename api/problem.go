package api

import (
	"errors"
	"log/slog"
	"net/http"

	"kmirror/service"
)

// Problem is an RFC 9457 application/problem+json error body.
type Problem struct {
	// Type identifies the kind of error: stable, so clients may switch on it.
	Type ProblemType `json:"type" example:"urn:kmirror:problem:validation"`
	// Title is the type's short, fixed description.
	Title string `json:"title" example:"Invalid input"`
	// Status repeats the HTTP status.
	Status int `json:"status" example:"400"`
	// Detail says what went wrong with this request, in words.
	Detail string `json:"detail" example:"invalid input: name: mirror name \"bad name\" must be 1-249 characters of [a-zA-Z0-9._-]"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty" example:"/v1/mirrors"`
	// RequestID names the request in the server log (also the X-Request-Id header).
	RequestID string `json:"request_id,omitempty" example:"4bf92f3577b34da6"`
	// Errors lists each rejected field, for validation errors.
	Errors []service.FieldError `json:"errors,omitempty"`
	// Topics lists the topics whose state refused the action, for conflicts.
	Topics []TopicState `json:"topics,omitempty"`
	// Checks lists the failed checks, for preflight-failed.
	Checks []service.MirrorCheck `json:"checks,omitempty"`
} // @name Problem

type problemKind struct {
	typ    ProblemType
	title  string
	status int
}

var (
	kindMalformedJSON   = problemKind{ProblemTypeMalformedJSON, "Malformed JSON", http.StatusBadRequest}
	kindUnknownField    = problemKind{ProblemTypeUnknownField, "Unknown field", http.StatusBadRequest}
	kindValidation      = problemKind{ProblemTypeValidation, "Invalid input", http.StatusBadRequest}
	kindTooLarge        = problemKind{ProblemTypeBodyTooLarge, "Request body too large", http.StatusRequestEntityTooLarge}
	kindMediaType       = problemKind{ProblemTypeUnsupportedMediaType, "Unsupported media type", http.StatusUnsupportedMediaType}
	kindNotFound        = problemKind{ProblemTypeNotFound, "Not found", http.StatusNotFound}
	kindNoMatch         = problemKind{ProblemTypeNoMatch, "Nothing matched", http.StatusNotFound}
	kindMethod          = problemKind{ProblemTypeMethodNotAllowed, "Method not allowed", http.StatusMethodNotAllowed}
	kindConflict        = problemKind{ProblemTypeConflict, "Conflict", http.StatusConflict}
	kindTransition      = problemKind{ProblemTypeInvalidTransition, "Invalid state transition", http.StatusConflict}
	kindPreflight       = problemKind{ProblemTypePreflightFailed, "Preflight checks failed", http.StatusConflict}
	kindSourceDown      = problemKind{ProblemTypeSourceUnavailable, "Source cluster unavailable", http.StatusServiceUnavailable}
	kindDatabaseDown    = problemKind{ProblemTypeDatabaseUnavailable, "Database unavailable", http.StatusServiceUnavailable}
	kindUnauthenticated = problemKind{ProblemTypeUnauthenticated, "Authentication required", http.StatusUnauthorized}
	kindForbidden       = problemKind{ProblemTypeForbidden, "Forbidden", http.StatusForbidden}
	kindRateLimited     = problemKind{ProblemTypeRateLimited, "Too many requests", http.StatusTooManyRequests}
	kindInternal        = problemKind{ProblemTypeInternal, "Internal error", http.StatusInternalServerError}
	// A server without a key refuses a secret rather than store it in
	// clear: 409, as the same request succeeds on a server that has one.
	kindSecretKeyRequired    = problemKind{ProblemTypeSecretKeyRequired, "Secret key required", http.StatusConflict}
	kindSecretKeyUnavailable = problemKind{ProblemTypeSecretKeyUnavailable, "Secret key unavailable", http.StatusServiceUnavailable}
)

// problemKinds lists every kind, for the spec's ProblemType enum (checked
// by TestEnumsMatchTheServer).
var problemKinds = []problemKind{kindMalformedJSON, kindUnknownField, kindValidation, kindTooLarge, kindMediaType, kindNotFound, kindNoMatch, kindMethod, kindConflict, kindTransition, kindSourceDown, kindDatabaseDown, kindUnauthenticated, kindForbidden, kindRateLimited, kindInternal, kindSyncUnavailable, kindSyncTimeout, kindSecretKeyRequired, kindSecretKeyUnavailable, kindPreflight}

func writeProblem(w http.ResponseWriter, r *http.Request, k problemKind, detail string, extra func(*Problem)) {
	p := Problem{Type: k.typ, Title: k.title, Status: k.status,
		Detail: detail, Instance: r.URL.Path, RequestID: requestID(r.Context())}
	if extra != nil {
		extra(&p)
	}
	if info := infoOf(r.Context()); info != nil {
		info.problem = k.typ // the request's log line takes its level from it
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
		pf   *service.PreflightError
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
		writeProblem(w, r, kindConflict, cf.Detail, func(p *Problem) {
			for _, t := range cf.Topics {
				p.Topics = append(p.Topics, TopicState{Topic: t.Topic,
					DesiredState: DesiredState(t.DesiredState), MirroredBy: t.MirroredBy, DestinationTopic: t.DestinationTopic})
			}
		})
	case errors.As(err, &tr):
		writeProblem(w, r, kindTransition, tr.Error(), nil)
	case errors.As(err, &pf):
		writeProblem(w, r, kindPreflight, pf.Error(), func(p *Problem) { p.Checks = pf.Checks })
	case errors.As(err, &un):
		writeProblem(w, r, kindSourceDown, un.Detail, nil)
	case errors.Is(err, service.ErrInvalidText):
		writeProblem(w, r, kindValidation, "the request holds a NUL character or invalid UTF-8, which cannot be stored", nil)
	case errors.Is(err, service.ErrSecretKeyRequired):
		writeProblem(w, r, kindSecretKeyRequired, err.Error(), nil)
	case errors.Is(err, service.ErrSecretKeyUnavailable):
		// Passes once the server reads its key file again (checked every 5 s).
		logger(r.Context()).WarnContext(r.Context(), "secret key unavailable", slog.Any("err", err))
		w.Header().Set("Retry-After", "5")
		writeProblem(w, r, kindSecretKeyUnavailable, err.Error(), nil)
	case errors.Is(err, service.ErrDatabaseUnavailable):
		logger(r.Context()).WarnContext(r.Context(), "database unavailable", slog.Any("err", err))
		w.Header().Set("Retry-After", "5")
		writeProblem(w, r, kindDatabaseDown, "the database did not answer; try again later", nil)
	default:
		logger(r.Context()).ErrorContext(r.Context(), "request failed", slog.Any("err", err))
		writeProblem(w, r, kindInternal, "internal error; see the server log for request "+requestID(r.Context()), nil)
	}
}
