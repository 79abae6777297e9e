//! Ids claimed by batches in flight, when partitions share a dedup scope
//! (a file pipeline's files; a Kafka topic under `dedup.scope = "topic"`).
//!
//! Two partitions can hold the same id at once: both look it up before
//! either has recorded it, and both would deliver it. So a batch claims its
//! ids (all of them, under one lock) *before* it asks the window, and an id
//! another batch holds a claim on is a duplicate of that batch's copy. A
//! claim ends when its batch's write is durable: by then an accepted id is
//! in the window, where any later look-up finds it.
//!
//! Why a copy may be absorbed before its claimer delivered: the claimer's
//! own copy is in custody. If its delivery is let go (a revoke, a
//! shutdown), its record stays owed and is read and delivered again, so
//! the id is never lost; if the sink refuses it for good, the id's one
//! copy is quarantined.
//!
//! The order makes the race impossible: a claim taken before another
//! batch's claim makes that batch see it; one taken after that batch's
//! write was durable is followed by a look-up that finds the id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::ids::IdDigest;

#[derive(Debug, Default)]
pub(crate) struct Claims {
    held: Mutex<HashMap<IdDigest, u64>>,
    next: AtomicU64,
}

/// One batch's claims, released when dropped (after its write is durable,
/// or when the batch is abandoned).
#[derive(Debug)]
pub(crate) struct Claimed {
    claims: Arc<Claims>,
    token: u64,
    taken: Vec<IdDigest>,
}

impl Claims {
    /// Claim `digests` for one batch. Returns the claims and, per digest,
    /// whether another batch holds it (the batch's copy is a duplicate).
    pub(crate) fn claim(self: &Arc<Self>, digests: &[IdDigest]) -> (Claimed, Vec<bool>) {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let mut elsewhere = vec![false; digests.len()];
        let mut taken = Vec::with_capacity(digests.len());
        {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            for (d, other) in digests.iter().zip(elsewhere.iter_mut()) {
                match held.get(d) {
                    Some(t) if *t != token => *other = true,
                    Some(_) => {}
                    None => {
                        held.insert(*d, token);
                        taken.push(*d);
                    }
                }
            }
        }
        (Claimed { claims: self.clone(), token, taken }, elsewhere)
    }

    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.lock().map(|h| h.len()).unwrap_or(0)
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        if self.taken.is_empty() {
            return;
        }
        let mut held = self.claims.held.lock().unwrap_or_else(|p| p.into_inner());
        for d in &self.taken {
            if held.get(d) == Some(&self.token) {
                held.remove(d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::custody::ids::{PIPELINE_SCOPE, digest};

    #[test]
    fn an_id_held_by_another_batch_is_its_duplicate_until_that_batch_ends() {
        let claims = Arc::new(Claims::default());
        let (a, b, c) = (digest(&PIPELINE_SCOPE, "a"), digest(&PIPELINE_SCOPE, "b"), digest(&PIPELINE_SCOPE, "c"));
        let (first, elsewhere) = claims.claim(&[a, b, a]);
        assert_eq!(elsewhere, [false, false, false], "a repeat inside one batch is the batch's own");
        let (second, elsewhere) = claims.claim(&[b, c]);
        assert_eq!(elsewhere, [true, false]);
        assert_eq!(claims.held(), 3);
        drop(first);
        // b stays unclaimed by the second batch: it never held it.
        assert_eq!(claims.held(), 1);
        let (_third, elsewhere) = claims.claim(&[a, b, c]);
        assert_eq!(elsewhere, [false, false, true]);
        drop(second);
        assert_eq!(claims.held(), 2);
    }

    #[test]
    fn concurrent_batches_never_both_own_an_id() {
        let claims = Arc::new(Claims::default());
        let ids: Vec<IdDigest> = (0..200).map(|i| digest(&PIPELINE_SCOPE, &i.to_string())).collect();
        let owners = Mutex::new(HashMap::<IdDigest, usize>::new());
        let all_claimed = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for t in 0..8 {
                let (claims, ids, owners, all_claimed) = (&claims, &ids, &owners, &all_claimed);
                s.spawn(move || {
                    let (held, elsewhere) = claims.claim(ids);
                    let mut o = owners.lock().unwrap_or_else(|p| p.into_inner());
                    for (d, other) in ids.iter().zip(elsewhere) {
                        if !other {
                            assert!(o.insert(*d, t).is_none(), "two batches own one id");
                        }
                    }
                    drop(o);
                    // Held until every batch has claimed: all overlap.
                    all_claimed.wait();
                    drop(held);
                });
            }
        });
        assert_eq!(owners.lock().map(|o| o.len()).unwrap_or(0), 200);
    }
}
