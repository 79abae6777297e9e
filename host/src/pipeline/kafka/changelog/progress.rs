//! Where the changelog's follower stands: held by the `Changelog` (which
//! partitions wait on) and advanced by the follower (`follow`), so that
//! neither file imports the other for it.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};

/// The follower's positions (next offset per changelog partition), for
/// the partitions that wait on it.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    pub(super) state: Mutex<FollowState>,
    pub(super) changed: Condvar,
}

#[derive(Debug, Default)]
pub(super) struct FollowState {
    pub(super) positions: HashMap<i32, i64>,
    /// Why the follower stopped, when it failed.
    pub(super) failed: Option<String>,
    /// The changelog lost ids (accept-duplicates): every partition is
    /// unchecked.
    pub(super) unchecked: bool,
}
