//! `ts-window`: reject events whose time a backend would refuse.
//!
//! Analytics backends keep a window of time (OpenObserve's ingestion
//! window, a ClickHouse TTL, an index lifecycle) and drop an event outside it
//! while answering "200 OK". This plugin mirrors that window so such an event
//! goes to the quarantine with a reason, where an operator can see it,
//! instead of vanishing at the backend.
//!
//! ```toml
//! max_age = "24h"                  # required: oldest accepted = now - max_age
//! max_future = "5m"                # latest accepted = now + max_future (default 5m)
//! timestamp_field = "ts"           # optional: read the time from the body when
//! timestamp_format = "rfc3339"     #   no earlier stage set the event timestamp
//! ```
//!
//! Without `timestamp_field` its payloads come on demand
//! (`sluice_guest::payloads_on_demand`): it reads the event time an
//! earlier stage set, and no record's bytes cross into it.

use std::time::Duration;

use serde::Deserialize;
use sluice_guest::time::{Format, format_rfc3339};
use sluice_guest::{Outcome, Plugin, Record, duration, export_plugin, json};

/// Rejects events whose time is outside the window a backend keeps, into
/// the quarantine with a reason, instead of the backend dropping them
/// while it answers "200 OK".
#[derive(Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TsWindow {
    /// The oldest time accepted is now minus this (`24h`, `7d`): the
    /// backend's retention or ingestion window.
    #[cfg_attr(feature = "schema", schemars(with = "sluice_guest::schema::DurationText"))]
    #[serde(deserialize_with = "duration::deserialize")]
    max_age: Duration,
    /// The latest time accepted is now plus this: a clock ahead of the
    /// backend's.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "sluice_guest::schema::DurationText", default = "five_minutes_text")
    )]
    #[serde(default = "five_minutes", deserialize_with = "duration::deserialize")]
    max_future: Duration,
    /// Read the time from this field (a dotted path) of a record no earlier
    /// plugin gave one. Unset: the event time an earlier plugin set, and no
    /// record's bytes cross into this plugin.
    #[serde(default)]
    timestamp_field: Option<String>,
    /// How `timestamp_field` is written (default `rfc3339`).
    #[serde(default)]
    timestamp_format: Option<Format>,
}

#[cfg(feature = "schema")]
fn five_minutes_text() -> &'static str {
    "5m"
}

/// The config's JSON Schema, from the type itself (the book's reference).
#[cfg(feature = "schema")]
pub fn config_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(TsWindow)).unwrap_or_default()
}

fn five_minutes() -> Duration {
    Duration::from_secs(300)
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

impl TsWindow {
    fn check(&self, record: &Record, now: i64) -> Outcome {
        let ts = match (record.timestamp, &self.timestamp_field) {
            (Some(ts), _) => ts,
            (None, Some(field)) => match self.read_field(record, field, now) {
                Ok(ts) => ts,
                Err(rejected) => return rejected,
            },
            (None, None) => {
                return Outcome::reject(
                    "missing timestamp: no earlier plugin set one and timestamp_field is not configured",
                );
            }
        };
        let oldest = now.saturating_sub(nanos(self.max_age));
        let latest = now.saturating_add(nanos(self.max_future));
        if ts < oldest {
            return Outcome::reject(format!(
                "timestamp {} is older than max_age {} (oldest accepted {})",
                format_rfc3339(ts),
                duration::display(self.max_age),
                format_rfc3339(oldest)
            ));
        }
        if ts > latest {
            return Outcome::reject(format!(
                "timestamp {} is later than max_future {} (latest accepted {})",
                format_rfc3339(ts),
                duration::display(self.max_future),
                format_rfc3339(latest)
            ));
        }
        // The record goes on unchanged but for its time: kept, so the host
        // neither copies its body back nor checks it again.
        Outcome::Keep { id: None, timestamp: Some(ts) }
    }

    fn read_field(&self, record: &Record, field: &str, now: i64) -> Result<i64, Outcome> {
        // Parses only the field read, as the `json` plugin does; the
        // payload is fetched only here (payloads on demand).
        let payload = record.bytes();
        let object = json::RawObject::parse(&payload).map_err(Outcome::reject)?;
        // `setup` fills in the default whenever a field is configured, so
        // the fallback is never built on the hot path.
        let fallback;
        let format = match &self.timestamp_format {
            Some(f) => f,
            None => {
                fallback = Format::rfc3339();
                &fallback
            }
        };
        // A string is read in place; anything else (an epoch number, or a
        // value the format rejects by its kind) through a `Value`.
        let parsed = match object.get_str(field) {
            Some(text) => format.parse(&text, now),
            None => {
                let value = object
                    .get(field)
                    .ok_or_else(|| Outcome::reject(format!("missing timestamp: field {field:?} is absent")))?;
                format.parse_json(&value, now)
            }
        };
        parsed.map_err(|e| Outcome::reject(format!("unparseable timestamp in field {field:?}: {e}")))
    }
}

impl Plugin for TsWindow {
    fn setup(&mut self) -> Result<(), String> {
        // Without `timestamp_field` it reads only the event time an earlier
        // stage set, never a payload: its batches come without them. With
        // it, a payload may be read per record, and one host call each
        // would cost more than the batch's bytes.
        if self.timestamp_field.is_none() {
            sluice_guest::payloads_on_demand();
        }
        if self.max_age.is_zero() {
            return Err("max_age must be greater than zero".into());
        }
        if self.timestamp_format.is_some() && self.timestamp_field.is_none() {
            return Err("timestamp_format needs timestamp_field".into());
        }
        if self.timestamp_field.is_some() && self.timestamp_format.is_none() {
            self.timestamp_format = Some(Format::rfc3339());
        }
        Ok(())
    }

    fn process(&mut self, record: &Record) -> Outcome {
        self.check(record, sluice_guest::now())
    }

    /// One clock read per batch: the window moves by microseconds within it.
    fn process_batch(&mut self, batch: &[Record]) -> Vec<Outcome> {
        let now = sluice_guest::now();
        batch.iter().map(|r| self.check(r, now)).collect()
    }
}

export_plugin!(TsWindow);

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_guest::configure;

    const NOW: i64 = 1_764_417_600_000_000_000; // 2025-11-29T12:00:00Z
    const HOUR: i64 = 3_600_000_000_000;

    fn check(config: &str, record: Record) -> Outcome {
        configure::<TsWindow>(config).unwrap_or_else(|e| panic!("{e}")).check(&record, NOW)
    }

    fn at(ts: Option<i64>) -> Record<'static> {
        let r = Record::from_line("{}").with_event_id("e1");
        match ts {
            Some(ts) => r.with_timestamp(ts),
            None => r,
        }
    }

    #[test]
    fn accepts_inside_the_window_and_keeps_the_id() {
        let record = at(Some(NOW - 23 * HOUR));
        match check(r#"{"max_age":"24h"}"#, record).resolve(&record) {
            Outcome::Emit(ev) => {
                assert_eq!(ev[0].id.as_deref(), Some("e1"));
                assert_eq!(ev[0].timestamp, Some(NOW - 23 * HOUR));
                assert_eq!(ev[0].body, b"{}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_with_the_bound_and_the_value() {
        let r = check(r#"{"max_age":"24h"}"#, at(Some(NOW - 25 * HOUR)));
        let Outcome::Reject(reason) = r else { panic!("{r:?}") };
        assert_eq!(
            reason,
            "timestamp 2025-11-28T11:00:00Z is older than max_age 1d (oldest accepted 2025-11-28T12:00:00Z)"
        );
        let r = check(r#"{"max_age":"24h","max_future":"1m"}"#, at(Some(NOW + HOUR)));
        let Outcome::Reject(reason) = r else { panic!("{r:?}") };
        assert!(reason.contains("2025-11-29T13:00:00Z") && reason.contains("max_future 1m"), "{reason}");
    }

    #[test]
    fn missing_and_unparseable_timestamps_are_rejected() {
        let r = check(r#"{"max_age":"24h"}"#, at(None));
        assert!(matches!(&r, Outcome::Reject(x) if x.starts_with("missing timestamp")), "{r:?}");
        let cfg = r#"{"max_age":"24h","timestamp_field":"ts"}"#;
        let r = check(cfg, Record::from_line(r#"{"ts":"soon"}"#));
        assert!(matches!(&r, Outcome::Reject(x) if x.contains("unparseable") && x.contains("soon")), "{r:?}");
        let r = check(cfg, Record::from_line(r#"{"x":1}"#));
        assert!(matches!(&r, Outcome::Reject(x) if x.contains("\"ts\" is absent")), "{r:?}");
        let r = check(cfg, Record::from_line(r#"{"ts":"2025-11-29T11:00:00Z"}"#));
        assert!(matches!(r, Outcome::Keep { id: None, timestamp: Some(_) }), "{r:?}");
    }

    #[test]
    fn config_is_validated() {
        assert!(configure::<TsWindow>("{}").err().unwrap_or_default().contains("max_age"));
        assert!(configure::<TsWindow>(r#"{"max_age":"0s"}"#).is_err());
        assert!(configure::<TsWindow>(r#"{"max_age":"1d","timestamp_format":"hdfs"}"#).is_err());
    }
}
