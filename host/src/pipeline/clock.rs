//! The wall clock as the run stamps what it writes (quarantine entries,
//! audit trails): nanoseconds since the Unix epoch. A file of its own so
//! that the driver and the commands read it without importing the setup.

/// Now, in nanoseconds since the Unix epoch (0 before it, the most an
/// `i64` holds past 2262).
pub(crate) fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
