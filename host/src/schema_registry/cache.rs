//! The schemas this pipeline has fetched, by id: in memory for the
//! helper's answers, and one file each in the state folder so that a
//! restart while the registry is down still decodes every id it saw. A
//! registry never changes what an id means (ids are immutable in
//! Confluent's API), so an entry never goes stale and is never fetched
//! twice.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

/// A schema as the registry answered `GET /schemas/ids/{id}`, with the
/// schemas it references fetched too. The state folder's files have this
/// shape; one written before references were read has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredSchema {
    /// `AVRO`, `PROTOBUF` or `JSON`; the API leaves it out for Avro.
    #[serde(rename = "schemaType", default = "avro")]
    pub schema_type: String,
    /// The schema's text: Avro's JSON, a `.proto` file, a JSON Schema.
    pub schema: String,
    /// Every schema its references reach, each before any that needs it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<ReferencedSchema>,
}

/// A schema another references, by the name the referencing one uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferencedSchema {
    /// An Avro type's full name, a Protobuf import's path, a `$ref`.
    pub name: String,
    /// Its text.
    pub schema: String,
}

impl RegisteredSchema {
    /// A schema that references none.
    pub fn new(schema_type: &str, schema: &str) -> RegisteredSchema {
        RegisteredSchema { schema_type: schema_type.into(), schema: schema.into(), references: Vec::new() }
    }
}

/// The type the API leaves out: Avro.
pub(super) fn avro() -> String {
    "AVRO".into()
}

/// Why the cache could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The state folder's schema files.
    #[error("schema cache {path}: {message}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// The schemas of this run, shared by the front that fetches them and
/// every plugin instance that reads them.
#[derive(Debug, Default)]
pub struct Schemas {
    known: RwLock<HashMap<u32, Arc<RegisteredSchema>>>,
    /// Ids the registry answered "no such schema" for, until it has one:
    /// the helper's reason for them says so. Asked again with each batch
    /// that frames them (one request a batch, not a record), so a schema
    /// registered late is found.
    unknown: RwLock<HashSet<u32>>,
    /// `<state>/schemas`; none in tests that keep nothing.
    dir: Option<PathBuf>,
}

impl Schemas {
    /// The schemas kept in `dir` (none while it does not exist). A file that does not
    /// read is an error naming it: a state folder someone edited by hand
    /// is better refused than half-trusted.
    pub fn open(dir: Option<PathBuf>) -> Result<Schemas, CacheError> {
        let mut known = HashMap::new();
        if let Some(dir) = &dir {
            let io =
                |path: &Path, e: std::io::Error| CacheError::Io { path: path.to_path_buf(), message: e.to_string() };
            let entries = match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                // Nothing fetched yet: `insert` makes the folder.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Schemas { dir: Some(dir.clone()), ..Schemas::default() });
                }
                Err(e) => return Err(io(dir, e)),
            };
            for entry in entries {
                let path = entry.map_err(|e| io(dir, e))?.path();
                let Some(id) = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(".json"))
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                let text = std::fs::read(&path).map_err(|e| io(&path, e))?;
                let schema: RegisteredSchema = serde_json::from_slice(&text)
                    .map_err(|e| CacheError::Io { path: path.clone(), message: e.to_string() })?;
                known.insert(id, Arc::new(schema));
            }
        }
        Ok(Schemas { known: RwLock::new(known), unknown: RwLock::default(), dir })
    }

    /// The schemas kept in `<state>/schemas`, one value per folder for the
    /// whole process: the front that fetches and every plugin instance of
    /// every worker (and of a reload) share it, and two pipelines never
    /// share a state folder (`sluice run` refuses it).
    pub fn of_state(state_dir: &Path) -> Result<Arc<Schemas>, CacheError> {
        static OPEN: std::sync::Mutex<Vec<(PathBuf, std::sync::Weak<Schemas>)>> = std::sync::Mutex::new(Vec::new());
        let dir = state_dir.join("schemas");
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|(_, w)| w.strong_count() > 0);
        if let Some(s) = open.iter().find(|(d, _)| *d == dir).and_then(|(_, w)| w.upgrade()) {
            return Ok(s);
        }
        let s = Arc::new(Schemas::open(Some(dir.clone()))?);
        open.push((dir, Arc::downgrade(&s)));
        Ok(s)
    }

    /// Whether `id` is held.
    pub(crate) fn has(&self, id: u32) -> bool {
        self.known.read().unwrap_or_else(|p| p.into_inner()).contains_key(&id)
    }

    /// The schema under `id`, if held.
    pub(crate) fn get(&self, id: u32) -> Option<Arc<RegisteredSchema>> {
        self.known.read().unwrap_or_else(|p| p.into_inner()).get(&id).cloned()
    }

    /// Keep `schema` under `id`: on disk first (written whole, then
    /// renamed into place, so a crash leaves the old state or the new),
    /// then in memory. Public for the benches, which hold schemas with no
    /// registry.
    pub fn insert(&self, id: u32, schema: RegisteredSchema) -> Result<(), CacheError> {
        if let Some(dir) = &self.dir {
            let path = dir.join(format!("{id}.json"));
            let tmp = dir.join(format!("{id}.json.tmp"));
            let io = |e: std::io::Error| CacheError::Io { path: path.clone(), message: e.to_string() };
            let text = serde_json::to_vec(&schema).map_err(|e| io(std::io::Error::other(e)))?;
            std::fs::create_dir_all(dir).map_err(io)?;
            std::fs::write(&tmp, text).map_err(io)?;
            std::fs::rename(&tmp, &path).map_err(io)?;
        }
        self.known.write().unwrap_or_else(|p| p.into_inner()).insert(id, Arc::new(schema));
        self.unknown.write().unwrap_or_else(|p| p.into_inner()).remove(&id);
        Ok(())
    }

    /// The registry has no schema under `id`. Marks accumulate rather
    /// than being replaced per batch: workers prepare their batches at
    /// once, and one's answer must not erase another's.
    pub(crate) fn mark_unknown(&self, id: u32) {
        self.unknown.write().unwrap_or_else(|p| p.into_inner()).insert(id);
    }

    /// The `schema` helper's answer: the type and text, or why not. An id
    /// neither held nor answered 404 was not framed in this batch's
    /// payloads (a second stage asking for an id it made up, say).
    pub(crate) fn answer(&self, id: u32) -> Result<(String, String), String> {
        self.held(id).map(|s| (s.schema_type.clone(), s.schema.clone()))
    }

    /// What the `schema-references` helper answers for `id`.
    pub(crate) fn references(&self, id: u32) -> Result<Vec<(String, String)>, String> {
        self.held(id).map(|s| s.references.iter().map(|r| (r.name.clone(), r.schema.clone())).collect())
    }

    /// The schema under `id`, or the record's reason why there is none.
    fn held(&self, id: u32) -> Result<Arc<RegisteredSchema>, String> {
        if let Some(s) = self.get(id) {
            return Ok(s);
        }
        if self.unknown.read().unwrap_or_else(|p| p.into_inner()).contains(&id) {
            Err(format!("schema id {id} is not in the schema registry (it answered 404, error code 40403)"))
        } else {
            Err(format!(
                "schema id {id} was not fetched: the host fetches the ids framed in a batch's payloads before the \
                 first plugin runs, and this one was not among them"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avro(text: &str) -> RegisteredSchema {
        RegisteredSchema::new("AVRO", text)
    }

    #[test]
    fn what_was_fetched_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("schemas");
        let s = Schemas::open(Some(path.clone())).unwrap();
        s.insert(7, avro("\"long\"")).unwrap();
        s.insert(9, RegisteredSchema::new("PROTOBUF", "syntax = \"proto3\";")).unwrap();
        // With the schema it references, kept in the same file.
        let mut with_reference = avro(r#"{"type":"record","name":"Order","fields":[{"name":"m","type":"Money"}]}"#);
        with_reference
            .references
            .push(ReferencedSchema { name: "Money".into(), schema: "{\"type\":\"fixed\"}".into() });
        s.insert(10, with_reference).unwrap();
        drop(s);
        let again = Schemas::open(Some(path)).unwrap();
        assert_eq!(again.answer(7), Ok(("AVRO".into(), "\"long\"".into())));
        assert_eq!(again.references(7), Ok(Vec::new()));
        assert_eq!(again.references(10), Ok(vec![("Money".into(), "{\"type\":\"fixed\"}".into())]));
        assert_eq!(again.get(9).map(|s| s.schema_type.clone()).as_deref(), Some("PROTOBUF"));
        assert!(!again.has(8));
    }

    #[test]
    fn a_corrupt_file_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("3.json"), b"{not json").unwrap();
        let e = Schemas::open(Some(dir.path().to_path_buf())).unwrap_err().to_string();
        assert!(e.contains("3.json"), "{e}");
    }

    #[test]
    fn the_registry_answer_without_a_type_is_avro() {
        let s: RegisteredSchema = serde_json::from_str(r#"{"schema":"\"string\""}"#).unwrap();
        assert_eq!(s.schema_type, "AVRO");
    }

    #[test]
    fn an_unknown_id_and_an_unfetched_one_say_which() {
        let s = Schemas::open(None).unwrap();
        s.mark_unknown(5);
        assert!(s.answer(5).unwrap_err().contains("404"));
        assert!(s.answer(6).unwrap_err().contains("not fetched"));
        s.insert(5, avro("\"long\"")).unwrap();
        assert!(s.answer(5).is_ok(), "a schema registered late is found");
    }
}
