-- Every mirror writes into the one destination cluster under the source
-- topic's name, so at most one mirror may mirror a given topic at a time.
CREATE UNIQUE INDEX mirror_topics_one_active_mirror ON mirror_topics (topic)
    WHERE desired_state <> 'stopped';
