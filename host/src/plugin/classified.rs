//! What a classifier plugin is asked (a request's records, a response)
//! and what it says of them: plain data shared by the pool, the instance
//! and the WIT bindings, none of which need the others for it.

/// Bytes per record in the packed request (`wit/classifier.wit`).
pub(crate) const RECORD_BYTES: usize = 32;

/// The request a response answers: what a classifier plugin is asked
/// about, and what a profile that matches by time reads.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// Each record's event id, in the order the body holds them.
    pub ids: &'a [&'a str],
    /// Per record, in the order of `ids`.
    pub timestamps: &'a [Option<i64>],
    /// Per record: `(start, length)` of its bytes in the request body.
    pub spans: &'a [(u32, u32)],
    /// Per record, its bytes as sent, for a reader that matches the
    /// records a backend quotes; empty when none does.
    pub texts: &'a [&'a [u8]],
    /// The body's length before compression.
    pub body_bytes: u64,
    /// This send of these records, from 1 (`wit/classifier.wit`).
    pub attempt: u32,
}

/// The response, as much of it as the config lets the plugin see.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Answered<'a> {
    pub status: u16,
    /// Names in lower case.
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    pub truncated: bool,
}

/// One record's fate, as the plugin said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fate {
    Accepted,
    Duplicate,
    Retry(String),
    Reject(String),
    Systemic(String),
}

/// The plugin's reply, before the host's fixed rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    Each(Vec<Fate>),
    All(Fate),
    Split(String),
    BadRow { row: usize, reason: String },
}
