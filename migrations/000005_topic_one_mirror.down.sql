DROP INDEX IF EXISTS mirror_topics_one_active_mirror;
