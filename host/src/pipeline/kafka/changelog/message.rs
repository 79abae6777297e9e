//! One changelog message: a batch's accepted ids, not one message per id
//! (a batch of 500 ids is one 12 KB produce, not 500).
//!
//! - key: the source partition's name (`topic/partition`), so that the
//!   partition's next owner reads only its own ids from a changelog
//!   partition that may be shared by several topics' partitions;
//! - value: version byte `1`, the seconds since the epoch at which the ids
//!   were accepted (u64, little-endian: the window's bucket, so that a
//!   restored id expires when its original would have), then each id's
//!   24-byte key as the dedup window stores it (scope, then digest).

use crate::custody::ids::IdDigest;

const VERSION: u8 = 1;
const HEAD: usize = 9;
const ID: usize = std::mem::size_of::<IdDigest>();

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum MessageError {
    #[error("{0} bytes: shorter than the 9-byte head")]
    Short(usize),
    #[error("version {0}: this sluice reads version 1 (a newer sluice wrote it?)")]
    Version(u8),
    #[error("{0} bytes of ids: not a whole number of 24-byte ids")]
    Ragged(usize),
}

pub(crate) fn encode(accepted_secs: u64, ids: &[IdDigest]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD + ids.len() * ID);
    out.push(VERSION);
    out.extend_from_slice(&accepted_secs.to_le_bytes());
    for id in ids {
        out.extend_from_slice(id);
    }
    out
}

/// The time and the ids of a message.
pub(crate) fn decode(value: &[u8]) -> Result<(u64, Vec<IdDigest>), MessageError> {
    if value.len() < HEAD {
        return Err(MessageError::Short(value.len()));
    }
    if value[0] != VERSION {
        return Err(MessageError::Version(value[0]));
    }
    let mut secs = [0u8; 8];
    secs.copy_from_slice(&value[1..HEAD]);
    let body = &value[HEAD..];
    if !body.len().is_multiple_of(ID) {
        return Err(MessageError::Ragged(body.len()));
    }
    let ids = body
        .chunks_exact(ID)
        .map(|c| {
            let mut d = [0u8; ID];
            d.copy_from_slice(c);
            d
        })
        .collect();
    Ok((u64::from_le_bytes(secs), ids))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::custody::ids::{digest, scope};

    #[test]
    fn round_trips_and_refuses_what_it_cannot_read() {
        let ids: Vec<IdDigest> = (0..500).map(|i| digest(&scope("logs/3"), &format!("ev-{i}"))).collect();
        let m = encode(1_795_946_400, &ids);
        assert_eq!(m.len(), 9 + 500 * 24);
        assert_eq!(decode(&m), Ok((1_795_946_400, ids.clone())));
        assert_eq!(decode(&encode(7, &[])), Ok((7, vec![])));
        assert_eq!(decode(&m[..5]), Err(MessageError::Short(5)));
        assert_eq!(decode(&m[..m.len() - 1]), Err(MessageError::Ragged(500 * 24 - 1)));
        let mut newer = m.clone();
        newer[0] = 2;
        assert_eq!(decode(&newer), Err(MessageError::Version(2)));
    }
}
