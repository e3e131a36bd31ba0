ALTER TABLE instances
    DROP COLUMN IF EXISTS destination_reachability_error,
    DROP COLUMN IF EXISTS destination_reachable_since,
    DROP COLUMN IF EXISTS destination_reachable;

ALTER TABLE mirrors
    DROP COLUMN IF EXISTS source_reachability_epoch,
    DROP COLUMN IF EXISTS source_reachability_owner,
    DROP COLUMN IF EXISTS source_reachability_error,
    DROP COLUMN IF EXISTS source_reachable_since,
    DROP COLUMN IF EXISTS source_reachable;
