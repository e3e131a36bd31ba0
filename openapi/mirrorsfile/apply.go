package mirrorsfile

import (
	"context"
	"fmt"
	"net/http"

	"kmirror/openapi/client"
)

// ApplyOpts are Apply's.
type ApplyOpts struct {
	// OnStep, when set, is told of each step once it is done, in order.
	OnStep func(Step)
}

// deleteWait is how long a delete waits for topics just removed to reach
// STOPPED (the API's most).
const deleteWait = "30s"

// Apply makes the changes of a plan, step by step in the plan's order
// (creates and updates, then adds, resumes, pauses, removals and
// deletions), and stops at the first refusal: the steps before it are
// made, each API call being all or nothing. A created mirror's topics are
// resolved once it exists, and added as its own steps.
func Apply(ctx context.Context, api API, p *Plan, opts ApplyOpts) error {
	done := func(s Step) {
		if opts.OnStep != nil {
			opts.OnStep(s)
		}
	}
	for _, s := range p.Steps {
		if s.Action == ActionAdd && s.add == nil {
			continue // a new mirror's topics: resolved and added after its create
		}
		if err := applyStep(ctx, api, s); err != nil {
			return fmt.Errorf("%s %s: %w", s.Action, s.Mirror, err)
		}
		done(s)
		if s.Action != ActionCreate {
			continue
		}
		// The mirror exists now: its topics are planned against it and
		// applied in the same order.
		sub := &Plan{Opts: p.Opts}
		if err := sub.planTopics(ctx, api, s.spec, nil, p.Opts); err != nil {
			return fmt.Errorf("mirror %s was created; its topics: %w", s.Mirror, err)
		}
		for _, t := range sub.Steps {
			if err := applyStep(ctx, api, t); err != nil {
				return fmt.Errorf("mirror %s was created; %s: %w", s.Mirror, t.Action, err)
			}
			done(t)
		}
	}
	return nil
}

func applyStep(ctx context.Context, api API, s Step) error {
	m := s.Mirror
	switch s.Action {
	case ActionCreate:
		_, err := call(ctx, "POST /v1/mirrors ("+m+")", func() (*client.CreateMirrorResponse, error) {
			return api.CreateMirrorWithResponse(ctx, nil, *s.create)
		}, http.StatusCreated)
		return err
	case ActionUpdate:
		_, err := call(ctx, "PATCH /v1/mirrors/"+m, func() (*client.UpdateMirrorResponse, error) {
			return api.UpdateMirrorWithResponse(ctx, m, nil, *s.update)
		}, http.StatusOK)
		return err
	case ActionDelete:
		_, err := call(ctx, "DELETE /v1/mirrors/"+m, func() (*client.DeleteMirrorResponse, error) {
			return api.DeleteMirrorWithResponse(ctx, m, &client.DeleteMirrorParams{Wait: ptr(deleteWait)})
		}, http.StatusNoContent)
		return err
	}
	for _, pattern := range patternChunks(refNames(s.Topics)) {
		var err error
		switch s.Action {
		case ActionAdd, ActionRestart:
			body := *s.add
			body.Topic = pattern
			_, err = call(ctx, "POST /v1/mirrors/"+m+"/topics:add", func() (*client.AddTopicsResponse, error) {
				return api.AddTopicsWithResponse(ctx, m, &client.AddTopicsParams{SkipChecks: ptrOrNil(s.skipChecks)}, body)
			}, http.StatusOK)
		case ActionResume:
			_, err = call(ctx, "POST /v1/mirrors/"+m+"/topics:resume", func() (*client.ResumeTopicsResponse, error) {
				return api.ResumeTopicsWithResponse(ctx, m, nil, client.TopicsRequest{Topic: pattern})
			}, http.StatusOK)
		case ActionPause:
			_, err = call(ctx, "POST /v1/mirrors/"+m+"/topics:pause", func() (*client.PauseTopicsResponse, error) {
				return api.PauseTopicsWithResponse(ctx, m, nil, client.TopicsRequest{Topic: pattern})
			}, http.StatusOK)
		case ActionRemove:
			_, err = call(ctx, "POST /v1/mirrors/"+m+"/topics:remove", func() (*client.RemoveTopicsResponse, error) {
				return api.RemoveTopicsWithResponse(ctx, m, nil, client.TopicsRequest{Topic: pattern})
			}, http.StatusOK)
		default:
			return fmt.Errorf("unknown step %q", s.Action)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
