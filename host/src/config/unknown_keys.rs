//! A misspelt key of a source or a sink, named as such. Their configs
//! flatten shared tables (a sink's `retry` and `breaker`, `sink/guard.rs`;
//! the Kafka connection, `source/kafka/connection.rs`), and serde checks a
//! struct with a flattened field for its required keys before its unknown
//! ones: `paht = "out.ndjson"` would read as "missing field `path`",
//! naming neither the key written nor its line. The keys each `type`
//! takes are read from the section's JSON Schema instead, before serde
//! sees the table.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::problem::Problems;
use crate::sink::config::SinkConfig;
use crate::source::config::SourceConfig;

/// Which sections had a key their `type` does not take: serde's own
/// reading of those would only repeat it, less clearly.
pub(super) struct Found {
    pub source: bool,
    pub sinks: bool,
}

/// [`in_sinks`] and the same for `[source]`.
pub(super) fn in_sections(raw: &config::Config, p: &mut Problems) -> Found {
    let source = raw
        .get::<BTreeMap<String, config::Value>>("source")
        .is_ok_and(|table| check(&table, &[], "source", keys_of_source, p));
    Found { source, sinks: in_sinks(raw, p) }
}

/// Every key of `[sink]` and of each `[[sinks]]` table that a sink of its
/// `type` does not take, as a problem keyed `sink` or `sinks[i]` (the
/// message names the key, so the problem is placed at its line). True
/// when there was one: serde's own reading of those tables would only
/// repeat it, less clearly.
fn in_sinks(raw: &config::Config, p: &mut Problems) -> bool {
    let mut found = false;
    if let Ok(table) = raw.get::<BTreeMap<String, config::Value>>("sink") {
        found |= check(&table, &[], "sink", keys_of, p);
    }
    if let Ok(list) = raw.get::<Vec<BTreeMap<String, config::Value>>>("sinks") {
        for (i, table) in list.iter().enumerate() {
            found |= check(table, &["name"], &format!("sinks[{i}]"), keys_of, p);
        }
    }
    found
}

/// The keys a `type` of one section takes.
type KeysOf = fn(&str) -> Option<&'static Vec<String>>;

fn check(table: &BTreeMap<String, config::Value>, extra: &[&str], at: &str, keys: KeysOf, p: &mut Problems) -> bool {
    let Some(kind) = table.get("type").and_then(|t| t.clone().into_string().ok()) else { return false };
    let Some(known) = keys(&kind) else { return false };
    let mut found = false;
    for key in table.keys().filter(|k| !known.contains(k) && !extra.contains(&k.as_str())) {
        let expected: Vec<String> = extra.iter().map(|k| k.to_string()).chain(known.iter().cloned()).collect();
        p.add(
            at,
            format!(
                "unknown field `{key}`, expected one of {}",
                expected.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            ),
        );
        found = true;
    }
    found
}

/// The keys a sink of `type = kind` takes, `type` first, flattened tables
/// included; `None` for a type no sink has (serde names the types then).
fn keys_of(kind: &str) -> Option<&'static Vec<String>> {
    static KEYS: OnceLock<BTreeMap<String, Vec<String>>> = OnceLock::new();
    KEYS.get_or_init(|| by_type(serde_json::to_value(schemars::schema_for!(SinkConfig)).unwrap_or_default())).get(kind)
}

/// [`keys_of`] for `[source]`.
fn keys_of_source(kind: &str) -> Option<&'static Vec<String>> {
    static KEYS: OnceLock<BTreeMap<String, Vec<String>>> = OnceLock::new();
    KEYS.get_or_init(|| by_type(serde_json::to_value(schemars::schema_for!(SourceConfig)).unwrap_or_default()))
        .get(kind)
}

/// Each variant of a section tagged by `type`, and its keys.
fn by_type(schema: serde_json::Value) -> BTreeMap<String, Vec<String>> {
    let variants = schema.get("oneOf").and_then(|v| v.as_array()).cloned().unwrap_or_default();
    variants
        .iter()
        .filter_map(|v| {
            let props = v.get("properties")?.as_object()?;
            let kind = props.get("type")?.get("const")?.as_str()?.to_string();
            let keys =
                std::iter::once("type".to_string()).chain(props.keys().filter(|k| *k != "type").cloned()).collect();
            Some((kind, keys))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sink_type_has_its_keys_and_the_shared_ones() {
        for kind in ["file", "http", "clickhouse", "kafka", "postgres"] {
            let keys = keys_of(kind).unwrap_or_else(|| panic!("{kind}: no keys"));
            for shared in ["type", "retry", "breaker"] {
                assert!(keys.iter().any(|k| k == shared), "{kind} lacks {shared}: {keys:?}");
            }
        }
        assert!(keys_of("http").is_some_and(|k| k.iter().any(|k| k == "batch")));
        assert!(keys_of("file").is_some_and(|k| k.iter().any(|k| k == "path")));
        assert!(keys_of("kafka").is_some_and(|k| k.iter().any(|k| k == "brokers")), "the connection is flattened too");
        assert_eq!(keys_of("stdout").map(Vec::len), Some(1));
        assert!(keys_of("nope").is_none());
        assert!(keys_of_source("kafka").is_some_and(|k| k.iter().any(|k| k == "brokers")), "flattened connection");
        assert!(keys_of_source("file").is_some_and(|k| k.iter().any(|k| k == "paths")));
    }

    #[test]
    fn a_misspelt_source_key_is_named_not_read_as_a_missing_one() {
        let raw = config::Config::builder()
            .add_source(config::File::from_str(
                "[source]\ntype = \"kafka\"\nbrokers = \"b:1\"\ngroup_id = \"g\"\ntopcs = [\"t\"]\n",
                config::FileFormat::Toml,
            ))
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let mut found = Found { source: false, sinks: true };
        let problems = Problems::of(|p| found = in_sections(&raw, p));
        assert!(found.source && !found.sinks);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].key, "source");
        assert!(problems[0].message.starts_with("unknown field `topcs`, expected one of `type`, "), "{problems:?}");
    }

    #[test]
    fn a_misspelt_key_is_named_under_sink_and_under_sinks() {
        let raw = config::Config::builder()
            .add_source(config::File::from_str(
                "[sink]\ntype = \"file\"\npaht = \"x\"\n[[sinks]]\nname = \"a\"\ntype = \"http\"\nurl = \"u\"\nbatchh = 1\n\
                 [[sinks]]\nname = \"b\"\ntype = \"stdout\"\n",
                config::FileFormat::Toml,
            ))
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let mut found = false;
        let problems = Problems::of(|p| found = in_sinks(&raw, p));
        assert!(found);
        let said: Vec<(&str, &str)> = problems.iter().map(|p| (p.key.as_str(), p.message.as_str())).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!(said[0].0, "sink");
        assert!(said[0].1.starts_with("unknown field `paht`, expected one of `type`, "), "{}", said[0].1);
        assert_eq!(said[1].0, "sinks[0]");
        assert!(said[1].1.starts_with("unknown field `batchh`, expected one of `name`, `type`, "), "{}", said[1].1);
    }
}
