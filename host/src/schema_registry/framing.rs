//! The Confluent wire format's header: a zero byte, then the schema id in
//! four bytes, big-endian. Protobuf adds message indexes after it, which
//! the `protobuf` plugin reads; the host needs only the id.

/// The magic byte that opens a framed payload.
pub(crate) const MAGIC: u8 = 0;

/// The schema id a payload is framed with, if it is framed at all. A
/// payload that is not (a JSON line, an empty record) has none; the plugin
/// rejects it with its own reason.
pub(crate) fn schema_id(payload: &[u8]) -> Option<u32> {
    match payload {
        [MAGIC, a, b, c, d, ..] => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_the_four_bytes_after_a_zero() {
        assert_eq!(schema_id(&[0, 0, 0, 1, 2, 0xff]), Some(258));
        assert_eq!(schema_id(&[0, 0, 0, 0, 7]), Some(7));
        assert_eq!(schema_id(&[0, 0, 0, 7]), None, "too short for an id");
        assert_eq!(schema_id(b"{\"a\":1}"), None, "not framed");
        assert_eq!(schema_id(&[]), None);
    }
}
