-- bloomguard change feed: tell every bloomguard about new IDs as rows commit,
-- and keep a log of them from which a restarted or reconnected bloomguard can
-- catch up without copying the whole table (docs/feed.md).
--
-- Install once per database, as the role that will own the feed's tables
-- (the tables' owner, or a role granted INSERT on bloomguard_feed_log):
--                                 psql -f notify.sql
-- Then watch a table and column:  SELECT bloomguard_watch('users', 'id');
--                             or  SELECT bloomguard_watch('app.orders', 'order_no', 'orders_guard');
--   without the resumable log:    SELECT bloomguard_watch('users', 'id', feed => false);
-- Let bloomguard's role read the log and prune it (nothing more):
--                                 SELECT bloomguard_feed_grant('bloomguard');
-- Stop watching:                  SELECT bloomguard_unwatch('users');
--
-- bloomguard_watch creates a trigger
--   AFTER INSERT OR UPDATE OF <column> OR DELETE ON <table> FOR EACH ROW
-- whose function sends pg_notify(<channel>, <id>::text) for inserted and
-- updated rows, and pg_notify(<channel>_deleted, <id>::text) for deleted ones.
-- The function pins the settings that decide an id's text form (TimeZone UTC,
-- DateStyle ISO, extra_float_digits 1, bytea_output hex, IntervalStyle
-- postgres), so the inserting session's settings do not matter.  An id of
-- 8000 bytes or more (too long for a notification) is sent as an empty
-- payload; the write never fails because of bloomguard.
-- With the feed (the default) the same function also appends
-- (table, transaction id, id) to bloomguard_feed_log, the full id whatever
-- its length; bloomguard_feed_prune(retention) deletes what is older than the
-- retention.  Deletes are not logged.
-- Upgrading from an older notify.sql: run this file and bloomguard_watch again
-- for each watched table, so its trigger function gets these settings.
-- After ALTER TABLE ... DISABLE/ENABLE TRIGGER, or attaching or detaching a
-- partition of a watched table, run bloomguard_watch again: until then the
-- feed of that table is unavailable and bloomguard copies the table instead.
-- <channel> must equal bloomguard's [sync] channel (default 'bloomguard').
-- Notifications are sent when the transaction commits, to every listening
-- bloomguard.  A Bloom filter cannot forget: deletes only count towards
-- [sync] rebuild_after_deletes and take effect at the next rebuild.
--
-- Doing it by hand instead (same effect, for one table, without the feed):
--   CREATE FUNCTION users_bloomguard() RETURNS trigger LANGUAGE plpgsql
--   SET DateStyle = 'ISO, MDY' SET TimeZone = 'UTC' SET IntervalStyle = 'postgres'
--   SET extra_float_digits = 1 SET bytea_output = 'hex' AS $$
--   BEGIN
--     IF TG_OP = 'DELETE' THEN
--       IF octet_length(OLD.id::text) < 8000 THEN
--         PERFORM pg_notify('bloomguard_deleted', OLD.id::text);
--       END IF;
--       RETURN OLD;
--     END IF;
--     PERFORM pg_notify('bloomguard', CASE WHEN octet_length(NEW.id::text) < 8000
--                                          THEN NEW.id::text ELSE '' END);
--     RETURN NEW;
--   END $$;
--   CREATE TRIGGER bloomguard_notify AFTER INSERT OR UPDATE OF id OR DELETE
--     ON users FOR EACH ROW EXECUTE FUNCTION users_bloomguard();

-- ---------------------------------------------------------------- the feed --
-- One log for every watched table.  A row is written by the watch trigger in
-- the inserting transaction, so it commits (or rolls back) with the row it
-- describes.  xid is that transaction's top-level id (a subtransaction's
-- rows carry it too); a reader resumes from a snapshot's xmin, see
-- docs/feed.md.
CREATE TABLE IF NOT EXISTS bloomguard_feed_log (
    relid oid  NOT NULL,        -- the watched table (its oid)
    xid   xid8 NOT NULL,        -- pg_current_xact_id() of the writing transaction
    id    text NOT NULL         -- the id's text form, as COPY renders it
);
-- A resume reads WHERE relid = $1 AND xid >= $2; pruning deletes per table.
CREATE INDEX IF NOT EXISTS bloomguard_feed_log_relid_xid ON bloomguard_feed_log (relid, xid);

-- The tables with a feed.  since: the smallest position from which the log
-- of that table is complete (rows written before bloomguard_watch installed
-- the trigger are not in it).  triggers: a fingerprint of the table's
-- bloomguard_notify triggers (bloomguard_feed_triggers) when bloomguard_watch
-- last ran; anything that disables, replaces or adds one changes it, and the
-- feed of the table is unavailable until bloomguard_watch runs again.
CREATE TABLE IF NOT EXISTS bloomguard_feed_tables (
    relid    oid  PRIMARY KEY,
    colname  name NOT NULL,
    since    xid8 NOT NULL,
    triggers text NOT NULL
);

-- One row: every log row with xid < watermark may have been pruned.
CREATE TABLE IF NOT EXISTS bloomguard_feed_state (
    one       boolean PRIMARY KEY DEFAULT true CHECK (one),
    watermark xid8 NOT NULL DEFAULT '0'
);
INSERT INTO bloomguard_feed_state DEFAULT VALUES ON CONFLICT DO NOTHING;

-- What pruning keeps in step with the clock: each bloomguard_feed_prune call
-- records (when, snapshot xmin, origin), so that a retention in time becomes
-- a cut in transaction ids (any position taken at or after `at` is >=
-- `snap_xmin`), and so that a reader whose position comes from before a
-- crash or a failover can fall back to a point that surely survived it.
CREATE TABLE IF NOT EXISTS bloomguard_feed_marks (
    at        timestamptz NOT NULL,
    snap_xmin xid8 NOT NULL,
    origin    text NOT NULL
);
CREATE INDEX IF NOT EXISTS bloomguard_feed_marks_at ON bloomguard_feed_marks (at);

-- Which run of which server's history transaction ids come from: the
-- cluster's system identifier, the timeline (a promotion starts a new one)
-- and the time the shared statistics were last reset (crash recovery resets
-- them).  Within one origin no transaction id is ever handed out twice;
-- across a crash or a failover one whose commit or abort record was lost may
-- be (docs/feed.md).
CREATE OR REPLACE FUNCTION bloomguard_feed_origin()
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('%s.%s.%s', (SELECT system_identifier FROM pg_control_system()),
                  substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8),
                  coalesce((SELECT floor(extract(epoch FROM stats_reset) * 1000000)::bigint
                              FROM pg_stat_bgwriter), 0))
$$;

-- Only the owner writes; readers get SELECT through bloomguard_feed_grant.
REVOKE ALL ON bloomguard_feed_log, bloomguard_feed_tables, bloomguard_feed_state,
              bloomguard_feed_marks FROM PUBLIC;

-- The fingerprint of a table's bloomguard_notify triggers (the table's and
-- its partitions'): each trigger's and its function's catalog row version.
-- ALTER TABLE ... ENABLE/DISABLE TRIGGER, DROP/CREATE TRIGGER, CREATE OR
-- REPLACE FUNCTION, ATTACH/DETACH PARTITION and a dump and restore all
-- change it.
CREATE OR REPLACE FUNCTION bloomguard_feed_triggers(tbl regclass)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(format('%s:%s:%s:%s', t.tgrelid, t.xmin, t.tgenabled, p.xmin),
                               ',' ORDER BY t.tgrelid), '')
      FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
     WHERE t.tgname = 'bloomguard_notify'
       AND (t.tgrelid = tbl OR t.tgrelid IN (SELECT relid FROM pg_partition_tree(tbl)))
$$;

-- The smallest position from which a resume of tbl's col is exact as of the
-- caller's snapshot, or NULL when there is no feed for that table and column
-- (not watched with the feed, another column, or its triggers changed since
-- bloomguard_watch).  A position below it is too old: load the table.
CREATE OR REPLACE FUNCTION bloomguard_feed_floor(tbl regclass, col name)
RETURNS xid8 LANGUAGE sql STABLE AS $$
    SELECT greatest(t.since, s.watermark)
      FROM bloomguard_feed_tables t, bloomguard_feed_state s
     WHERE t.relid = tbl AND t.colname = col AND t.triggers = bloomguard_feed_triggers(tbl)
$$;

-- ------------------------------------------------------- watch and unwatch --
-- The three-argument version of older installs; the new one below takes its
-- calls (a fourth argument with a default would make them ambiguous).
DROP FUNCTION IF EXISTS bloomguard_watch(regclass, name, text);

CREATE OR REPLACE FUNCTION bloomguard_watch(tbl regclass, col name,
                                            channel text DEFAULT 'bloomguard',
                                            feed boolean DEFAULT true)
RETURNS void LANGUAGE plpgsql AS $watch$
DECLARE
    -- One function per table, named after its oid: unique and always a valid name.
    fn text := 'bloomguard_notify_' || tbl::oid;
    logname text;
    keep boolean := false;
    since xid8;
BEGIN
    IF channel !~ '^[A-Za-z_][A-Za-z0-9_]{0,54}$' THEN
        RAISE EXCEPTION 'bloomguard: channel must match [A-Za-z_][A-Za-z0-9_]* and be at most 55 characters';
    END IF;
    PERFORM 1 FROM pg_attribute
     WHERE attrelid = tbl AND attname = col AND attnum > 0 AND NOT attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'bloomguard: table % has no column %', tbl, col;
    END IF;
    IF feed THEN
        -- since is read from a statement snapshot taken after the lock below;
        -- under REPEATABLE READ every statement would see the first one's.
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION 'bloomguard: bloomguard_watch with the feed must run in a READ COMMITTED transaction';
        END IF;
        IF NOT has_table_privilege('bloomguard_feed_log', 'INSERT') THEN
            RAISE EXCEPTION 'bloomguard: % may not insert into bloomguard_feed_log (grant it, or watch with feed => false)',
                current_user;
        END IF;
        -- The trigger function writes the log as its owner (this role), with
        -- a pinned search_path, whoever inserts into the table.
        SELECT format('%I.%I', n.nspname, c.relname) INTO logname
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.oid = 'bloomguard_feed_log'::regclass;
        -- Writers wait from here to our commit, so no row can slip in
        -- between the fingerprint check, the new trigger and since.
        EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
        SELECT t.colname = col AND t.triggers = bloomguard_feed_triggers(tbl) INTO keep
          FROM bloomguard_feed_tables t WHERE t.relid = tbl;
        keep := coalesce(keep, false);
    END IF;
    -- The SET clauses pin how an id is rendered as text to what bloomguard's
    -- own sessions use for COPY (src/loader.h, LOADER_SESSION_SETTINGS), so
    -- the inserting session's TimeZone, DateStyle, extra_float_digits or
    -- bytea_output cannot make a notified id differ from the copied one.
    -- (The payload is converted to bloomguard's client_encoding, UTF8, on
    -- delivery, as COPY's output is.)  An id of 8000 bytes or more does not
    -- fit in a notification: an empty payload tells bloomguard that such a
    -- row exists, instead of failing the application's write.  The log
    -- takes the id whole.
    EXECUTE format($fn$
        CREATE OR REPLACE FUNCTION %I() RETURNS trigger LANGUAGE plpgsql
        SET DateStyle = 'ISO, MDY' SET TimeZone = 'UTC' SET IntervalStyle = 'postgres'
        SET extra_float_digits = 1 SET bytea_output = 'hex' %s
        AS $body$
        DECLARE
            v text;
        BEGIN
            IF TG_OP = 'DELETE' THEN
                v := OLD.%I::text;
                IF v IS NOT NULL AND octet_length(v) < 8000 THEN
                    PERFORM pg_notify(%L, v);
                END IF;
                RETURN OLD;
            END IF;
            v := NEW.%I::text;
            IF v IS NOT NULL THEN
                PERFORM pg_notify(%L, CASE WHEN octet_length(v) < 8000 THEN v ELSE '' END);
                %s
            END IF;
            RETURN NEW;
        END
        $body$ $fn$, fn,
        CASE WHEN feed THEN 'SECURITY DEFINER SET search_path = pg_catalog, pg_temp' ELSE '' END,
        col, channel || '_deleted', col, channel,
        -- The table's own oid, not TG_RELID: a partition's row fires this too.
        CASE WHEN feed THEN format('INSERT INTO %s (relid, xid, id) VALUES (%s, pg_current_xact_id(), v);',
                                   logname, tbl::oid)
             ELSE '' END);
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = tbl AND tgname = 'bloomguard_notify') THEN
        EXECUTE format('DROP TRIGGER bloomguard_notify ON %s', tbl);
    END IF;
    EXECUTE format('CREATE TRIGGER bloomguard_notify AFTER INSERT OR UPDATE OF %I OR DELETE '
                   'ON %s FOR EACH ROW EXECUTE FUNCTION %I()', col, tbl, fn);
    -- Also for sessions with session_replication_role = replica (logical
    -- replication apply, pg_restore --disable-triggers users, some ETL):
    -- an ordinary trigger is skipped there and the row would never be notified.
    EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER bloomguard_notify', tbl);
    IF NOT feed THEN
        -- A feed this table had is over (its fingerprint no longer matches
        -- anyway); tidy up when this role may.
        IF has_table_privilege('bloomguard_feed_tables', 'DELETE')
           AND has_table_privilege('bloomguard_feed_log', 'DELETE') THEN
            DELETE FROM bloomguard_feed_tables WHERE relid = tbl;
            DELETE FROM bloomguard_feed_log WHERE relid = tbl;
        END IF;
        RETURN;
    END IF;
    IF keep THEN
        -- The trigger was whole since the last bloomguard_watch and we held
        -- the lock while replacing it: the log stays complete from since.
        UPDATE bloomguard_feed_tables SET triggers = bloomguard_feed_triggers(tbl)
         WHERE relid = tbl;
        RETURN;
    END IF;
    -- A fresh statement snapshot, taken after the lock: every other
    -- transaction that wrote the table without this trigger has ended, so
    -- its id is below this xmax, and every later writer has the trigger.
    -- This transaction may have written the table before, too: its own id
    -- is below since as well.
    SELECT greatest(pg_snapshot_xmax(pg_current_snapshot()),
                    (pg_current_xact_id()::text::numeric + 1)::text::xid8) INTO since;
    DELETE FROM bloomguard_feed_log WHERE relid = tbl;
    INSERT INTO bloomguard_feed_tables (relid, colname, since, triggers)
    VALUES (tbl, col, since, bloomguard_feed_triggers(tbl))
    ON CONFLICT (relid) DO UPDATE
        SET colname = EXCLUDED.colname, since = EXCLUDED.since, triggers = EXCLUDED.triggers;
END
$watch$;

CREATE OR REPLACE FUNCTION bloomguard_unwatch(tbl regclass)
RETURNS void LANGUAGE plpgsql AS $unwatch$
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS bloomguard_notify ON %s', tbl);
    EXECUTE format('DROP FUNCTION IF EXISTS %I()', 'bloomguard_notify_' || tbl::oid);
    IF has_table_privilege('bloomguard_feed_tables', 'DELETE')
       AND has_table_privilege('bloomguard_feed_log', 'DELETE') THEN
        DELETE FROM bloomguard_feed_tables WHERE relid = tbl;
        DELETE FROM bloomguard_feed_log WHERE relid = tbl;
    END IF;
END
$unwatch$;

-- ----------------------------------------------------------------- pruning --
-- bloomguard_feed_prune(retention): forget what is older than retention.
-- Records a mark (now, current snapshot xmin), takes the newest mark at least
-- retention old, deletes every log row below its xmin and raises the
-- watermark to it.  A position taken by a reader at or after that mark's
-- time is >= its xmin, so any position younger than the retention stays
-- valid; an older one may be below the watermark and reads as too old.
-- Returns the number of log rows deleted.  SECURITY DEFINER, owned by the
-- installing role: bloomguard's role needs only EXECUTE (bloomguard_feed_grant).
-- Created with this schema's name baked in, for its pinned search_path.
DO $install$
BEGIN
    EXECUTE format($fn$
        CREATE OR REPLACE FUNCTION %1$I.bloomguard_feed_prune(retention interval)
        RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
        SET search_path = pg_catalog, %1$I, pg_temp
        AS $body$
        DECLARE
            m record;
            t oid;
            k bigint;
            n bigint := 0;
        BEGIN
            IF retention IS NULL OR retention < interval '0' THEN
                RAISE EXCEPTION 'bloomguard: the retention must be 0 or more';
            END IF;
            -- clock_timestamp() is read after the statement's snapshot, so
            -- anything later than at sees an xmin >= this one.
            INSERT INTO bloomguard_feed_marks (at, snap_xmin, origin)
            VALUES (clock_timestamp(), pg_snapshot_xmin(pg_current_snapshot()),
                    bloomguard_feed_origin());
            SELECT * INTO m FROM bloomguard_feed_marks
             WHERE at <= clock_timestamp() - retention ORDER BY at DESC LIMIT 1;
            IF NOT FOUND THEN
                RETURN 0;
            END IF;
            DELETE FROM bloomguard_feed_marks WHERE at < m.at;
            -- Table by table, so each delete is a range of the (relid, xid) index.
            FOR t IN SELECT relid FROM bloomguard_feed_tables LOOP
                DELETE FROM bloomguard_feed_log WHERE relid = t AND xid < m.snap_xmin;
                GET DIAGNOSTICS k = ROW_COUNT;
                n := n + k;
            END LOOP;
            UPDATE bloomguard_feed_state SET watermark = greatest(watermark, m.snap_xmin);
            RETURN n;
        END
        $body$ $fn$, current_schema());
END
$install$;
REVOKE ALL ON FUNCTION bloomguard_feed_prune(interval) FROM PUBLIC;

-- bloomguard_feed_grant(role): what bloomguard's role needs for the feed and
-- nothing more: read the log, its state and marks, and prune.  (Reading the table
-- itself, for COPY, is granted separately: GRANT SELECT (id) ON users TO ...)
CREATE OR REPLACE FUNCTION bloomguard_feed_grant(reader regrole)
RETURNS void LANGUAGE plpgsql AS $grant$
BEGIN
    EXECUTE format('GRANT SELECT ON bloomguard_feed_log, bloomguard_feed_tables, '
                   'bloomguard_feed_state, bloomguard_feed_marks TO %s', reader);
    EXECUTE format('GRANT EXECUTE ON FUNCTION bloomguard_feed_prune(interval) TO %s', reader);
END
$grant$;
