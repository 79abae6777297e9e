//! What this binary was built with. The embedded default (files in, files
//! or stdout out) needs no network client; Kafka, the HTTP and ClickHouse
//! sinks and the PostgreSQL sink are cargo features (`host/Cargo.toml`), on
//! in the full build. A config that needs one this binary lacks is refused
//! when it is loaded, naming the key and the feature, rather than failing
//! later inside a run.

/// A part of sluice that is a cargo feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feature {
    /// The Kafka source and sink (librdkafka).
    Kafka,
    /// The HTTP and ClickHouse sinks (an HTTP client).
    Http,
    /// The PostgreSQL sink (its client).
    Postgres,
}

impl Feature {
    pub(crate) const ALL: [Feature; 3] = [Feature::Kafka, Feature::Http, Feature::Postgres];

    /// The cargo feature's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Feature::Kafka => "kafka",
            Feature::Http => "http",
            Feature::Postgres => "postgres",
        }
    }

    /// Whether this binary has it.
    pub(crate) fn built(self) -> bool {
        match self {
            Feature::Kafka => cfg!(feature = "kafka"),
            Feature::Http => cfg!(feature = "http"),
            Feature::Postgres => cfg!(feature = "postgres"),
        }
    }

    /// `None` when built; otherwise why `what` cannot run here, and how to
    /// get a binary that can.
    pub(crate) fn missing(self, what: &str) -> Option<NotBuilt> {
        (!self.built()).then(|| NotBuilt { what: what.to_string(), feature: self.name() })
    }
}

/// The features this binary has, for `sluice --version` and bug reports.
pub(crate) fn built() -> Vec<&'static str> {
    Feature::ALL.into_iter().filter(|f| f.built()).map(Feature::name).collect()
}

/// A config names a source or sink this binary was built without.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} needs the `{feature}` feature, which this sluice was built without (scripts/quickstart builds the \
     embedded default only): build the full binary, `cargo build --release -p sluice-host`, or add \
     `--features {feature}`"
)]
pub struct NotBuilt {
    /// What the config asked for (`source type "kafka"`).
    pub what: String,
    /// The cargo feature that builds it.
    pub feature: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_feature_names_itself_and_the_fix() {
        for f in Feature::ALL {
            match f.missing("sink type \"x\"") {
                None => assert!(f.built()),
                Some(e) => {
                    let said = e.to_string();
                    assert!(said.contains(&format!("`{}`", f.name())) && said.contains("--features"), "{said}");
                }
            }
        }
        assert_eq!(built().len(), Feature::ALL.iter().filter(|f| f.built()).count());
    }
}
