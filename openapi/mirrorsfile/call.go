package mirrorsfile

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"kmirror/openapi/client"
)

// API is the part of the generated client this package calls.
type API = client.ClientWithResponsesInterface

// response is what every generated *XxxResponse offers.
type response interface {
	StatusCode() int
	GetBody() []byte
}

// ProblemError is an answer the server refused with: its problem+json.
type ProblemError struct {
	Call    string // what was asked: "POST /v1/mirrors/demo/topics:add"
	Status  int
	Problem client.Problem
}

func (e *ProblemError) Error() string {
	msg := cmp.Or(e.Problem.Detail, e.Problem.Title, http.StatusText(e.Status))
	for _, f := range deref(e.Problem.Errors) {
		if line := f.Field + ": " + f.Message; !strings.Contains(msg, line) {
			msg += "; " + line
		}
	}
	return fmt.Sprintf("%s: %d %s", e.Call, e.Status, msg)
}

// is says whether the server answered with a problem of this type.
func is(err error, t client.ProblemType) (*ProblemError, bool) {
	pe, ok := err.(*ProblemError)
	return pe, ok && pe.Problem.Type == t
}

// rateLimitRetries bounds how often a call refused with 429 is retried:
// the server limits changes per token (dry runs count), and a plan of many
// topics may reach it.
const (
	rateLimitRetries = 30
	rateLimitWait    = time.Second
)

// call runs one API call, retrying while the server rate-limits it, and
// turns any status but want into an error.
func call[R response](ctx context.Context, what string, do func() (R, error), want ...int) (R, error) {
	for attempt := 0; ; attempt++ {
		resp, err := do()
		if err != nil {
			return resp, fmt.Errorf("%s: %w", what, err)
		}
		status := resp.StatusCode()
		if slices.Contains(want, status) {
			return resp, nil
		}
		if status == http.StatusTooManyRequests && attempt < rateLimitRetries {
			select {
			case <-ctx.Done():
				return resp, ctx.Err()
			case <-time.After(rateLimitWait):
			}
			continue
		}
		pe := &ProblemError{Call: what, Status: status}
		if json.Unmarshal(resp.GetBody(), &pe.Problem) != nil || (pe.Problem.Detail == "" && pe.Problem.Title == "") {
			body := strings.TrimSpace(string(resp.GetBody()))
			if len(body) > 200 {
				body = body[:200] + "..."
			}
			pe.Problem.Detail = "unexpected answer: " + body
		}
		return resp, pe
	}
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

// ptrOrNil is nil for the zero value: an omitted optional field.
func ptrOrNil[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
