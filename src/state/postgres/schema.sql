-- The Bulkhead state schema in PostgreSQL: one database holds the stores of many trust domains.
-- The `server` column of the store tables holds the store's scope: a trust domain (before trust
-- domains, a server's name; `bulkhead state migrate` folds those into their domain).
-- Applied by every instance at start, serialised by an advisory lock; idempotent.
-- Levels: 0 public, 1 internal, 2 confidential, 3 secret.

CREATE TABLE IF NOT EXISTS bulkhead_stores (
    server     text PRIMARY KEY,
    store_id   text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Per-server scopes folded into a trust domain by `bulkhead state migrate`.
CREATE TABLE IF NOT EXISTS bulkhead_migrated (
    scope       text PRIMARY KEY,
    into_scope  text NOT NULL,
    migrated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS bulkhead_sessions (
    server     text NOT NULL,
    "user"     text NOT NULL,
    session    text NOT NULL,
    level      smallint NOT NULL CHECK (level BETWEEN 0 AND 3),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (server, "user", session)
);

CREATE TABLE IF NOT EXISTS bulkhead_datasets (
    server     text NOT NULL,
    "user"     text NOT NULL,
    session    text NOT NULL,
    name       text NOT NULL,
    level      smallint NOT NULL CHECK (level BETWEEN 0 AND 3),
    first_seen timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (server, "user", session, name)
);

CREATE TABLE IF NOT EXISTS bulkhead_audit (
    id     bigserial PRIMARY KEY,
    server text NOT NULL,
    at     timestamptz NOT NULL DEFAULT now(),
    record jsonb NOT NULL
);

-- Levels never lower; records are never deleted; store identities never change; audit rows are
-- append-only, refused per statement (even one that matches no row). Enforced by the database,
-- whatever client writes to it.
CREATE OR REPLACE FUNCTION bulkhead_never_lower() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.level < OLD.level THEN
        RAISE EXCEPTION 'sensitivity never lowers';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION bulkhead_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'bulkhead state is append-only (% on %)', TG_OP, TG_TABLE_NAME;
END $$;

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['bulkhead_sessions', 'bulkhead_datasets'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = t || '_never_lower') THEN
            EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OF level ON %I FOR EACH ROW EXECUTE FUNCTION bulkhead_never_lower()', t || '_never_lower', t);
        END IF;
    END LOOP;
    FOREACH t IN ARRAY ARRAY['bulkhead_sessions', 'bulkhead_datasets', 'bulkhead_stores', 'bulkhead_audit'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = t || '_never_delete') THEN
            EXECUTE format('CREATE TRIGGER %I BEFORE DELETE ON %I FOR EACH STATEMENT EXECUTE FUNCTION bulkhead_refuse()', t || '_never_delete', t);
            EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION bulkhead_refuse()', t || '_never_truncate', t);
        END IF;
    END LOOP;
    FOREACH t IN ARRAY ARRAY['bulkhead_stores', 'bulkhead_audit'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = t || '_never_update') THEN
            EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION bulkhead_refuse()', t || '_never_update', t);
        END IF;
    END LOOP;
END $$;

-- Step 1 and 2 of the protocol: take the session's advisory lock (shared or exclusive), then read
-- the level. VOLATILE, so the read takes a snapshot after the lock is granted and sees every
-- escalation committed under the exclusive lock.
CREATE OR REPLACE FUNCTION bulkhead_enter(p_key bigint, p_server text, p_user text, p_session text, p_exclusive boolean)
RETURNS TABLE (level smallint, store_id text) LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF p_exclusive THEN
        PERFORM pg_advisory_lock(p_key);
    ELSE
        PERFORM pg_advisory_lock_shared(p_key);
    END IF;
    RETURN QUERY SELECT
        coalesce((SELECT s.level FROM bulkhead_sessions s
                  WHERE s.server = p_server AND s."user" = p_user AND s.session = p_session), 0::smallint),
        (SELECT st.store_id FROM bulkhead_stores st WHERE st.server = p_server);
END $$;

-- One atomic escalation: raise the session and the dataset (never lower), return the level after.
CREATE OR REPLACE FUNCTION bulkhead_escalate(p_server text, p_user text, p_session text, p_dataset text, p_level smallint)
RETURNS smallint LANGUAGE plpgsql VOLATILE AS $$
DECLARE after smallint;
BEGIN
    INSERT INTO bulkhead_sessions AS s (server, "user", session, level)
        VALUES (p_server, p_user, p_session, p_level)
        ON CONFLICT (server, "user", session) DO UPDATE SET
            level = greatest(s.level, excluded.level),
            updated_at = CASE WHEN excluded.level > s.level THEN now() ELSE s.updated_at END;
    INSERT INTO bulkhead_datasets AS d (server, "user", session, name, level)
        VALUES (p_server, p_user, p_session, p_dataset, p_level)
        ON CONFLICT (server, "user", session, name) DO UPDATE SET level = greatest(d.level, excluded.level);
    SELECT s.level INTO after FROM bulkhead_sessions s
        WHERE s.server = p_server AND s."user" = p_user AND s.session = p_session;
    RETURN after;
END $$;

-- Exclusive to shared without letting go: take the shared lock, then drop the exclusive one.
CREATE OR REPLACE FUNCTION bulkhead_downgrade(p_key bigint) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_lock_shared(p_key);
    RETURN pg_advisory_unlock(p_key);
END $$;
