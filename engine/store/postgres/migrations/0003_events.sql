-- events is each session's durable event log (store.StoredEvent): seqs are given by the
-- session's owner and are contiguous per session; readers in any process or node follow it by
-- seq, woken by NOTIFY. An event lives as long as its session (sessions are never removed).
CREATE TABLE events (
	session_id text NOT NULL REFERENCES sessions (id),
	seq        bigint NOT NULL,
	type       text NOT NULL,
	at         timestamptz NOT NULL,
	turn_id    text NOT NULL DEFAULT '',
	body       text NOT NULL DEFAULT '', -- a delta's text
	data       bytea,                    -- the payload's JSON, byte for byte
	generation bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (session_id, seq)
);
