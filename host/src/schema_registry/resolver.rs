//! Before a batch reaches the plugins: every schema id framed in its
//! payloads is held, or known to be unknown. Plain Rust over a `Fetch`,
//! so the rule is tested with fakes; the registry's client is one `Fetch`.

use std::sync::Arc;

use super::cache::{CacheError, RegisteredSchema, Schemas};
use super::events::SchemaFetched;
use crate::telemetry::InternalEvent;

/// What the registry said of an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fetched {
    /// Its schema.
    Found(RegisteredSchema),
    /// "No such schema" (`40403`): the records framed with it are at
    /// fault, not the registry.
    Unknown,
}

/// Why a batch cannot be prepared now: systemic, so it waits.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// No answer: refused, timed out, TLS failed.
    #[error("schema registry {url}: {message}")]
    Unreachable {
        /// The registry (no credentials).
        url: String,
        /// Why.
        message: String,
    },
    /// An answer that is neither a schema nor "no such schema": a wrong
    /// URL (404 without `40403`), credentials refused (401), an overloaded
    /// registry (5xx).
    #[error("schema registry {url} answered {status} for schema id {id}: {body}")]
    Answer {
        /// The registry.
        url: String,
        /// The id asked for.
        id: u32,
        /// The HTTP status.
        status: u16,
        /// The start of its body.
        body: String,
    },
    /// A subject's registration or look-up was refused: not found (with
    /// `register = false`), or incompatible with the subject's versions
    /// (409).
    #[error("schema registry {url}, subject {subject:?}: answered {status}: {body}")]
    Subject {
        /// The registry.
        url: String,
        /// The subject.
        subject: String,
        /// The HTTP status.
        status: u16,
        /// The start of its body.
        body: String,
    },
    /// The state folder would not keep a schema.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// Asks the registry for one schema.
pub(crate) trait Fetch: Send + Sync {
    fn fetch(&self, id: u32) -> Result<Fetched, RegistryError>;
}

/// The schemas of a run and the registry they come from.
pub(crate) struct Resolver {
    schemas: Arc<Schemas>,
    fetch: Box<dyn Fetch>,
    /// The longest wait between two tries while the registry is down.
    pub retry_max: std::time::Duration,
}

impl Resolver {
    pub(crate) fn new(schemas: Arc<Schemas>, fetch: Box<dyn Fetch>) -> Resolver {
        Resolver { schemas, fetch, retry_max: std::time::Duration::from_secs(30) }
    }

    /// Make every id framed in `payloads` answerable by the `schema`
    /// helper. A batch of one topic usually carries one or two ids, so the
    /// scan keeps the last id it checked and looks up only a change; an id
    /// is fetched at most once per run (ids never change meaning). An
    /// error leaves the batch unprepared: the caller waits and asks again,
    /// and nothing is marked unknown that the registry did not call so.
    pub(crate) fn prepare<'a>(&self, payloads: impl IntoIterator<Item = &'a [u8]>) -> Result<(), RegistryError> {
        let mut missing: Vec<u32> = Vec::new();
        let mut last = None;
        let framed_id = |p: &'a [u8]| sluice_guest::registry::framed(p).map(|(id, _)| id);
        for id in payloads.into_iter().filter_map(framed_id) {
            if last == Some(id) {
                continue;
            }
            last = Some(id);
            if !missing.contains(&id) && !self.schemas.has(id) {
                missing.push(id);
            }
        }
        for id in missing {
            match self.fetch.fetch(id)? {
                Fetched::Found(schema) => {
                    SchemaFetched { id, schema_type: schema.schema_type.clone() }.emit();
                    self.schemas.insert(id, schema)?
                }
                Fetched::Unknown => self.schemas.mark_unknown(id),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;

    /// A registry that holds `schemas`, counts its requests, and is down
    /// while `down` is set.
    #[derive(Default)]
    struct Fake {
        schemas: HashMap<u32, RegisteredSchema>,
        asked: Mutex<Vec<u32>>,
        down: std::sync::atomic::AtomicBool,
    }

    impl Fetch for Arc<Fake> {
        fn fetch(&self, id: u32) -> Result<Fetched, RegistryError> {
            self.asked.lock().unwrap().push(id);
            if self.down.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(RegistryError::Unreachable { url: "fake".into(), message: "refused".into() });
            }
            Ok(self.schemas.get(&id).cloned().map_or(Fetched::Unknown, Fetched::Found))
        }
    }

    fn framed(id: u32, body: &[u8]) -> Vec<u8> {
        let mut v = vec![0];
        v.extend_from_slice(&id.to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    fn setup() -> (Arc<Fake>, Arc<Schemas>, Resolver) {
        let mut schemas = HashMap::new();
        schemas.insert(1, RegisteredSchema::new("AVRO", "\"long\""));
        schemas.insert(2, RegisteredSchema::new("AVRO", "\"string\""));
        let fake = Arc::new(Fake { schemas, ..Fake::default() });
        let cache = Arc::new(Schemas::open(None).unwrap());
        let resolver = Resolver::new(cache.clone(), Box::new(fake.clone()));
        (fake, cache, resolver)
    }

    #[test]
    fn each_id_is_fetched_once_per_run_not_per_record() {
        let (fake, cache, r) = setup();
        let batch = [framed(1, b"a"), framed(1, b"b"), framed(2, b"c"), framed(1, b"d"), b"{}".to_vec()];
        r.prepare(batch.iter().map(|p| &p[..])).unwrap();
        r.prepare(batch.iter().map(|p| &p[..])).unwrap();
        assert_eq!(*fake.asked.lock().unwrap(), vec![1, 2]);
        assert!(cache.answer(1).is_ok() && cache.answer(2).is_ok());
    }

    #[test]
    fn an_unknown_id_is_the_records_fault_and_an_outage_is_nobodys() {
        let (fake, cache, r) = setup();
        r.prepare([&framed(9, b"x")[..]]).unwrap();
        assert!(cache.answer(9).unwrap_err().contains("404"));
        fake.down.store(true, std::sync::atomic::Ordering::SeqCst);
        // Down: the batch is not prepared, and id 2 is not called unknown.
        assert!(r.prepare([&framed(2, b"x")[..]]).is_err());
        assert!(cache.answer(2).unwrap_err().contains("not fetched"));
        // Back up: the same batch is prepared.
        fake.down.store(false, std::sync::atomic::Ordering::SeqCst);
        r.prepare([&framed(2, b"x")[..]]).unwrap();
        assert_eq!(cache.answer(2).unwrap().1, "\"string\"");
    }

    #[test]
    fn a_batch_of_held_ids_asks_nothing_while_the_registry_is_down() {
        let (fake, _, r) = setup();
        r.prepare([&framed(1, b"x")[..]]).unwrap();
        fake.down.store(true, std::sync::atomic::Ordering::SeqCst);
        fake.asked.lock().unwrap().clear();
        r.prepare([&framed(1, b"y")[..], &b"plain"[..]]).unwrap();
        assert!(fake.asked.lock().unwrap().is_empty());
    }
}
