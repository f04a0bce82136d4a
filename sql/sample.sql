-- Fill users with sample rows: ids '1' .. ':rows' (default 1000000).
--   psql -v rows=1000000 -f sql/sample.sql
-- IDs above :rows are surely absent, which makes curl examples easy.
\if :{?rows}
\else
\set rows 1000000
\endif
INSERT INTO users (id, name)
SELECT i::text, 'user ' || i
FROM generate_series(1, :rows) AS s(i)
ON CONFLICT (id) DO NOTHING;
ANALYZE users;
-- And :rows / 10 orders, ids 7, 14, 21, ...: an id that is not a multiple of 7
-- is surely absent.
INSERT INTO orders (id, user_id)
SELECT i * 7, (1 + i % :rows)::text
FROM generate_series(1, greatest(:rows / 10, 1)) AS s(i)
ON CONFLICT (id) DO NOTHING;
ANALYZE orders;
