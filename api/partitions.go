package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"kmirror/service"
)

// listPartitions godoc
//
//	@Summary		Describe mirror partitions
//	@Description	The describe rows: offsets, lag, state, error, retries, lost records and owner, ordered by mirror, topic and partition, a page at a time.
//	@Description	A response with next_cursor has more rows: ask again with cursor=next_cursor and the same filters until a response has none.
//	@Description	Rows added or removed between two pages shift nothing: a row that exists throughout the walk comes back exactly once.
//	@Description	Pages share the instance's describe budget (--api-describe-rate rows a second after a burst of 10,000): past it a page waits its turn, and is 429 only if it could not be served before its deadline.
//	@ID				listPartitions
//	@Tags			partitions
//	@Produce		json
//	@Param			mirror	query		string			false	"Mirror name"
//	@Param			topic	query		string			false	"RE2 pattern matched against whole topic names"
//	@Param			state	query		PartitionState	false	"Only partitions in this state"
//	@Param			erroring		query		bool			false	"Only partitions with an error: FAILED, or retrying in their state (the mirror status's erroring)"
//	@Param			divergent_tail	query		bool			false	"Only partitions that kept a divergent tail"
//	@Param			limit	query		int				false	"Most rows in the page"	minimum(1)	maximum(5000)	default(1000)
//	@Param			cursor	query		string			false	"The next_cursor of the previous page, unchanged"
//	@Success		200		{object}	PartitionList
//	@Failure		400		{object}	Problem	"validation: a bad pattern, state, erroring, divergent_tail, limit or cursor"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		404		{object}	Problem	"not-found: no such mirror"
//	@Failure		429		{object}	Problem	"rate-limited: the describe budget could not serve the page before its deadline (with Retry-After)"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/partitions [get]
func (s *server) listPartitions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := service.PartitionFilter{Mirror: q.Get("mirror"), Topic: q.Get("topic"), State: q.Get("state")}
	var bad service.ValidationError
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"erroring", &f.Erroring}, {"divergent_tail", &f.DivergentTail}} {
		var v *service.ValidationError
		if errors.As(queryBool(r, b.name, b.dst), &v) {
			bad.Fields = append(bad.Fields, v.Fields...)
		}
	}
	if len(bad.Fields) > 0 {
		writeError(w, r, &bad)
		return
	}
	limit := service.DefaultPartitionPageLimit
	if v := q.Get("limit"); v != "" {
		// A limit that is not an integer is out of range: the service
		// says so, with whatever else is wrong with the request.
		n, err := strconv.Atoi(v)
		if err != nil {
			n = 0
		}
		limit = n
	}
	done := func(int) {}
	if s.describe != nil {
		var err error
		if done, err = s.describe.acquire(r.Context(), min(max(limit, 1), service.MaxPartitionPageLimit)); err != nil {
			writeBudgetError(w, r, err)
			return
		}
	}
	page, err := s.svc.ListPartitionsPage(r.Context(), f, service.PartitionPageParams{Limit: limit, Cursor: q.Get("cursor")})
	done(len(page.Rows))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := PartitionList{Partitions: make([]PartitionRow, len(page.Rows)), NextCursor: page.NextCursor}
	for i, p := range page.Rows {
		out.Partitions[i] = partitionView(p)
	}
	writeJSON(w, http.StatusOK, out)
}

// translate godoc
//
//	@Summary		Translate a source offset to the destination
//	@Description	Answers from the offset map. An offset that is not itself a mirrored record rounds toward the earlier destination offset: a consumer may see a duplicate, never a gap.
//	@ID				translateOffset
//	@Tags			partitions
//	@Produce		json
//	@Param			mirror			path		string	true	"Mirror name"
//	@Param			topic			path		string	true	"Topic name"
//	@Param			partition		path		int		true	"Partition"	minimum(0)
//	@Param			source_offset	query		int		true	"Source offset"	minimum(0)
//	@Success		200				{object}	Translation
//	@Failure		400				{object}	Problem	"validation: partition or source_offset is not a non-negative integer"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		404				{object}	Problem	"not-found: no such mirror, topic or partition, or nothing mirrored at that offset yet"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/mirrors/{mirror}/topics/{topic}/partitions/{partition}/translate [get]
func (s *server) translate(w http.ResponseWriter, r *http.Request) {
	var fields []service.FieldError
	partition, err := strconv.ParseInt(chi.URLParam(r, "partition"), 10, 32)
	if err != nil || partition < 0 {
		fields = append(fields, service.FieldError{Field: "partition", Message: "must be a non-negative integer"})
	}
	offset, err := strconv.ParseInt(r.URL.Query().Get("source_offset"), 10, 64)
	if err != nil {
		fields = append(fields, service.FieldError{Field: "source_offset", Message: "required: a non-negative integer"})
	}
	if len(fields) > 0 {
		writeError(w, r, &service.ValidationError{Fields: fields})
		return
	}
	t, err := s.svc.TranslateToTopic(r.Context(), chi.URLParam(r, "mirror"), chi.URLParam(r, "topic"), int32(partition), offset)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, Translation{DestinationTopic: t.DestinationTopic, SourceOffset: t.SourceOffset,
		DestinationOffset: t.DestinationOffset, Exact: t.Exact})
}
