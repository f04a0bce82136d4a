-- bloomguard's side of PostgreSQL: what lets a bloomguard follow a table's
-- new IDs after its first load (docs/follow.md), and the change feed from
-- which a restarted or reconnected bloomguard catches up without copying the
-- whole table (docs/feed.md).
--
-- Install once per database, as the role that will own the feed's tables
-- (the tables' owner, or a role granted INSERT on bloomguard_feed_log):
--                                 psql -f notify.sql
-- Then watch a table and column:  SELECT bloomguard_watch('users', 'id');
-- It answers how bloomguard will follow the table:
--   'logical' where wal_level = logical: the table joins the publication
--             bloomguard (column list: the column and the replica identity),
--             no trigger, nothing for the table's writers;
--   'feed'    elsewhere: a trigger appends (table, transaction id, id) to
--             bloomguard_feed_log in the writing transaction, no NOTIFY.
-- Ask for one: SELECT bloomguard_watch('users', 'id', method => 'feed');
-- method => 'notify' also sends pg_notify(<channel>, id) from the trigger,
-- the old way: a notifying commit takes a database-wide lock through its WAL
-- flush, so notifying writers commit one at a time.  feed => false with it:
-- NOTIFY alone.
-- Let bloomguard's role read the feed and prune it (nothing more):
--                                 SELECT bloomguard_feed_grant('bloomguard');
-- (method logical needs the REPLICATION attribute instead, granted by a
-- superuser: ALTER ROLE bloomguard REPLICATION.)
-- Stop watching:                  SELECT bloomguard_unwatch('users');
--
-- The trigger function pins the settings that decide an id's text form
-- (TimeZone UTC, DateStyle ISO, extra_float_digits 1, bytea_output hex,
-- IntervalStyle postgres), so the inserting session's settings do not
-- matter; bloomguard's replication connection pins the same ones.  An id of
-- 8000 bytes or more is logged whole; with NOTIFY it is sent as an empty
-- payload (too long for a notification) and the write never fails because
-- of bloomguard.  bloomguard_feed_prune(retention) deletes what is older
-- than the retention.  Deletes are not logged.
-- Upgrading from an older notify.sql: run this file and bloomguard_watch again
-- for each watched table.  After ALTER TABLE ... DISABLE/ENABLE TRIGGER,
-- attaching or detaching a partition of a watched table, or creating an
-- inheritance child of it (its rows are the table's: SELECT returns them),
-- run bloomguard_watch again: until then the feed of that table is
-- unavailable (the child has no trigger, or is not in the publication) and
-- bloomguard is degraded.  A renamed column is read by its number: writes
-- never fail because of a rename, and bloomguard is degraded until it is
-- back and copied (docs/follow.md).  A Bloom filter cannot forget: deletes only
-- count towards [sync] rebuild_after_deletes and take effect at the next
-- rebuild.

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
-- A resume looks for the newest mark of its history at or below its position.
CREATE INDEX IF NOT EXISTS bloomguard_feed_marks_origin ON bloomguard_feed_marks (origin, snap_xmin);

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

-- The tables whose rows a SELECT on tbl returns: tbl and every table under
-- it, inheritance children and partitions at any depth.
CREATE OR REPLACE FUNCTION bloomguard_tree(tbl regclass)
RETURNS SETOF oid LANGUAGE sql STABLE AS $$
    WITH RECURSIVE tree(rel) AS (
        SELECT tbl::oid
        UNION
        SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN tree ON i.inhparent = tree.rel)
    SELECT rel FROM tree
$$;

-- The fingerprint of a table's bloomguard_notify triggers: for the table
-- and every table under it (bloomguard_tree), each trigger's and its
-- function's catalog row version, and the tables that have none.  ALTER
-- TABLE ... ENABLE/DISABLE TRIGGER, DROP/CREATE TRIGGER, CREATE OR REPLACE
-- FUNCTION, ATTACH/DETACH PARTITION, a new inheritance child or partition,
-- and a dump and restore all change it.
CREATE OR REPLACE FUNCTION bloomguard_feed_triggers(tbl regclass)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(format('%s:%s:%s:%s', c.oid, t.xmin, t.tgenabled, p.xmin),
                               ',' ORDER BY c.oid), '')
      FROM bloomguard_tree(tbl) r(rel)
      JOIN pg_class c ON c.oid = r.rel
      LEFT JOIN pg_trigger t ON t.tgrelid = c.oid AND t.tgname = 'bloomguard_notify'
      LEFT JOIN pg_proc p ON p.oid = t.tgfoid
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
-- Older installs' versions; the one below takes their calls (another
-- argument with a default would make them ambiguous).
DROP FUNCTION IF EXISTS bloomguard_watch(regclass, name, text);
DROP FUNCTION IF EXISTS bloomguard_watch(regclass, name, text, boolean);
DROP FUNCTION IF EXISTS bloomguard_unwatch(regclass);

-- The columns a publication must carry for tbl so that bloomguard reads col
-- and the application's writes keep working: PostgreSQL refuses UPDATE and
-- DELETE on a table whose publication publishes them with a column list
-- that leaves out its replica identity, or when it has none.  Returns the
-- column list ("(a, b)"), '' for REPLICA IDENTITY FULL (no list: every
-- column), or NULL when the table has no replica identity (no primary key,
-- REPLICA IDENTITY NOTHING): such a table cannot be published without
-- breaking its UPDATEs.
CREATE OR REPLACE FUNCTION bloomguard_publish_columns(tbl regclass, col name)
RETURNS text LANGUAGE plpgsql STABLE AS $cols$
DECLARE
    ident "char";
    cols text;
BEGIN
    SELECT relreplident INTO ident FROM pg_class WHERE oid = tbl;
    IF ident = 'f' THEN
        RETURN '';
    END IF;
    IF ident = 'n' THEN
        RETURN NULL;
    END IF;
    SELECT string_agg(DISTINCT quote_ident(a.attname), ', ')
      INTO cols
      FROM pg_index i
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
     WHERE i.indrelid = tbl
       AND CASE WHEN ident = 'i' THEN i.indisreplident ELSE i.indisprimary END;
    IF cols IS NULL THEN
        RETURN NULL;
    END IF;
    -- The guarded column first, then the identity's (without it twice).
    SELECT '(' || string_agg(c, ', ' ORDER BY o) || ')' INTO cols
      FROM (SELECT quote_ident(col) AS c, 0 AS o
            UNION
            SELECT quote_ident(a.attname), 1
              FROM pg_index i
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
             WHERE i.indrelid = tbl
               AND CASE WHEN ident = 'i' THEN i.indisreplident ELSE i.indisprimary END
               AND a.attname <> col) x;
    RETURN cols;
END
$cols$;

-- The tables of bloomguard_tree(tbl) that need a trigger (and a publication
-- entry) of their own: tbl and its inheritance children.  A partition has
-- its partitioned parent's (PostgreSQL clones a row trigger onto every
-- partition, those made later included, and a published partitioned table
-- publishes its partitions).
CREATE OR REPLACE FUNCTION bloomguard_own_tables(tbl regclass)
RETURNS SETOF regclass LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass FROM bloomguard_tree(tbl) r(rel) JOIN pg_class c ON c.oid = r.rel
     WHERE c.oid = tbl OR NOT c.relispartition
     ORDER BY c.oid = tbl DESC, c.oid
$$;

-- Drop tbl's bloomguard trigger (on it and its inheritance children) and
-- its function (a table followed from the WAL needs none: it would only
-- cost the writers).
CREATE OR REPLACE FUNCTION bloomguard_drop_trigger(tbl regclass)
RETURNS void LANGUAGE plpgsql AS $drop$
DECLARE
    r regclass;
BEGIN
    FOR r IN SELECT * FROM bloomguard_own_tables(tbl) LOOP
        IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = r AND tgname = 'bloomguard_notify'
                                              AND NOT tgisinternal AND tgparentid = 0) THEN
            EXECUTE format('DROP TRIGGER bloomguard_notify ON %s', r);
        END IF;
    END LOOP;
    IF to_regprocedure(quote_ident('bloomguard_notify_' || tbl::oid) || '()') IS NOT NULL THEN
        EXECUTE format('DROP FUNCTION %I()', 'bloomguard_notify_' || tbl::oid);
    END IF;
    IF to_regclass('bloomguard_feed_tables') IS NOT NULL
       AND has_table_privilege('bloomguard_feed_tables', 'DELETE')
       AND has_table_privilege('bloomguard_feed_log', 'DELETE') THEN
        DELETE FROM bloomguard_feed_tables WHERE relid = tbl;
        DELETE FROM bloomguard_feed_log WHERE relid = tbl;
    END IF;
END
$drop$;

-- Whether tbl is in publication pub, and with which column list (NULL: not
-- in it; '' : every column).
CREATE OR REPLACE FUNCTION bloomguard_published_columns(tbl regclass, pub name)
RETURNS text LANGUAGE sql STABLE AS $pc$
    SELECT coalesce((SELECT '(' || string_agg(quote_ident(a.attname), ', ' ORDER BY k.ord) || ')'
                       FROM unnest(pr.prattrs::int2[]) WITH ORDINALITY k(attnum, ord)
                       JOIN pg_attribute a ON a.attrelid = tbl AND a.attnum = k.attnum), '')
      FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid
     WHERE p.pubname = pub AND pr.prrelid = tbl
$pc$;

-- Remove tbl and its inheritance children from publication pub, where
-- they are in it.
CREATE OR REPLACE FUNCTION bloomguard_unpublish(tbl regclass, pub name)
RETURNS void LANGUAGE plpgsql AS $unpub$
DECLARE
    r regclass;
BEGIN
    FOR r IN SELECT * FROM bloomguard_own_tables(tbl) LOOP
        IF bloomguard_published_columns(r, pub) IS NOT NULL THEN
            EXECUTE format('ALTER PUBLICATION %I DROP TABLE ONLY %s', pub, r);
        END IF;
    END LOOP;
END
$unpub$;

-- bloomguard_watch(table, column): prepare what lets bloomguard follow the
-- table's new IDs, and say which method that is:
--   'logical'  (wal_level = logical, the default with method => 'auto'):
--              the table goes into publication `publication` (created with
--              publish_via_partition_root) with a column list of the column
--              and the table's replica identity; no trigger: nothing for the
--              table's writers.  bloomguard reads it with [sync] method =
--              logical (or auto) over a replication slot.
--   'feed'     (otherwise): a trigger appends each new ID to
--              bloomguard_feed_log in the writing transaction, no NOTIFY;
--              bloomguard reads the log every [sync] poll_interval.
--   'notify'   only when asked: the same trigger also sends
--              pg_notify(channel, id) (and channel_deleted for deletes); a
--              notifying commit takes a database-wide lock through its WAL
--              flush, which costs a busy table most of its insert rate.
--              feed => false: NOTIFY alone, no log.
-- A table that has no replica identity cannot be published without breaking
-- its UPDATEs: method auto takes the feed for it, method logical refuses.
-- Watching again with another method undoes the previous one (the trigger
-- dropped, or the table taken out of the publication).
CREATE OR REPLACE FUNCTION bloomguard_watch(tbl regclass, col name,
                                            channel text DEFAULT 'bloomguard',
                                            feed boolean DEFAULT true,
                                            method text DEFAULT 'auto',
                                            publication name DEFAULT 'bloomguard')
RETURNS text LANGUAGE plpgsql AS $watch$
DECLARE
    -- One function per table, named after its oid: unique and always a valid name.
    fn text := 'bloomguard_notify_' || tbl::oid;
    m text := lower(method);
    cols text;
    logname text;
    keep boolean := false;
    since xid8;
    typ oid;
    colnum int2;
    pins text;
    r regclass;
    noident regclass;
BEGIN
    IF m NOT IN ('auto', 'logical', 'feed', 'notify') THEN
        RAISE EXCEPTION 'bloomguard: method must be auto, logical, feed or notify, not %', method;
    END IF;
    IF channel !~ '^[A-Za-z_][A-Za-z0-9_]{0,54}$' THEN
        RAISE EXCEPTION 'bloomguard: channel must match [A-Za-z_][A-Za-z0-9_]* and be at most 55 characters';
    END IF;
    PERFORM 1 FROM pg_attribute
     WHERE attrelid = tbl AND attname = col AND attnum > 0 AND NOT attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'bloomguard: table % has no column %', tbl, col;
    END IF;
    -- The table and each inheritance child under it are published each with
    -- its own column list (their replica identities may differ); one without
    -- a replica identity cannot be, without breaking its UPDATEs.
    SELECT o INTO noident FROM bloomguard_own_tables(tbl) o
     WHERE bloomguard_publish_columns(o, col) IS NULL LIMIT 1;
    IF m = 'auto' THEN
        m := CASE WHEN current_setting('wal_level') = 'logical' AND noident IS NULL
                  THEN 'logical' ELSE 'feed' END;
    END IF;
    IF m <> 'notify' AND NOT feed THEN
        RAISE EXCEPTION 'bloomguard: feed => false goes only with method => ''notify''';
    END IF;

    IF m = 'logical' THEN
        IF noident = tbl THEN
            RAISE EXCEPTION 'bloomguard: % has no replica identity (no primary key): publishing it would make its UPDATEs and DELETEs fail', tbl
                USING HINT = 'Add a primary key or ALTER TABLE ... REPLICA IDENTITY, or watch it with method => ''feed''.';
        ELSIF noident IS NOT NULL THEN
            RAISE EXCEPTION 'bloomguard: % (an inheritance child of %) has no replica identity (no primary key): publishing it would make its UPDATEs and DELETEs fail', noident, tbl
                USING HINT = 'Add a primary key to it or ALTER TABLE ... REPLICA IDENTITY, or watch the table with method => ''feed''.';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = publication) THEN
            EXECUTE format('CREATE PUBLICATION %I WITH (publish = %L, publish_via_partition_root = true)',
                           publication, 'insert, update, delete, truncate');
        END IF;
        -- Re-watching with the same columns changes nothing (a follower would
        -- see a new membership and copy the table again).  A partition is
        -- published with its partitioned table; an inheritance child (made
        -- since the last watch, too) needs an entry of its own.
        FOR r IN SELECT * FROM bloomguard_own_tables(tbl) LOOP
            cols := bloomguard_publish_columns(r, col);
            IF bloomguard_published_columns(r, publication) IS DISTINCT FROM cols THEN
                IF bloomguard_published_columns(r, publication) IS NOT NULL THEN
                    EXECUTE format('ALTER PUBLICATION %I DROP TABLE ONLY %s', publication, r);
                END IF;
                EXECUTE format('ALTER PUBLICATION %I ADD TABLE ONLY %s %s', publication, r, cols);
            END IF;
        END LOOP;
        PERFORM bloomguard_drop_trigger(tbl);
        IF current_setting('wal_level') <> 'logical' THEN
            RAISE NOTICE 'bloomguard: % is in publication %, but wal_level is %: set wal_level = logical and restart the server',
                tbl, publication, current_setting('wal_level');
        END IF;
        RETURN 'logical';
    END IF;

    -- feed or notify: a trigger.  The table leaves the publication, so no
    -- daemon on method auto follows it from the WAL while the trigger runs.
    IF to_regclass('pg_publication') IS NOT NULL AND EXISTS (SELECT 1 FROM pg_publication WHERE pubname = publication) THEN
        PERFORM bloomguard_unpublish(tbl, publication);
    END IF;
    IF feed THEN
        -- since is read from a statement snapshot taken after the lock below;
        -- under REPEATABLE READ every statement would see the first one's.
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION 'bloomguard: bloomguard_watch with the feed must run in a READ COMMITTED transaction';
        END IF;
        IF NOT has_table_privilege('bloomguard_feed_log', 'INSERT') THEN
            RAISE EXCEPTION 'bloomguard: % may not insert into bloomguard_feed_log (grant it, or watch with method => ''notify'', feed => false)',
                current_user;
        END IF;
        -- The trigger function writes the log as its owner (this role),
        -- whoever inserts into the table: every name in its body is
        -- schema-qualified, so the inserting session's search_path cannot
        -- lend it another function, operator or type.
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
    -- own sessions use for COPY (src/pg/loader.h, LOADER_SESSION_SETTINGS), so
    -- the inserting session's TimeZone, DateStyle, extra_float_digits,
    -- bytea_output or search_path (regclass...) cannot make a logged or
    -- notified id differ from the copied one.  A SET clause costs every
    -- insert (each call sets and restores it; search_path also empties the
    -- name lookup cache), so a column whose type's text form no setting
    -- changes (integers, numeric, text, uuid, also under a domain) gets
    -- none.  (A notification's payload is converted to bloomguard's
    -- client_encoding, UTF8, on delivery, as COPY's output is.)  With NOTIFY,
    -- an id of 8000 bytes or more does not fit in a notification: an empty
    -- payload tells bloomguard that such a row exists, instead of failing the
    -- application's write.  The log takes the id whole.
    SELECT a.atttypid, a.attnum INTO typ, colnum FROM pg_attribute a
     WHERE a.attrelid = tbl AND a.attname = col;
    WHILE (SELECT t.typtype FROM pg_type t WHERE t.oid = typ) = 'd' LOOP
        SELECT t.typbasetype INTO typ FROM pg_type t WHERE t.oid = typ;
    END LOOP;
    pins := CASE WHEN typ IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'numeric'::regtype,
                              'oid'::regtype, 'text'::regtype, 'varchar'::regtype,
                              'bpchar'::regtype, 'name'::regtype, 'uuid'::regtype)
                 THEN ''
                 ELSE 'SET DateStyle = ''ISO, MDY'' SET TimeZone = ''UTC'' SET IntervalStyle = ''postgres'' '
                      'SET extra_float_digits = 1 SET bytea_output = ''hex'' '
                      'SET search_path = pg_catalog, pg_temp' END;
    EXECUTE format($fn$
        CREATE OR REPLACE FUNCTION %I() RETURNS trigger LANGUAGE plpgsql %s %s
        AS $body$
        DECLARE
            v pg_catalog.text;
            n pg_catalog.name;
        BEGIN
            IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
                BEGIN
                    %s
                EXCEPTION WHEN undefined_column THEN
                    NULL;
                END;
                RETURN OLD;
            END IF;
            BEGIN
                v := NEW.%I::pg_catalog.text;
            EXCEPTION WHEN undefined_column THEN
                -- Renamed since bloomguard_watch: read it by its number.
                SELECT a.attname INTO n FROM pg_catalog.pg_attribute a
                 WHERE a.attrelid OPERATOR(pg_catalog.=) %s
                   AND a.attnum OPERATOR(pg_catalog.=) %s AND NOT a.attisdropped;
                IF n IS NOT NULL THEN
                    EXECUTE pg_catalog.format('SELECT ($1).%%I::pg_catalog.text', n)
                       INTO v USING NEW;
                END IF;
            END;
            IF v IS NOT NULL THEN
                %s
                %s
            END IF;
            RETURN NEW;
        END
        $body$ $fn$, fn, pins,
        CASE WHEN feed THEN 'SECURITY DEFINER' ELSE '' END,
        CASE WHEN m = 'notify'
             THEN format('v := OLD.%I::pg_catalog.text; IF v IS NOT NULL AND pg_catalog.octet_length(v) OPERATOR(pg_catalog.<) 8000 THEN PERFORM pg_catalog.pg_notify(%L, v); END IF;',
                         col, channel || '_deleted')
             ELSE 'NULL;' END,
        col, tbl::oid, colnum,
        CASE WHEN m = 'notify'
             THEN format('PERFORM pg_catalog.pg_notify(%L, CASE WHEN pg_catalog.octet_length(v) OPERATOR(pg_catalog.<) 8000 THEN v ELSE '''' END);', channel)
             ELSE '' END,
        -- The table's own oid, not TG_RELID: a partition's row fires this too.
        CASE WHEN feed THEN format('INSERT INTO %s (relid, xid, id) VALUES (%s, pg_catalog.pg_current_xact_id(), v);',
                                   logname, tbl::oid)
             ELSE '' END);
    -- On the table and each inheritance child (a partition gets its
    -- parent's); an inheritance child made later has none until this runs
    -- again, and bloomguard is degraded meanwhile.
    FOR r IN SELECT * FROM bloomguard_own_tables(tbl) LOOP
        IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = r AND tgname = 'bloomguard_notify') THEN
            EXECUTE format('DROP TRIGGER bloomguard_notify ON %s', r);
        END IF;
        -- Deletes matter only to NOTIFY (they count towards rebuild_after_deletes).
        EXECUTE format('CREATE TRIGGER bloomguard_notify AFTER INSERT OR UPDATE OF %I%s '
                       'ON %s FOR EACH ROW EXECUTE FUNCTION %I()', col,
                       CASE WHEN m = 'notify' THEN ' OR DELETE' ELSE '' END, r, fn);
        -- Also for sessions with session_replication_role = replica (logical
        -- replication apply, pg_restore --disable-triggers users, some ETL):
        -- an ordinary trigger is skipped there and the row would never be seen.
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER bloomguard_notify', r);
    END LOOP;
    IF NOT feed THEN
        -- A feed this table had is over (its fingerprint no longer matches
        -- anyway); tidy up when this role may.
        IF has_table_privilege('bloomguard_feed_tables', 'DELETE')
           AND has_table_privilege('bloomguard_feed_log', 'DELETE') THEN
            DELETE FROM bloomguard_feed_tables WHERE relid = tbl;
            DELETE FROM bloomguard_feed_log WHERE relid = tbl;
        END IF;
        RETURN m;
    END IF;
    IF keep THEN
        -- The trigger was whole since the last bloomguard_watch and we held
        -- the lock while replacing it: the log stays complete from since.
        UPDATE bloomguard_feed_tables SET triggers = bloomguard_feed_triggers(tbl)
         WHERE relid = tbl;
        RETURN m;
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
    RETURN m;
END
$watch$;

-- Stop watching: the trigger, its feed and the publication entry go.
CREATE OR REPLACE FUNCTION bloomguard_unwatch(tbl regclass, publication name DEFAULT 'bloomguard')
RETURNS void LANGUAGE plpgsql AS $unwatch$
BEGIN
    PERFORM bloomguard_drop_trigger(tbl);
    IF EXISTS (SELECT 1 FROM pg_publication WHERE pubname = publication) THEN
        PERFORM bloomguard_unpublish(tbl, publication);
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

-- bloomguard_feed_mark(): record a mark of this history now (the same row a
-- prune records).  bloomguard calls it before taking a full load's position,
-- so that a restart can prove the database is the history the position was
-- taken in: after a restore from a cold backup (which keeps the cluster's
-- identity and hands out again the transaction ids the position passed),
-- only the marks this history committed are found, and a resume starts from
-- the newest of them at or below the position (docs/feed.md).
DO $install$
BEGIN
    EXECUTE format($fn$
        CREATE OR REPLACE FUNCTION %1$I.bloomguard_feed_mark()
        RETURNS void LANGUAGE sql SECURITY DEFINER
        SET search_path = pg_catalog, %1$I, pg_temp
        AS $body$
            INSERT INTO bloomguard_feed_marks (at, snap_xmin, origin)
            VALUES (clock_timestamp(), pg_snapshot_xmin(pg_current_snapshot()),
                    bloomguard_feed_origin())
        $body$ $fn$, current_schema());
END
$install$;
REVOKE ALL ON FUNCTION bloomguard_feed_mark() FROM PUBLIC;

-- bloomguard_feed_grant(role): what bloomguard's role needs for the feed and
-- nothing more: read the log, its state and marks, and prune.  (Reading the table
-- itself, for COPY, is granted separately: GRANT SELECT (id) ON users TO ...)
CREATE OR REPLACE FUNCTION bloomguard_feed_grant(reader regrole)
RETURNS void LANGUAGE plpgsql AS $grant$
BEGIN
    EXECUTE format('GRANT SELECT ON bloomguard_feed_log, bloomguard_feed_tables, '
                   'bloomguard_feed_state, bloomguard_feed_marks TO %s', reader);
    EXECUTE format('GRANT EXECUTE ON FUNCTION bloomguard_feed_prune(interval) TO %s', reader);
    EXECUTE format('GRANT EXECUTE ON FUNCTION bloomguard_feed_mark() TO %s', reader);
END
$grant$;
