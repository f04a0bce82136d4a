-- Example table for bloomguard's quick start, tests and benchmarks.
-- bloomguard reads any table and column: see [postgres] table/column.
CREATE TABLE IF NOT EXISTS users (
    id   text PRIMARY KEY,
    name text NOT NULL
);

-- A second kind of ID, for named filters ([filter orders] in scripts/demo).
CREATE TABLE IF NOT EXISTS orders (
    id      bigint PRIMARY KEY,
    user_id text NOT NULL
);
