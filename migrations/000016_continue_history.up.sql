-- continue_history: the topic was added with "continue": a destination that
-- already holds the source's history (a failback) is proven and mirroring
-- goes on after it, instead of failing on records this mirror did not write.
ALTER TABLE mirror_topics ADD COLUMN continue_history boolean NOT NULL DEFAULT false;
