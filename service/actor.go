package service

import (
	"context"

	"kmirror/repo"
)

// Actor is who asked for a change: the API token's name (never the token),
// the client's address and the API request id. The api package puts it in
// the request's context; the service stamps it on every event the change
// records. Workers act with none.
type Actor struct {
	Name       string
	RemoteAddr string
	RequestID  string
}

type actorKey struct{}

// WithActor returns ctx carrying a.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf returns the actor of ctx, zero when there is none.
func ActorOf(ctx context.Context) Actor {
	a, _ := ctx.Value(actorKey{}).(Actor)
	return a
}

// stampActor fills in e's actor from ctx.
func stampActor(ctx context.Context, e repo.Event) repo.Event {
	a := ActorOf(ctx)
	e.Actor, e.RemoteAddr, e.RequestID = a.Name, a.RemoteAddr, a.RequestID
	return e
}
