-- bloomguard change feed: tell every bloomguard about new IDs as rows commit.
--
-- Install once per database:      psql -f notify.sql
-- Then watch a table and column:  SELECT bloomguard_watch('users', 'id');
--                             or  SELECT bloomguard_watch('app.orders', 'order_no', 'orders_guard');
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
-- Upgrading from an older notify.sql: run this file and bloomguard_watch again
-- for each watched table, so its trigger function gets these settings.
-- <channel> must equal bloomguard's [sync] channel (default 'bloomguard').
-- Notifications are sent when the transaction commits, to every listening
-- bloomguard.  A Bloom filter cannot forget: deletes only count towards
-- [sync] rebuild_after_deletes and take effect at the next rebuild.
--
-- Doing it by hand instead (same effect, for one table):
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

CREATE OR REPLACE FUNCTION bloomguard_watch(tbl regclass, col name,
                                            channel text DEFAULT 'bloomguard')
RETURNS void LANGUAGE plpgsql AS $watch$
DECLARE
    -- One function per table, named after its oid: unique and always a valid name.
    fn text := 'bloomguard_notify_' || tbl::oid;
BEGIN
    IF channel !~ '^[A-Za-z_][A-Za-z0-9_]{0,54}$' THEN
        RAISE EXCEPTION 'bloomguard: channel must match [A-Za-z_][A-Za-z0-9_]* and be at most 55 characters';
    END IF;
    PERFORM 1 FROM pg_attribute
     WHERE attrelid = tbl AND attname = col AND attnum > 0 AND NOT attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'bloomguard: table % has no column %', tbl, col;
    END IF;
    -- The SET clauses pin how an id is rendered as text to what bloomguard's
    -- own sessions use for COPY (src/loader.h, LOADER_SESSION_SETTINGS), so
    -- the inserting session's TimeZone, DateStyle, extra_float_digits or
    -- bytea_output cannot make a notified id differ from the copied one.
    -- (The payload is converted to bloomguard's client_encoding, UTF8, on
    -- delivery, as COPY's output is.)  An id of 8000 bytes or more does not
    -- fit in a notification: an empty payload tells bloomguard that such a
    -- row exists, instead of failing the application's write.
    EXECUTE format($fn$
        CREATE OR REPLACE FUNCTION %I() RETURNS trigger LANGUAGE plpgsql
        SET DateStyle = 'ISO, MDY' SET TimeZone = 'UTC' SET IntervalStyle = 'postgres'
        SET extra_float_digits = 1 SET bytea_output = 'hex'
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
            END IF;
            RETURN NEW;
        END
        $body$ $fn$, fn, col, channel || '_deleted', col, channel);
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = tbl AND tgname = 'bloomguard_notify') THEN
        EXECUTE format('DROP TRIGGER bloomguard_notify ON %s', tbl);
    END IF;
    EXECUTE format('CREATE TRIGGER bloomguard_notify AFTER INSERT OR UPDATE OF %I OR DELETE '
                   'ON %s FOR EACH ROW EXECUTE FUNCTION %I()', col, tbl, fn);
END
$watch$;

CREATE OR REPLACE FUNCTION bloomguard_unwatch(tbl regclass)
RETURNS void LANGUAGE plpgsql AS $unwatch$
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS bloomguard_notify ON %s', tbl);
    EXECUTE format('DROP FUNCTION IF EXISTS %I()', 'bloomguard_notify_' || tbl::oid);
END
$unwatch$;
