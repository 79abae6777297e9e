//! Where records come from: the line framing every line-based source
//! shares, the file source, and the Kafka source.

pub mod config;
pub mod file;
pub mod framing;
pub mod kafka;
