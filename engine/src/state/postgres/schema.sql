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

-- A kept pass (`state::keep`): the session's lock shared on the process's keeper connection, which
-- holds many, so it never waits there: not granted (an escalation holds it or waits for it) means
-- the call waits in line on a pooled connection instead. A lock this connection holds already is
-- granted again whatever waits for it, so a waiting escalation is looked for first: a process
-- never keeps a session an escalation waits for. Then the level, as in bulkhead_enter.
CREATE OR REPLACE FUNCTION bulkhead_keep(p_key bigint, p_server text, p_user text, p_session text)
RETURNS TABLE (granted boolean, level smallint, store_id text) LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted
               AND l.mode = 'ExclusiveLock' AND l.objsubid = 1
               AND l.classid::bigint = (p_key >> 32) & 4294967295
               AND l.objid::bigint = p_key & 4294967295
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
       OR NOT pg_try_advisory_lock_shared(p_key) THEN
        RETURN QUERY SELECT false, 0::smallint, NULL::text;
        RETURN;
    END IF;
    RETURN QUERY SELECT
        true,
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

-- The audit line as written (the chain hashes these exact bytes). Rows are written with `line`
-- only (`COPY`, no jsonb parse on the write path); `record` holds the jsonb of rows written
-- before that. Query `bulkhead_audit_records`, which has `record` for every row.
ALTER TABLE bulkhead_audit ADD COLUMN IF NOT EXISTS line text;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns
               WHERE table_schema = current_schema() AND table_name = 'bulkhead_audit'
                 AND column_name = 'record' AND is_nullable = 'NO') THEN
        ALTER TABLE bulkhead_audit ALTER COLUMN record DROP NOT NULL;
    END IF;
END $$;
CREATE OR REPLACE VIEW bulkhead_audit_records AS
    SELECT id, server, at, coalesce(record, line::jsonb) AS record, line FROM bulkhead_audit;

-- The audit log's checkpoints (`src/audit/checkpoint.rs`): one chain that every writer of the
-- store extends, the newest `audit.checkpoints_kept` kept. `bulkhead audit verify` checks the
-- log against them. An insert is the next number, a row never changes, the newest is kept.
CREATE TABLE IF NOT EXISTS bulkhead_audit_checkpoints (
    n    bigint PRIMARY KEY,
    hash text NOT NULL,
    body text NOT NULL,
    sig  text,
    at   timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE FUNCTION bulkhead_checkpoint_next() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.n <> coalesce((SELECT max(n) + 1 FROM bulkhead_audit_checkpoints), NEW.n) THEN
        RAISE EXCEPTION 'an audit checkpoint follows the newest one';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION bulkhead_checkpoint_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.n >= (SELECT max(n) FROM bulkhead_audit_checkpoints) THEN
        RAISE EXCEPTION 'the newest audit checkpoint is never deleted';
    END IF;
    RETURN OLD;
END $$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'bulkhead_audit_checkpoints_next') THEN
        CREATE TRIGGER bulkhead_audit_checkpoints_next BEFORE INSERT ON bulkhead_audit_checkpoints
            FOR EACH ROW EXECUTE FUNCTION bulkhead_checkpoint_next();
        CREATE TRIGGER bulkhead_audit_checkpoints_fixed BEFORE UPDATE ON bulkhead_audit_checkpoints
            FOR EACH STATEMENT EXECUTE FUNCTION bulkhead_refuse();
        CREATE TRIGGER bulkhead_audit_checkpoints_kept BEFORE DELETE ON bulkhead_audit_checkpoints
            FOR EACH ROW EXECUTE FUNCTION bulkhead_checkpoint_kept();
    END IF;
END $$;

-- Approvals already used (`requestState` ids): one row each until it expires, so an answer is
-- consumed once across every instance and replica.
CREATE TABLE IF NOT EXISTS bulkhead_approvals_used (
    scope text NOT NULL,
    id    text NOT NULL,
    exp   bigint NOT NULL,
    PRIMARY KEY (scope, id)
);

-- Rate-limit buckets (GCRA: `tat` is the theoretical arrival time of the next call, in seconds
-- since the epoch of the database's clock, so replicas' clocks never disagree).
CREATE TABLE IF NOT EXISTS bulkhead_rate (
    scope text NOT NULL,
    key   text NOT NULL,
    tat   double precision NOT NULL,
    PRIMARY KEY (scope, key)
);

-- One visit of a process to its buckets `p_keys` (sorted, so concurrent visits lock rows in one
-- order): each bucket's `p_forced` calls (admitted by the process already) are counted
-- unconditionally, then `p_want` more all or none. Returns the wait and the 1-based index of the
-- bucket that refused them (0, 0: admitted), every bucket's arrival time after, and the
-- database's clock. Rows past their `tat` are equivalent to absent ones; about one visit in 1024
-- removes up to 1000 of them.
DROP FUNCTION IF EXISTS bulkhead_rate_take(text, text[], float8[], float8[]);
CREATE OR REPLACE FUNCTION bulkhead_rate_take(
    p_scope text, p_keys text[], p_interval float8[], p_tolerance float8[], p_forced int[], p_want int
) RETURNS TABLE (wait float8, refused int, tats float8[], now_s float8) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_now float8 := extract(epoch FROM clock_timestamp());
    n int := coalesce(array_length(p_keys, 1), 0);
    cur float8;
    t float8;
    after float8[];
    worst float8 := 0;
    worst_i int := 0;
BEGIN
    INSERT INTO bulkhead_rate AS r (scope, key, tat)
        SELECT p_scope, k, 0 FROM unnest(p_keys) AS k ORDER BY k
        ON CONFLICT DO NOTHING;
    PERFORM 1 FROM bulkhead_rate r WHERE r.scope = p_scope AND r.key = ANY (p_keys) ORDER BY r.key FOR UPDATE;
    FOR i IN 1..n LOOP
        SELECT r.tat INTO cur FROM bulkhead_rate r WHERE r.scope = p_scope AND r.key = p_keys[i];
        t := greatest(cur, v_now) + p_forced[i] * p_interval[i];
        IF p_want > 0 AND t - v_now - p_tolerance[i] > 1e-9 AND t - v_now - p_tolerance[i] > worst THEN
            worst := t - v_now - p_tolerance[i];
            worst_i := i;
        END IF;
        after[i] := t;
    END LOOP;
    IF worst_i = 0 THEN
        FOR i IN 1..n LOOP
            after[i] := after[i] + p_want * p_interval[i];
        END LOOP;
    END IF;
    FOR i IN 1..n LOOP
        UPDATE bulkhead_rate r SET tat = after[i] WHERE r.scope = p_scope AND r.key = p_keys[i];
    END LOOP;
    IF random() < 1.0 / 1024 THEN
        DELETE FROM bulkhead_rate WHERE ctid IN (
            SELECT ctid FROM bulkhead_rate x WHERE x.scope = p_scope AND x.tat < v_now LIMIT 1000
            FOR UPDATE SKIP LOCKED);
    END IF;
    RETURN QUERY SELECT worst, worst_i, after, v_now;
END $$;
