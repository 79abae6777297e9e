-- The table the postgres example delivers to. The primary key on the event
-- id makes the sink effectively once: the sink inserts with
-- ON CONFLICT (event_id) DO NOTHING, so a record delivered twice (an answer
-- lost after the commit, a crash before its id was recorded) is one row.
--
-- Each event's fields go to the columns of the same name; a field the table
-- lacks is ignored; a column the event lacks takes its DEFAULT (or NULL).
CREATE TABLE IF NOT EXISTS logs
(
    event_id text PRIMARY KEY,          -- the sink's `id_column`
    ts       timestamptz,               -- the sink's `timestamp_column` (RFC 3339)
    service  text,
    level    text DEFAULT 'info',
    msg      text,
    received timestamptz DEFAULT now()  -- not in the events: the default
);

-- The user sluice connects as needs INSERT and SELECT (RETURNING) only:
--   CREATE ROLE sluice LOGIN PASSWORD '…';
--   GRANT INSERT, SELECT ON logs TO sluice;
