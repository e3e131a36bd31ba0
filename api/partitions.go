package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"kmirror/service"
)

// listPartitions godoc
//
//	@Summary		Describe mirror partitions
//	@Description	The describe rows: offsets, lag, state, error, retries, lost records and owner.
//	@ID				listPartitions
//	@Tags			partitions
//	@Produce		json
//	@Param			mirror	query		string	false	"Mirror name"
//	@Param			topic	query		string	false	"RE2 pattern matched against whole topic names"
//	@Param			state	query		string	false	"A partition state, UNKNOWN included"
//	@Success		200		{object}	PartitionList
//	@Failure		400		{object}	Problem
//	@Failure		404		{object}	Problem
//	@Router			/v1/partitions [get]
func (s *server) listPartitions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rows, err := s.svc.ListPartitions(r.Context(), service.PartitionFilter{
		Mirror: q.Get("mirror"), Topic: q.Get("topic"), State: q.Get("state")})
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := PartitionList{Partitions: make([]PartitionRow, len(rows))}
	for i, p := range rows {
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
//	@Param			partition		path		int		true	"Partition"
//	@Param			source_offset	query		int		true	"Source offset"
//	@Success		200				{object}	Translation
//	@Failure		400				{object}	Problem
//	@Failure		404				{object}	Problem
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
	t, err := s.svc.Translate(r.Context(), chi.URLParam(r, "mirror"), chi.URLParam(r, "topic"), int32(partition), offset)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, Translation{SourceOffset: t.SourceOffset,
		DestinationOffset: t.DestinationOffset, Exact: t.Exact})
}
