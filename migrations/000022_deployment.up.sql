-- deployment names this database's kmirror deployment, one row. Instances
-- key their heartbeats on the destination cluster with it, so that two
-- deployments writing to one cluster (fan-in, or the two sides of a
-- failback) never read each other's instances as their own.
CREATE TABLE deployment (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    id uuid NOT NULL DEFAULT gen_random_uuid()
);
INSERT INTO deployment DEFAULT VALUES;
