//! One pass over a JSON object that validates it and notes where its
//! top-level fields are, building nothing.
//!
//! `RawObject::parse` ran serde_json for this, and inside a component that
//! was the largest single cost of a plugin reading two fields of a record
//! (a fifth of the front thread in `benches/ledger`): serde's machinery
//! per value, a UTF-8 pass over the whole payload first, and a `Vec` of
//! fields per record from the guest's malloc. Here strings are skipped
//! eight bytes at a time (JSON logs are mostly string bytes), UTF-8 is
//! checked only where a byte is not ASCII, and the fields live in an array
//! on the stack: the `json` plugin's step costs about 0.83 of what it did
//! (`benches/plugin_ab`, in turns with the serde_json build).
//!
//! The scan is allowed to be stricter than serde_json, never looser: it
//! answers "valid, and here are the fields" or "not sure", and on "not
//! sure" the caller asks serde_json, which then decides and words the
//! error. So a document nested deeper than [`MAX_DEPTH`], or a field name
//! with escapes that does not decode, costs a second parse but is judged
//! exactly as before. A differential test below holds the scan to that.

/// Containers nested deeper than this inside the object are left to
/// serde_json, and then read without recursion ([`object_accepted`]).
pub const MAX_DEPTH: usize = 100;

/// Fields kept on the stack; an object with more spills them to a `Vec`.
const INLINE: usize = 16;

/// One top-level field as written. Plain slices: storing one is a copy,
/// and dropping the array runs no code.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    /// The name between its quotes, as written (names are only compared,
    /// so they are not checked as UTF-8 again).
    pub name: &'a [u8],
    /// The name has escapes: compare it decoded ([`Field::is_named`]).
    pub name_escaped: bool,
    /// The value's text, exactly as written (a string keeps its quotes).
    pub value: &'a [u8],
    /// The value is a string with at least one escape.
    pub escaped: bool,
}

const EMPTY: Field<'static> = Field { name: b"", name_escaped: false, value: b"", escaped: false };

impl Field<'_> {
    /// Whether this field's name is `name`; a name with escapes is decoded
    /// for the comparison (rare: the scan keeps no decoded copy).
    pub fn is_named(&self, name: &str) -> bool {
        if self.name_escaped {
            decode_name(self.name).is_some_and(|decoded| decoded == name)
        } else {
            crate::bytes::same(self.name, name.as_bytes())
        }
    }
}

/// A name with escapes, decoded by serde_json (which refuses a lone
/// surrogate, as it did when it read every name).
fn decode_name(inner: &[u8]) -> Option<String> {
    let mut quoted = Vec::with_capacity(inner.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(inner);
    quoted.push(b'"');
    serde_json::from_slice::<String>(&quoted).ok()
}

/// The fields of an object in document order: the first [`INLINE`] on the
/// stack, all of them in `spill` once there are more.
pub struct Fields<'a> {
    inline: [Field<'a>; INLINE],
    len: usize,
    spill: Vec<Field<'a>>,
}

impl Default for Fields<'_> {
    fn default() -> Self {
        Fields::new()
    }
}

impl<'a> Fields<'a> {
    fn new() -> Fields<'a> {
        Fields { inline: [EMPTY; INLINE], len: 0, spill: Vec::new() }
    }

    fn push(&mut self, field: Field<'a>) {
        if self.len < INLINE {
            self.inline[self.len] = field;
        } else {
            if self.spill.is_empty() {
                self.spill.reserve(INLINE * 2);
                self.spill.extend_from_slice(&self.inline);
            }
            self.spill.push(field);
        }
        self.len += 1;
    }

    /// Empty again, the spill's allocation kept: one list serves a batch.
    fn clear(&mut self) {
        self.len = 0;
        self.spill.clear();
    }

    pub fn as_slice(&self) -> &[Field<'a>] {
        if self.len <= INLINE { &self.inline[..self.len] } else { &self.spill }
    }
}

/// The fields of `s` when it is certainly one valid JSON object (with
/// surrounding whitespace), or none when serde_json must decide. Inlined
/// so that the fields are built where the caller keeps them: a move of
/// this size is a `memory.copy`, which the engine runs as a call out.
#[inline(always)]
pub fn object(s: &[u8]) -> Option<Fields<'_>> {
    object_within(s, MAX_DEPTH)
}

/// The fields of an object serde_json has accepted, whatever its nesting
/// (serde_json has no limit inside a value it does not decode): containers
/// are skipped by counting brackets, without recursion.
pub fn object_accepted(s: &[u8]) -> Option<Fields<'_>> {
    object_within(s, ACCEPTED)
}

/// The depth that means "serde_json accepted this document".
const ACCEPTED: usize = usize::MAX;

#[inline(always)]
fn object_within(s: &[u8], depth: usize) -> Option<Fields<'_>> {
    let mut fields = Fields::new();
    object_into(s, depth, &mut fields).then_some(fields)
}

/// [`object`] into a list the caller keeps: parsing a batch's payloads
/// one after another moves no list and clears only what was used.
pub fn object_reusing<'a>(s: &'a [u8], fields: &mut Fields<'a>) -> bool {
    object_into(s, MAX_DEPTH, fields)
}

#[inline(always)]
fn object_into<'a>(s: &'a [u8], depth: usize, fields: &mut Fields<'a>) -> bool {
    fields.clear();
    let mut i = ws(s, 0);
    if s.get(i) != Some(&b'{') {
        return false;
    }
    match members(s, i + 1, depth, &mut |f| fields.push(f)) {
        Some(end) => {
            i = end;
            ws(s, i) == s.len()
        }
        None => false,
    }
}

fn ws(s: &[u8], mut i: usize) -> usize {
    while matches!(s.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The members of an object whose `{` is just before `i`, each handed to
/// `each`; the index after its `}`.
fn members<'a>(s: &'a [u8], i: usize, depth: usize, each: &mut impl FnMut(Field<'a>)) -> Option<usize> {
    let mut i = ws(s, i);
    if s.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        if s.get(i) != Some(&b'"') {
            return None;
        }
        let (end, name_escaped) = string(s, i + 1)?;
        let name = &s[i + 1..end];
        if name_escaped {
            decode_name(name)?;
        }
        i = ws(s, end + 1);
        if s.get(i) != Some(&b':') {
            return None;
        }
        let start = ws(s, i + 1);
        let (next, escaped) = value(s, start, depth)?;
        each(Field { name, name_escaped, value: &s[start..next], escaped });
        i = ws(s, next);
        match s.get(i) {
            Some(b',') => i = ws(s, i + 1),
            Some(b'}') => return Some(i + 1),
            _ => return None,
        }
    }
}

/// One value starting at `i`: the index after it, and whether it is a
/// string with escapes.
fn value(s: &[u8], i: usize, depth: usize) -> Option<(usize, bool)> {
    match *s.get(i)? {
        b'"' => string(s, i + 1).map(|(end, escaped)| (end + 1, escaped)),
        b'{' | b'[' if depth == ACCEPTED => past_brackets(s, i).map(|end| (end, false)),
        b'{' => members(s, i + 1, depth.checked_sub(1)?, &mut |_| {}).map(|end| (end, false)),
        b'[' => elements(s, i + 1, depth.checked_sub(1)?).map(|end| (end, false)),
        b't' => literal(s, i, b"true"),
        b'f' => literal(s, i, b"false"),
        b'n' => literal(s, i, b"null"),
        b'-' | b'0'..=b'9' => number(s, i).map(|end| (end, false)),
        _ => None,
    }
}

/// The end of a container already validated: brackets counted, strings
/// skipped (a bracket inside one does not count).
fn past_brackets(s: &[u8], mut i: usize) -> Option<usize> {
    let mut open = 0usize;
    loop {
        match *s.get(i)? {
            b'"' => i = string(s, i + 1)?.0 + 1,
            b'{' | b'[' => {
                open += 1;
                i += 1;
            }
            b'}' | b']' => {
                open = open.checked_sub(1)?;
                i += 1;
                if open == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
}

fn elements(s: &[u8], i: usize, depth: usize) -> Option<usize> {
    let mut i = ws(s, i);
    if s.get(i) == Some(&b']') {
        return Some(i + 1);
    }
    loop {
        let (next, _) = value(s, i, depth)?;
        i = ws(s, next);
        match s.get(i) {
            Some(b',') => i = ws(s, i + 1),
            Some(b']') => return Some(i + 1),
            _ => return None,
        }
    }
}

fn literal(s: &[u8], i: usize, word: &[u8]) -> Option<(usize, bool)> {
    (s.get(i..i + word.len())? == word).then_some((i + word.len(), false))
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; what follows is the
/// caller's to judge (`01` ends at the `1`, which no caller accepts).
fn number(s: &[u8], mut i: usize) -> Option<usize> {
    let digits = |mut i: usize| {
        while s.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    if s.get(i) == Some(&b'-') {
        i += 1;
    }
    i = match *s.get(i)? {
        b'0' => i + 1,
        b'1'..=b'9' => digits(i + 1),
        _ => return None,
    };
    if s.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(s.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let end = digits(i);
        if end == i {
            return None;
        }
        i = end;
    }
    Some(i)
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Non-zero when any byte of `w` is `"`, `\`, a control character or not
/// ASCII: the bytes a string scan must look at one by one.
fn special(w: u64) -> u64 {
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    zero(w ^ (ONES * u64::from(b'"')))
        | zero(w ^ (ONES * u64::from(b'\\')))
        | (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
        | (w & HIGH)
}

/// The rest of a string whose opening quote is just before `i`: the index
/// of its closing quote, and whether it has escapes. Eight bytes at a time
/// while there are eight left: the lowest flagged byte of a word is
/// exactly the first special one (the subtractions only borrow upwards),
/// so the scan jumps to it rather than stepping there byte by byte.
fn string(s: &[u8], mut i: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    loop {
        if let Some(word) = s.get(i..i + 8) {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            let flagged = special(u64::from_le_bytes(bytes));
            if flagged == 0 {
                i += 8;
                continue;
            }
            i += (flagged.trailing_zeros() / 8) as usize;
        }
        match *s.get(i)? {
            b'"' => return Some((i, escaped)),
            b'\\' => {
                escaped = true;
                i = escape(s, i + 1)?;
            }
            0..=0x1f => return None,
            0x80.. => i = utf8_char(s, i)?,
            _ => i += 1,
        }
    }
}

/// An escape whose backslash is just before `i`; `\u` needs four hex
/// digits (a lone surrogate in a value is accepted, as serde_json accepts
/// it in a value it does not decode).
fn escape(s: &[u8], i: usize) -> Option<usize> {
    match *s.get(i)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(i + 1),
        b'u' => s.get(i + 1..i + 5)?.iter().all(u8::is_ascii_hexdigit).then_some(i + 5),
        _ => None,
    }
}

/// One UTF-8 character whose lead byte is at `i` (not ASCII).
fn utf8_char(s: &[u8], i: usize) -> Option<usize> {
    let width = match s[i] {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return None,
    };
    std::str::from_utf8(s.get(i..i + width)?).ok()?;
    Some(i + width)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the serde_json path makes of `s`: its fields in order (names
    /// decoded), or none.
    fn serde_fields(s: &[u8]) -> Option<Vec<(String, String)>> {
        let fields = super::super::serde_fields(std::str::from_utf8(s).ok()?).ok()?;
        Some(fields.iter().map(|(name, value)| (name.to_string(), value.get().to_string())).collect())
    }

    fn lossy(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    fn read(fields: Fields<'_>) -> Vec<(String, String)> {
        let name = |f: &Field<'_>| if f.name_escaped { decode_name(f.name).unwrap_or_default() } else { lossy(f.name) };
        fields.as_slice().iter().map(|f| (name(f), lossy(f.value))).collect()
    }

    fn scan_fields(s: &[u8]) -> Option<Vec<(String, String)>> {
        object(s).map(read)
    }

    /// The scan never accepts what serde_json refuses, and where both
    /// accept they read the same fields; `must` says the scan accepts too.
    fn agrees(s: &[u8], must: bool) {
        let scanned = scan_fields(s);
        let serde = serde_fields(s);
        if let Some(fields) = &scanned {
            assert_eq!(Some(fields), serde.as_ref(), "{:?}", String::from_utf8_lossy(s));
        }
        if must {
            assert!(scanned.is_some(), "the scan should accept {:?}", String::from_utf8_lossy(s));
        }
        // Without its depth limit the scan accepts all serde_json accepts:
        // the slow path relies on it to read the fields of what it judged.
        if serde.is_some() {
            assert_eq!(object_accepted(s).map(read), serde, "{:?}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn valid_objects_are_read_field_by_field() {
        for doc in [
            r#"{}"#,
            " \t{ }\r\n",
            r#"{"a":1,"b":"two","c":[1,{"d":null}],"e":{"f":[true,false]},"g":-0.5e+10}"#,
            r#"{"a" : "x\"y\\z\/\b\f\n\r\t\u00e9\uD83D\uDE00", "a":2}"#,
            r#"{"héllo":"wörld ☃ 𝄞","n":0,"m":-0,"k":1E9,"j":12.25}"#,
            r#"{"long":"0123456789abcdef0123456789abcdef0123456789","x":""}"#,
            r#"{"\u0062":"escaped name"}"#,
            r#"{"lone":"\ud800 in a value"}"#,
        ] {
            agrees(doc.as_bytes(), true);
        }
        let many: String = format!("{{{}}}", (0..40).map(|i| format!("\"f{i}\":{i}")).collect::<Vec<_>>().join(","));
        agrees(many.as_bytes(), true);
        assert_eq!(object(many.as_bytes()).map(|f| f.as_slice().len()), Some(40));
    }

    #[test]
    fn invalid_or_doubtful_documents_are_left_to_serde() {
        for doc in [
            &b""[..],
            b"[1]",
            b"\"s\"",
            b"{",
            b"{\"a\"}",
            b"{\"a\":}",
            b"{\"a\":1,}",
            b"{\"a\":01}",
            b"{\"a\":1.}",
            b"{\"a\":1e}",
            b"{\"a\":-}",
            b"{\"a\":tru}",
            b"{\"a\":\"\x01\"}",
            b"{\"a\":\"\\x\"}",
            b"{\"a\":\"\\u12g4\"}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\":\"\xed\xa0\x80\"}",
            b"{\"a\":\"\xc0\xaf\"}",
            b"{\"\\ud800\":1}",
            b"{\"a\":1}{}",
            b"{\"a\":1} x",
            b"{'a':1}",
            b"{\"a\":[1 2]}",
        ] {
            agrees(doc, false);
            assert!(object(doc).is_none(), "{:?}", String::from_utf8_lossy(doc));
        }
        let nested = |n: usize| format!("{{\"a\":{}1{}}}", "[".repeat(n), "]".repeat(n));
        assert!(object(nested(MAX_DEPTH + 1).as_bytes()).is_none(), "past MAX_DEPTH serde decides");
        agrees(nested(MAX_DEPTH + 1).as_bytes(), false);
        agrees(nested(MAX_DEPTH).as_bytes(), true);
    }

    #[test]
    fn the_word_test_finds_every_special_byte_at_every_position() {
        for at in 0..8 {
            for b in [b'"', b'\\', 0x00, 0x1f, 0x80, 0xff] {
                let mut w = [b'a'; 8];
                w[at] = b;
                let flagged = special(u64::from_le_bytes(w));
                assert_eq!(flagged.trailing_zeros() / 8, at as u32, "byte {b:#x} at {at}");
                // Special bytes after the first do not move it.
                for later in at + 1..8 {
                    let mut v = w;
                    v[later] = 0x00;
                    assert_eq!(special(u64::from_le_bytes(v)).trailing_zeros() / 8, at as u32, "{b:#x} at {at}");
                }
            }
        }
        assert_eq!(special(u64::from_le_bytes(*b" ~!#[]az")), 0);
    }

    /// Every single-byte change and cut of a few valid documents, scanned
    /// and parsed by serde_json: the scan never accepts more.
    #[test]
    fn mutations_never_make_the_scan_looser_than_serde() {
        let docs: [&[u8]; 3] = [
            br#"{"event_id":"ev-1","ts":"2024-05-01T12:00:00Z","n":-1.5e3,"o":{"a":[1,true,null]}}"#,
            "{\"k\":\"caf\u{e9} \\u00e9\\n\",\"e\":[]}".as_bytes(),
            b"{ \"a\" : [ { } , [ ] , \"x\\\"y\" ] }",
        ];
        let alphabet = b"{}[]\":,\\0-1.eE+tfnu \x01\x7f\x80\xc3\xa9\xff";
        for doc in docs {
            agrees(doc, true);
            for at in 0..doc.len() {
                for &b in alphabet {
                    let mut m = doc.to_vec();
                    m[at] = b;
                    agrees(&m, false);
                    m.insert(at, b);
                    agrees(&m, false);
                }
                agrees(&doc[..at], false);
                let mut cut = doc.to_vec();
                cut.remove(at);
                agrees(&cut, false);
            }
        }
    }
}
