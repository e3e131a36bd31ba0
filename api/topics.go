package api

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"kmirror/service"
)

// addTopics godoc
//
//	@Summary		Add topics to a mirror
//	@Description	Resolves the pattern (RE2, whole-name match) against the source cluster's topics and starts mirroring each match into its destination topic, named by the mirror's topic.name.prefix and the source name (each match's destination_topic); a stopped topic is restarted under the name it was first added with. All or nothing: a match that is already mirroring or paused, or whose destination topic another mirror writes, is a 409 and nothing changes; so is a destination topic that already holds records this mirror did not write (a preflight check), unless continue or recreate. With dry_run the same resolution and checks run and nothing is written: a preview of the matches; with dry_run and continue the answer's continuation also says, per partition, how the overlap with the source would be proven, what is left to copy and any divergent tail (both clusters are read for it); with dry_run and recreate each match's foreign_records says how many records its destination topic holds that this mirror did not write, which recreating it deletes. The partitions then go PREPARING, then MIRRORING.
//	@ID				addTopics
//	@Tags			topics
//	@Accept			json
//	@Produce		json
//	@Param			mirror	path		string				true	"Mirror name"
//	@Param			body	body		AddTopicsRequest	true	"Topics to add"
//	@Param			dry_run	query		bool				false	"Resolve and check only; write nothing"
//	@Param			skip_checks	query	bool				false	"Add without the preflight checks of the clusters (POST /v1/mirrors/{mirror}:check), which otherwise refuse the add with a 409 preflight-failed when one fails"
//	@Param			wait	query		string				false	"Wait up to this Go duration (e.g. 30s, 2m; at most 5m) for every partition of the topics to reach the target state (MIRRORING); the answer's wait then says how far they got. Running out of time is not an error. Ignored with dry_run" example(30s) format(go-duration)
//	@Success		200		{object}	TopicsResult
//	@Failure		400		{object}	Problem	"malformed-json, unknown-field or validation (a bad pattern or wait; each field in errors); nothing changed"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		403	{object}	Problem	"forbidden: the token's role is below operator"
//	@Failure		429	{object}	Problem	"rate-limited: too many changes from this token (with Retry-After)"
//	@Failure		404		{object}	Problem	"not-found: no such mirror; no-match: the pattern matched no topic"
//	@Failure		409		{object}	Problem	"conflict: a match already mirroring or paused, or whose destination topic another mirror writes (each in topics, with mirrored_by and destination_topic); preflight-failed: a check of the clusters that the add needs failed, e.g. a destination topic holds records this mirror did not write without continue or recreate (each in checks, with what to grant; skip_checks adds anyway); nothing changed"
//	@Failure		413	{object}	Problem	"body-too-large: a body over 1 MiB"
//	@Failure		415	{object}	Problem	"unsupported-media-type: a body that is not JSON"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"source-unavailable: the source cluster (or, for a dry run with continue, the destination cluster) did not answer; database-unavailable: PostgreSQL did not answer (with Retry-After); secret-key-unavailable: the mirror's secrets are sealed under a key this server has not loaded yet (with Retry-After)"
//	@Router			/v1/mirrors/{mirror}/topics:add [post]
func (s *server) addTopics(w http.ResponseWriter, r *http.Request) {
	var dryRun, skipChecks bool
	if err := queryBool(r, "dry_run", &dryRun); err != nil {
		writeError(w, r, err)
		return
	}
	if err := queryBool(r, "skip_checks", &skipChecks); err != nil {
		writeError(w, r, err)
		return
	}
	wait, err := queryWait(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if dryRun {
		wait = nil // nothing is started, so there is nothing to wait for
	}
	var req AddTopicsRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	res, err := s.svc.AddTopics(r.Context(), chi.URLParam(r, "mirror"), service.AddTopicsInput{
		Topic: req.Topic, ReplicationFactor: req.ReplicationFactor, Recreate: req.Recreate, Continue: req.Continue,
		KeepDivergent: req.KeepDivergent, DryRun: dryRun, SkipChecks: skipChecks})
	s.writeTopicsResult(w, r, res, wait, err)
}

// pauseTopics godoc
//
//	@Summary		Pause mirroring topics
//	@Description	Only mirroring topics can be paused; their partitions go PAUSING, then PAUSED, and the destination topics stay read-only. Source end offsets keep being read, so lag stays true. All or nothing.
//	@ID				pauseTopics
//	@Tags			topics
//	@Accept			json
//	@Produce		json
//	@Param			mirror	path		string				true	"Mirror name"
//	@Param			body	body		TopicsRequest	true	"Topics to pause"
//	@Param			wait	query		string				false	"Wait up to this Go duration (e.g. 30s, 2m; at most 5m) for every partition of the topics to reach the target state (PAUSED); the answer's wait then says how far they got. Running out of time is not an error" example(30s) format(go-duration)
//	@Success		200		{object}	TopicsResult
//	@Failure		400		{object}	Problem	"malformed-json, unknown-field or validation (a bad pattern or wait; each field in errors); nothing changed"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		403	{object}	Problem	"forbidden: the token's role is below operator"
//	@Failure		429	{object}	Problem	"rate-limited: too many changes from this token (with Retry-After)"
//	@Failure		404		{object}	Problem	"not-found: no such mirror; no-match: the pattern matched no topic"
//	@Failure		409		{object}	Problem	"conflict: a match that is not mirroring (each in topics); nothing changed"
//	@Failure		413	{object}	Problem	"body-too-large: a body over 1 MiB"
//	@Failure		415	{object}	Problem	"unsupported-media-type: a body that is not JSON"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/mirrors/{mirror}/topics:pause [post]
func (s *server) pauseTopics(w http.ResponseWriter, r *http.Request) {
	s.topicAction(w, r, s.svc.PauseTopics)
}

// resumeTopics godoc
//
//	@Summary		Resume paused topics
//	@Description	Only paused topics can be resumed; their partitions go MIRRORING and continue from the checkpoint. All or nothing.
//	@ID				resumeTopics
//	@Tags			topics
//	@Accept			json
//	@Produce		json
//	@Param			mirror	path		string				true	"Mirror name"
//	@Param			body	body		TopicsRequest	true	"Topics to resume"
//	@Param			wait	query		string				false	"Wait up to this Go duration (e.g. 30s, 2m; at most 5m) for every partition of the topics to reach the target state (MIRRORING); the answer's wait then says how far they got. Running out of time is not an error" example(30s) format(go-duration)
//	@Success		200		{object}	TopicsResult
//	@Failure		400		{object}	Problem	"malformed-json, unknown-field or validation (a bad pattern or wait; each field in errors); nothing changed"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		403	{object}	Problem	"forbidden: the token's role is below operator"
//	@Failure		429	{object}	Problem	"rate-limited: too many changes from this token (with Retry-After)"
//	@Failure		404		{object}	Problem	"not-found: no such mirror; no-match: the pattern matched no topic"
//	@Failure		409		{object}	Problem	"conflict: a match that is not paused (each in topics); nothing changed"
//	@Failure		413	{object}	Problem	"body-too-large: a body over 1 MiB"
//	@Failure		415	{object}	Problem	"unsupported-media-type: a body that is not JSON"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/mirrors/{mirror}/topics:resume [post]
func (s *server) resumeTopics(w http.ResponseWriter, r *http.Request) {
	s.topicAction(w, r, s.svc.ResumeTopics)
}

// removeTopics godoc
//
//	@Summary		Remove topics from a mirror (failover)
//	@Description	Mirroring stops: the partitions go STOPPING, save their last offsets and lift read-only, then STOPPED, when the destination topics are writable. topics:add restarts them. All or nothing. With dry_run the pattern resolves with the same checks and nothing is written: the answer's failover says, per partition of each match, what a failover now would leave behind (the lag against the source's end, read from the source for this call, and the timestamp of the newest record not copied yet).
//	@ID				removeTopics
//	@Tags			topics
//	@Accept			json
//	@Produce		json
//	@Param			mirror	path		string				true	"Mirror name"
//	@Param			body	body		TopicsRequest	true	"Topics to remove"
//	@Param			dry_run	query		bool				false	"Preview what a failover now would leave behind; write nothing"
//	@Param			wait	query		string				false	"Wait up to this Go duration (e.g. 30s, 2m; at most 5m) for every partition of the topics to reach the target state (STOPPED); the answer's wait then says how far they got. Running out of time is not an error. Ignored with dry_run" example(30s) format(go-duration)
//	@Success		200		{object}	TopicsResult
//	@Failure		400		{object}	Problem	"malformed-json, unknown-field or validation (a bad pattern or wait; each field in errors); nothing changed"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		403	{object}	Problem	"forbidden: the token's role is below operator"
//	@Failure		429	{object}	Problem	"rate-limited: too many changes from this token (with Retry-After)"
//	@Failure		404		{object}	Problem	"not-found: no such mirror; no-match: the pattern matched no topic"
//	@Failure		409		{object}	Problem	"conflict: a match that is already stopped (each in topics); nothing changed"
//	@Failure		413	{object}	Problem	"body-too-large: a body over 1 MiB"
//	@Failure		415	{object}	Problem	"unsupported-media-type: a body that is not JSON"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"source-unavailable: with dry_run, the source cluster did not answer within the server's source timeout; database-unavailable: PostgreSQL did not answer (with Retry-After); secret-key-unavailable: with dry_run, the mirror's secrets are sealed under a key this server has not loaded yet (with Retry-After)"
//	@Router			/v1/mirrors/{mirror}/topics:remove [post]
func (s *server) removeTopics(w http.ResponseWriter, r *http.Request) {
	var dryRun bool
	if err := queryBool(r, "dry_run", &dryRun); err != nil {
		writeError(w, r, err)
		return
	}
	if !dryRun {
		s.topicAction(w, r, s.svc.RemoveTopics)
		return
	}
	if _, err := queryWait(r); err != nil {
		writeError(w, r, err) // checked as without dry_run, then ignored
		return
	}
	var req TopicsRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	res, err := s.svc.PreviewRemoveTopics(r.Context(), chi.URLParam(r, "mirror"), req.Topic)
	s.writeTopicsResult(w, r, res, nil, err)
}

func (s *server) topicAction(w http.ResponseWriter, r *http.Request,
	act func(ctx context.Context, mirror, pattern string) (service.TopicsResult, error)) {
	wait, err := queryWait(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	var req TopicsRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	res, err := act(r.Context(), chi.URLParam(r, "mirror"), req.Topic)
	s.writeTopicsResult(w, r, res, wait, err)
}

// queryWait parses the wait query parameter: nil when absent.
func queryWait(r *http.Request) (*time.Duration, error) {
	if !r.URL.Query().Has("wait") {
		return nil, nil
	}
	d, err := service.ParseWait("wait", r.URL.Query().Get("wait"))
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// writeTopicsResult answers a topic action, after waiting for its
// partitions when the call asked to. The action is done by then: a wait cut
// short (the client went away, or the request deadline) still answers 200
// with the states it last read.
func (s *server) writeTopicsResult(w http.ResponseWriter, r *http.Request, res service.TopicsResult, wait *time.Duration, err error) {
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := TopicsResult{Mirror: res.Mirror, Action: TopicsAction(res.Action), Topics: res.Topics}
	dests := map[string]string{}
	for _, m := range res.Matches {
		out.Matches = append(out.Matches, TopicMatch{Topic: m.Topic, DestinationTopic: m.DestinationTopic, Partitions: m.Partitions,
			ForeignRecords: m.ForeignRecords})
		dests[m.Topic] = m.DestinationTopic
	}
	for _, t := range res.Failover {
		out.Failover = append(out.Failover, failoverView(t))
	}
	for _, t := range res.Continuation {
		// A continuation is per matched topic: its destination name is
		// the match's.
		out.Continuation = append(out.Continuation, continuationView(t, dests[t.Topic]))
	}
	if wait != nil {
		wr, err := s.svc.WaitForTopics(r.Context(), res, *wait)
		if err != nil {
			writeError(w, r, err)
			return
		}
		out.Wait = &TopicsWait{Completed: wr.Completed, WaitedMs: wr.Waited.Milliseconds(),
			Topics: make([]TopicWaitProgress, len(wr.Topics))}
		for i, t := range wr.Topics {
			out.Wait.Topics[i] = TopicWaitProgress{Topic: t.Topic, DestinationTopic: t.DestinationTopic, TargetState: PartitionState(t.Target),
				Ready: t.Ready, Failed: t.Failed, Total: t.Total}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// listTopics godoc
//
//	@Summary		List a mirror's topics
//	@Description	Each topic of the mirror, stopped ones included, with its desired state, partitions per state, lag and records/s.
//	@ID				listTopics
//	@Tags			topics
//	@Produce		json
//	@Param			mirror	path		string	true	"Mirror name"
//	@Success		200		{object}	TopicList
//	@Failure		400	{object}	Problem	"validation: a NUL character or invalid UTF-8 in the path or query"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		404		{object}	Problem	"not-found: no such mirror"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/mirrors/{mirror}/topics [get]
func (s *server) listTopics(w http.ResponseWriter, r *http.Request) {
	mirror := chi.URLParam(r, "mirror")
	topics, err := s.svc.ListTopics(r.Context(), mirror)
	if err != nil {
		writeError(w, r, err)
		return
	}
	sums, err := s.svc.TopicSummaries(r.Context(), mirror)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := TopicList{Topics: make([]Topic, len(topics))}
	for i, t := range topics {
		out.Topics[i] = topicView(t, sums[t.Topic])
	}
	writeJSON(w, http.StatusOK, out)
}

// getTopic godoc
//
//	@Summary		Get a mirror topic with its partitions
//	@Description	The topic's summary and the describe row of each of its partitions, by partition number.
//	@ID				getTopic
//	@Tags			topics
//	@Produce		json
//	@Param			mirror	path		string	true	"Mirror name"
//	@Param			topic	path		string	true	"Topic name"
//	@Success		200		{object}	TopicDetail
//	@Failure		400	{object}	Problem	"validation: a NUL character or invalid UTF-8 in the path or query"
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		404		{object}	Problem	"not-found: no such mirror, or the mirror has no such topic"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/v1/mirrors/{mirror}/topics/{topic} [get]
func (s *server) getTopic(w http.ResponseWriter, r *http.Request) {
	mirror, topic := chi.URLParam(r, "mirror"), chi.URLParam(r, "topic")
	t, err := s.svc.GetTopic(r.Context(), mirror, topic)
	if err != nil {
		writeError(w, r, err)
		return
	}
	rows, err := s.svc.TopicPartitions(r.Context(), mirror, topic)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := TopicDetail{Topic: topicView(t, service.SummarizePartitions(rows)), PartitionRows: make([]PartitionRow, len(rows))}
	for i, p := range rows {
		out.PartitionRows[i] = partitionView(p)
	}
	writeJSON(w, http.StatusOK, out)
}

func failoverView(t service.TopicFailoverPreview) TopicFailoverPreview {
	v := TopicFailoverPreview{Topic: t.Topic, DestinationTopic: t.DestinationTopic, Lag: t.Lag, Records: t.Records,
		Partitions: make([]PartitionFailoverPreview, len(t.Partitions))}
	for i, p := range t.Partitions {
		v.Partitions[i] = PartitionFailoverPreview{Partition: p.Partition, State: PartitionState(p.State.String()),
			NextOffset: p.NextOffset, SourceEndOffset: p.SourceEndOffset, Lag: p.Lag, Records: p.Records,
			NewestNotCopied: p.NewestNotCopied, OldestNotCopied: p.OldestNotCopied, OldestNotCopiedAgeMs: p.OldestNotCopiedAgeMs}
	}
	return v
}
