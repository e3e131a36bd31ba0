package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"kmirror/service"
)

const (
	readyTimeout = 2 * time.Second
	// readyRetryAfter is the Retry-After of a /readyz 503, in seconds, as
	// the API's other database-unavailable answers have.
	readyRetryAfter   = "5"
	eventPollInterval = 500 * time.Millisecond
	eventReplay       = 50
	// eventHeldWarning: how long events may wait for an older transaction
	// before the stream logs it.
	eventHeldWarning = 30 * time.Second
	// eventWriteTimeout bounds each write of an event stream, which has no
	// overall write deadline: a client that stops reading is dropped.
	eventWriteTimeout = 30 * time.Second
)

// listInstances godoc
//
//	@Summary		List kmirror instances
//	@Description	Every kmirror server process that shares this database, live or stopped, with the partition leases each holds.
//	@ID				listInstances
//	@Tags			system
//	@Produce		json
//	@Success		200	{object}	InstanceList
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/instances [get]
func (s *server) listInstances(w http.ResponseWriter, r *http.Request) {
	list, err := s.svc.ListInstances(r.Context())
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := InstanceList{Instances: make([]Instance, len(list))}
	for i, in := range list {
		out.Instances[i] = Instance{ID: in.ID, Hostname: in.Hostname, Version: in.Version,
			StartedAt: in.StartedAt, HeartbeatAt: in.RenewedAt, StoppedAt: in.StoppedAt, Live: in.Live,
			TakesLeases: in.TakesLeases, Leases: in.Leases}
	}
	writeJSON(w, http.StatusOK, out)
}

// getHistory godoc
//
//	@Summary		Lag and throughput history
//	@Description	Sampled by this API instance every interval_seconds and kept for window_seconds, in memory: the history starts when the instance starts, and each instance keeps its own. Without mirror: one total series per mirror, by name. With mirror: that mirror's total first, then one series per topic, by name. records_per_sec is how far the checkpoints moved since the previous sample, per second (0 on a series' first point); lag_seconds is the largest known lag in time of the series' partitions (the age of the oldest source record not yet on the destination), null when none is known. While the database cannot be reached, the last known points are served.
//	@ID				getHistory
//	@Tags			system
//	@Produce		json
//	@Param			mirror	query		string	false	"Only this mirror, with a series per topic"
//	@Success		200		{object}	History
//	@Failure		404		{object}	Problem	"not-found: no such mirror"
//	@Failure		400	{object}	Problem	"validation: a NUL character or invalid UTF-8 in the path or query"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/history [get]
func (s *server) getHistory(w http.ResponseWriter, r *http.Request) {
	h, err := s.svc.ProgressHistory(r.Context(), r.URL.Query().Get("mirror"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, historyView(h))
}

// streamEvents godoc
//
//	@Summary		Stream events (server-sent events)
//	@Description	A text/event-stream that stays open: each message has the event's id, its kind as the SSE event name, and the Event as JSON in data; a comment line (": keep-alive") every 15s while nothing happens, which keeps proxies from closing it and drops a client that stopped reading. It starts after Last-Event-ID, or after `since`, or with the last 50 events. While PostgreSQL does not answer (an outage, a failover), an open stream stays open with its keep-alives and goes on from its last event once the database is back; a new stream answers 503 meanwhile.
//	@Description	Each message's data is an Event in the shape of its kind (a oneOf on kind): a partition.state event has data with from, to, reason, error, epoch and owner (null when absent) besides its message. Events are read from the events table in id order, each once no transaction that could still commit an earlier one is running (one left open on the PostgreSQL server holds the stream back, and the server logs it after 30s), so a client that reconnects with the last id it saw (Last-Event-ID, as EventSource does) gets exactly the events after it, none missed and none repeated.
//	@Description	The audit trail: an event of a change made through the API names its actor (the API token's name, never the token), the client's remote_addr and the request_id of the change's request (and of its server log line); `actor` filters on it. What kmirror's workers did on their own has no actor.
//	@Description	A mirror deleted and created again under the same name is a new incarnation (the mirror's incarnation, each event's mirror_incarnation): `mirror` alone serves the current one's events (after a delete, the deleted one's), never an earlier namesake's; `incarnation` picks another, or all.
//	@Description	Read it as a stream (for example openapi-fetch's parseAs: "stream", or an EventSource): a client that waits for the whole body waits forever.
//	@ID				streamEvents
//	@Tags			system
//	@Produce		text/event-stream
//	@Param			mirror			query		string	false	"Only this mirror's events"
//	@Param			actor			query		string	false	"Only the changes this API token (by name) made: the audit trail of one actor"
//	@Param			incarnation		query		string	false	"With mirror: the events of this incarnation of it (a positive integer), or of every mirror of that name (all), instead of the current one's"
//	@Param			since			query		int		false	"Start after this event id"	minimum(0)
//	@Param			Last-Event-ID	header		string	false	"Resume after this event id (a non-negative integer), as EventSource sends it on a reconnect"
//	@Success		200				{object}	EventStreamMessage	"the stream: the schema is that of each message"
//	@Failure		400				{object}	Problem	"validation: Last-Event-ID or since is not a non-negative integer, or incarnation is neither a positive integer nor all, or is given without mirror"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		429	{object}	Problem	"rate-limited: this token already holds the most event streams it may (with Retry-After)"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/events [get]
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	after := int64(-1)
	for _, raw := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("since")} {
		if raw == "" {
			continue
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 {
			writeProblem(w, r, kindValidation, fmt.Sprintf("event id %q is not a non-negative integer", raw), nil)
			return
		}
		after = n
		break
	}
	filter := service.EventsFilter{Mirror: r.URL.Query().Get("mirror"), Actor: r.URL.Query().Get("actor")}
	// Checked before the stream starts: afterwards a problem cannot be sent.
	switch raw := r.URL.Query().Get("incarnation"); {
	case raw == "":
	case filter.Mirror == "":
		writeProblem(w, r, kindValidation, "incarnation needs a mirror", nil)
		return
	case raw == "all":
		filter.AllIncarnations = true
	default:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n <= 0 {
			writeProblem(w, r, kindValidation, fmt.Sprintf("incarnation %q is neither a positive integer nor all", raw), nil)
			return
		}
		filter.Incarnation = n
	}
	if after < 0 {
		last, err := s.svc.LastEventID(ctx)
		if err != nil {
			writeError(w, r, err)
			return
		}
		after = max(last-eventReplay, 0)
	}
	filter.AfterID = after
	feed, err := s.svc.FollowEvents(filter)
	if err != nil {
		writeError(w, r, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeProblem(w, r, kindInternal, "streaming is not supported by this connection", nil)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	poll := time.NewTicker(eventPollInterval)
	defer poll.Stop()
	lastWrite := time.Now()
	waiting := false // for the database, which did not answer
	held := false    // warned that an open transaction holds events back
	for {
		events, err := feed.Next(ctx)
		switch {
		case err == nil && waiting:
			logger(ctx).InfoContext(ctx, "event stream: the database answers again")
			waiting = false
		case err == nil:
		case ctx.Err() != nil:
			return
		case errors.Is(err, service.ErrDatabaseUnavailable):
			// An outage or a failover: the stream stays open, kept alive,
			// and goes on from the last event sent once the database is
			// back. A browser's EventSource does not reconnect after a
			// 503, so ending the stream here would end it for good.
			if !waiting {
				logger(ctx).WarnContext(ctx, "event stream: waiting for the database", "err", err)
				waiting = true
			}
		default:
			logger(ctx).WarnContext(ctx, "event stream query failed", "err", err)
			return
		}
		if behind := feed.Behind(); behind > eventHeldWarning && !held {
			logger(ctx).WarnContext(ctx, "event stream: newer events wait for a transaction left open on the PostgreSQL server "+
				"(any of its databases) to end", "waited", behind.Round(time.Second))
			held = true
		} else if behind == 0 {
			held = false
		}
		if len(events) > 0 || time.Since(lastWrite) > s.keepAlive {
			_ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
			for _, e := range events {
				b, _ := json.Marshal(eventView(e))
				fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Kind, b)
			}
			if len(events) == 0 {
				fmt.Fprint(w, ": keep-alive\n\n")
			}
			if err := rc.Flush(); err != nil {
				return // the client is gone or stopped reading
			}
			lastWrite = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
	}
}

// mountDocs serves the OpenAPI document and the interactive docs page.
func mountDocs(r chi.Router, spec []byte) {
	serveSpec := func(w http.ResponseWriter, r *http.Request) {
		if len(spec) == 0 {
			writeProblem(w, r, kindNotFound, "no OpenAPI document is built into this server", nil)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(spec)
	}
	r.Get("/openapi.json", serveSpec)
	r.Get("/docs", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/docs/index.html", http.StatusMovedPermanently)
	})
	// The docs page's own doc.json is the same document (swag's registry,
	// which it would read, is not used).
	r.Get("/docs/doc.json", serveSpec)
	mountDocsPage(r)
}
