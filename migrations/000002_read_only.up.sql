-- Whether the destination enforces a mirror topic's read-only state with a
-- DENY WRITE ACL: NULL unknown (not yet mirrored), false where the
-- destination has no authorizer.
ALTER TABLE mirror_topics ADD COLUMN read_only_enforced boolean;
