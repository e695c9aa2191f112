-- The database role for a `postgres` connector whose tools only read (docs/specs.md, "PostgreSQL
-- connector: the read role"). Run it as a superuser in the connector's database, after replacing
-- `bulkhead_read` (and giving the role a password, or your provider's authentication).
--
-- READ ONLY transactions stop writes to tables, not these functions: a notification other
-- sessions receive (pg_notify), a setting that stays on a pooled connection (set_config),
-- advisory locks other sessions wait on, signals to other backends. `bulkhead check` refuses a
-- read operation whose SQL calls them by name; this role cannot call them at all, not even
-- through a function that wraps them. Every role in this database loses them: grant them back
-- to a role that needs them (the Bulkhead state store takes advisory locks, so give its role
-- EXECUTE on pg_advisory_lock* and pg_try_advisory_lock*, or keep it in another database).

DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN
    SELECT p.oid::regprocedure
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'pg_catalog'
       AND (p.proname IN ('pg_notify', 'set_config', 'pg_terminate_backend', 'pg_cancel_backend',
                          'pg_reload_conf', 'pg_rotate_logfile', 'pg_logical_emit_message',
                          'lo_import', 'lo_export')
            OR p.proname LIKE 'pg\_advisory\_%'
            OR p.proname LIKE 'pg\_try\_advisory\_%'
            OR p.proname LIKE 'pg\_stat\_reset%')
  LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END $$;

CREATE ROLE bulkhead_read LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
-- Reads only, even outside a transaction Bulkhead opens.
ALTER ROLE bulkhead_read SET default_transaction_read_only = on;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO bulkhead_read;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO bulkhead_read;
