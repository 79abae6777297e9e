-- The table the clickhouse example delivers to. ReplacingMergeTree ordered
-- by the event id makes the sink idempotent: a record delivered twice (an
-- answer lost after the insert, a crash before its id was recorded) is
-- one row after merges, and in every `SELECT … FINAL`.
--
-- Works on ClickHouse 18.16 (Debian's package) and later; 18.16 has no
-- DateTime64, so times are whole seconds.
CREATE TABLE IF NOT EXISTS logs
(
    event_id String,                    -- the sink's `id_field`
    ts       DateTime,                  -- the sink's `timestamp_field` (RFC 3339, read with best_effort)
    service  String,
    level    String DEFAULT 'info',     -- an event without `level` gets the default (see the README: 18.16 uses '')
    msg      String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY event_id;

-- Read without duplicates:
--   SELECT count() FROM logs FINAL;
