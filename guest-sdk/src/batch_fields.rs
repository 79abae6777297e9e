//! Work done once per batch, natively, in the host: the fields of every
//! record's JSON object at once (`json-get-batch`), and payloads left
//! where the host holds them (`payloads-on-demand`). A plugin that reads
//! two fields of each record this way takes in none of its payloads' bytes
//! and parses each once: `plugins/json` does.
//!
//! Built natively (a plugin's own unit tests) or for contract 0.1, the
//! same answers come from the same code, run here.

use crate::Record;

/// Ask, in `setup`, for this instance's payloads on demand: the host then
/// leaves them out of its batches, `record.payload` is empty, and
/// [`Record::bytes`] fetches a record's payload when the plugin needs it.
/// For a plugin that reads few payloads or none. Natively, and for
/// contract 0.1, payloads are there as ever and this does nothing.
pub fn payloads_on_demand() {
    #[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
    crate::__contract::payloads_on_demand();
}

impl<'a> Record<'a> {
    /// The payload: `payload` itself, or, when the plugin asked for
    /// payloads on demand ([`payloads_on_demand`]), fetched from the host
    /// (a copy, per call: ask once per record).
    pub fn bytes(&self) -> std::borrow::Cow<'a, [u8]> {
        #[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
        if let Some(index) = self.on_demand {
            return std::borrow::Cow::Owned(crate::__contract::fetch_payload(index));
        }
        std::borrow::Cow::Borrowed(self.payload)
    }
}

/// A slice that says "nothing there" in a [`JsonFields`] table.
pub const ABSENT: u32 = u32::MAX;

/// The answer of [`json_get_batch`], packed as `wit/plugin.wit` lays it
/// out (`json-get-batch`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct JsonFields {
    pub table: Vec<u8>,
    pub data: Vec<u8>,
    /// Paths asked, per record.
    pub paths: usize,
}

impl JsonFields {
    fn slice(&self, record: usize, slot: usize) -> Option<(u32, u32)> {
        let at = (record * (1 + self.paths) + slot) * 8;
        let d = self.table.get(at..at + 8)?;
        let word = |i: usize| u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
        Some((word(0), word(4)))
    }

    fn text(&self, (offset, len): (u32, u32)) -> &[u8] {
        self.data.get(offset as usize..offset as usize + len as usize).unwrap_or_default()
    }

    /// Whether record `record`'s payload is one JSON object: `Ok(k)` when
    /// it is once its last `k` bytes (line ends) are trimmed, else the
    /// reason it is not.
    pub fn object(&self, record: usize) -> Result<usize, &str> {
        match self.slice(record, 0) {
            Some((0, 0)) => Ok(0),
            Some((ABSENT, trimmed)) => Ok(trimmed as usize),
            Some(reason) => Err(std::str::from_utf8(self.text(reason)).unwrap_or("payload is not one JSON object")),
            None => Err("no answer for this record"),
        }
    }

    /// The JSON text of the value at path `path` (by its place in the
    /// paths asked) in record `record`, as written (a string with its
    /// quotes); none where the object has nothing there.
    pub fn value(&self, record: usize, path: usize) -> Option<&[u8]> {
        match self.slice(record, 1 + path)? {
            (ABSENT, _) => None,
            s => Some(self.text(s)),
        }
    }
}

/// `paths` (dotted, as `json::RawObject::get_raw` reads them) of every
/// record of `batch`, with each payload's verdict, in one pass per record:
/// in wasm the host reads the payloads where it holds them (the plugin
/// need not have them, [`payloads_on_demand`]). The error names a path
/// over the limits (64 paths of 32 segments), or the plugin's memory
/// limit: then ask record by record.
pub fn json_get_batch(batch: &[Record<'_>], paths: &[&str]) -> Result<JsonFields, String> {
    #[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
    {
        let _ = batch;
        let (table, data) = crate::__contract::json_get_batch(paths)?;
        Ok(JsonFields { table, data, paths: paths.len() })
    }
    #[cfg(not(all(target_arch = "wasm32", not(feature = "contract-0-1"))))]
    {
        let (fields, _) = pack_json_fields(batch.iter().map(|r| r.payload), paths, usize::MAX)?;
        Ok(fields)
    }
}

/// Paths in one call, and segments in one path.
pub const MAX_PATHS: usize = 64;
pub const MAX_SEGMENTS: usize = 32;

/// Paths within the caps.
pub fn check_paths<S: AsRef<str>>(paths: &[S]) -> Result<(), String> {
    if paths.len() > MAX_PATHS {
        return Err(format!("{} paths, over the limit of {MAX_PATHS} per call", paths.len()));
    }
    if let Some((i, p)) = paths.iter().map(AsRef::as_ref).enumerate().find(|(_, p)| p.split('.').count() > MAX_SEGMENTS)
    {
        return Err(format!(
            "path {i} has {} segments, over the limit of {MAX_SEGMENTS} (it starts {:?})",
            p.split('.').count(),
            p.chars().take(40).collect::<String>()
        ));
    }
    Ok(())
}

/// The one implementation of `json-get-batch`, the host's and the native
/// one: each payload (its line ends trimmed) judged by
/// `json::RawObject::parse` (the scan the `json` plugin ran per record,
/// so a record is judged and its reason worded as before), and only the
/// named fields read. Also says, per record, whether the payload is one
/// JSON object (what the host's output contract need not check again).
/// Stops past `limit` bytes of answer, with an error naming it.
pub fn pack_json_fields<'p, S: AsRef<str>>(
    payloads: impl ExactSizeIterator<Item = &'p [u8]>,
    paths: &[S],
    limit: usize,
) -> Result<(JsonFields, Vec<bool>), String> {
    check_paths(paths)?;
    let n = payloads.len();
    // Room for a short value per path: the answer seldom grows in place.
    let mut out = JsonFields {
        table: Vec::with_capacity(n * (1 + paths.len()) * 8),
        data: Vec::with_capacity(n * paths.len() * 32),
        paths: paths.len(),
    };
    let mut objects = Vec::with_capacity(n);
    let put = |table: &mut Vec<u8>, offset: u32, len: u32| {
        table.extend_from_slice(&offset.to_le_bytes());
        table.extend_from_slice(&len.to_le_bytes());
    };
    let mut object = crate::json::RawObject::empty();
    for (i, payload) in payloads.enumerate() {
        let body = trim_line_end(payload);
        match object.reparse(body) {
            Ok(()) => {
                objects.push(true);
                match payload.len() - body.len() {
                    0 => put(&mut out.table, 0, 0),
                    trimmed => put(&mut out.table, ABSENT, trimmed as u32),
                }
                for path in paths {
                    match object.get_raw(path.as_ref()) {
                        Some(value) => {
                            let at = out.data.len() as u32;
                            out.data.extend_from_slice(&value);
                            put(&mut out.table, at, value.len() as u32);
                        }
                        None => put(&mut out.table, ABSENT, 0),
                    }
                }
            }
            Err(reason) => {
                objects.push(false);
                let at = out.data.len() as u32;
                out.data.extend_from_slice(reason.as_bytes());
                put(&mut out.table, at, reason.len() as u32);
                for _ in paths {
                    put(&mut out.table, ABSENT, 0);
                }
            }
        }
        if out.table.len() + out.data.len() > limit {
            return Err(format!(
                "the fields of this batch's {n} records pass {limit} bytes, the plugin's memory limit, at record \
                 {i}: ask record by record (json-get)"
            ));
        }
    }
    Ok((out, objects))
}

/// A line's bytes without the line ends a file or a producer left on it.
pub fn trim_line_end(b: &[u8]) -> &[u8] {
    let mut end = b.len();
    while end > 0 && matches!(b[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    &b[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_record_gets_its_verdict_and_its_fields_as_written() {
        let batch = [
            Record::from_line(r#"{"id":"a\"1","ts":"2024-05-01T12:00:00Z","n":{"k":7}}"#),
            Record::from_line("{\"id\":2}\r\n"),
            Record::from_line("[1]"),
            Record::from_line("{\"id\":"),
        ];
        let f = json_get_batch(&batch, &["id", "n.k", "ts"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.object(0), Ok(0));
        assert_eq!(f.value(0, 0), Some(br#""a\"1""#.as_slice()), "a string as written, quotes and escapes");
        assert_eq!(f.value(0, 1), Some(b"7".as_slice()), "a nested value");
        assert_eq!(f.value(0, 2), Some(br#""2024-05-01T12:00:00Z""#.as_slice()));
        assert_eq!(f.object(1), Ok(2), "an object once its CRLF is trimmed");
        assert_eq!((f.value(1, 0), f.value(1, 1)), (Some(b"2".as_slice()), None));
        assert!(f.object(2).is_err_and(|r| r.contains("not an object")), "{:?}", f.object(2));
        assert!(f.object(3).is_err_and(|r| r.contains("not valid JSON")), "{:?}", f.object(3));
        assert_eq!(f.value(3, 0), None);
        let (_, objects) = pack_json_fields(batch.iter().map(|r| r.payload), &["id"], usize::MAX).unwrap_or_default();
        assert_eq!(objects, [true, true, false, false]);
    }

    #[test]
    fn paths_and_answers_over_the_limits_are_refused_by_name() {
        let many: Vec<String> = (0..65).map(|i| format!("f{i}")).collect();
        let e = pack_json_fields([b"{}".as_slice()].into_iter(), &many, usize::MAX).unwrap_err();
        assert!(e.contains("65 paths"), "{e}");
        let deep = ["a.".repeat(40)];
        assert!(pack_json_fields([b"{}".as_slice()].into_iter(), &deep, usize::MAX).unwrap_err().contains("segments"));
        let e = pack_json_fields([br#"{"a":"xxxxxxxx"}"#.as_slice()].into_iter(), &["a"], 8).unwrap_err();
        assert!(e.contains("8 bytes") && e.contains("record 0"), "{e}");
    }
}
