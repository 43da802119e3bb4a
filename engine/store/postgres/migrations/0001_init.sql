-- The store's tables. Every name is unqualified: the store sets search_path to its schema.

CREATE TABLE sessions (
	id               text PRIMARY KEY,
	title            text UNIQUE,                 -- NULL when untitled; titles are unique
	source           text NOT NULL DEFAULT '',
	model            text NOT NULL DEFAULT '',
	cwd              text NOT NULL DEFAULT '',
	parent_id        text NOT NULL DEFAULT '',
	parent_kind      text NOT NULL DEFAULT '',
	fork_row_id      bigint NOT NULL DEFAULT 0,
	created_at       timestamptz NOT NULL,
	updated_at       timestamptz NOT NULL,
	ended_at         timestamptz,
	end_reason       text NOT NULL DEFAULT '',
	input_tokens     bigint NOT NULL DEFAULT 0,
	output_tokens    bigint NOT NULL DEFAULT 0,
	cached_tokens    bigint NOT NULL DEFAULT 0,
	reasoning_tokens bigint NOT NULL DEFAULT 0,
	api_calls        bigint NOT NULL DEFAULT 0,
	tool_calls       bigint NOT NULL DEFAULT 0,
	row_count        bigint NOT NULL DEFAULT 0,   -- active rows
	rewinds          bigint NOT NULL DEFAULT 0,
	meta             jsonb,
	principal        text NOT NULL DEFAULT '',
	version          bigint NOT NULL              -- bumped by every write; the CAS token
);
CREATE INDEX sessions_by_update ON sessions (updated_at DESC, id);
CREATE INDEX sessions_by_parent ON sessions (parent_id, updated_at DESC, id) WHERE parent_id <> '';

-- Row ids are store-wide and only grow; a session's rows are written under its session row's
-- lock, so they are ascending within a session in commit order.
CREATE SEQUENCE row_ids;

CREATE TABLE transcript (
	id           bigint PRIMARY KEY,
	session_id   text NOT NULL REFERENCES sessions (id),
	active       boolean NOT NULL,                -- false once archived by a rewind
	turn_id      text NOT NULL DEFAULT '',
	role         text NOT NULL,
	content      bytea NOT NULL,                  -- UTF-8 text, kept byte for byte (NUL included)
	reasoning    bytea NOT NULL,
	tool_calls   json,
	tool_call_id text NOT NULL DEFAULT '',
	tool_name    text NOT NULL DEFAULT '',
	display_kind text NOT NULL DEFAULT '',
	attachments  json,
	time         timestamptz NOT NULL
);
CREATE INDEX transcript_by_session ON transcript (session_id, id);
CREATE INDEX transcript_active ON transcript (session_id, id) WHERE active;

-- One lease row per session that was ever leased. generation only grows (a release clears
-- owner and keeps it), so a fence is never reissued. expires_at is compared with the
-- database's clock, never a node's.
CREATE TABLE leases (
	session_id text PRIMARY KEY REFERENCES sessions (id),
	owner      text NOT NULL,                     -- '' once released
	generation bigint NOT NULL,
	expires_at timestamptz
);

CREATE TABLE kv (
	key   bytea PRIMARY KEY,
	value bytea NOT NULL
);

-- fence refuses, by raising SQLSTATE HR001, a write whose lease generation is not the session's
-- current one. It locks the lease row until the write's transaction ends, so a takeover (an
-- update of that row) waits for the write in flight and every later write of the old holder
-- fails here. The lock is exclusive (FOR NO KEY UPDATE), not a share lock: share lockers that
-- overlap one another never leave a gap for the takeover's update, and a busy old holder would
-- starve it; exclusive lockers queue in order. One session's writes are serialised anyway (they
-- all update its session row). Generation 0 is an unfenced write.
CREATE FUNCTION fence(p_session text, p_generation bigint) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
	cur bigint;
BEGIN
	IF p_generation = 0 THEN
		RETURN;
	END IF;
	SELECT generation INTO cur FROM leases WHERE session_id = p_session FOR NO KEY UPDATE;
	IF cur IS DISTINCT FROM p_generation THEN
		RAISE EXCEPTION USING ERRCODE = 'HR001',
			MESSAGE = format('session %s: write carries generation %s, current is %s',
				p_session, p_generation, coalesce(cur, 0));
	END IF;
END
$$;
