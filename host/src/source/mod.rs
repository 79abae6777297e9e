//! Where records come from: the line framing every line-based source
//! shares, and the file source.

pub mod file;
pub mod framing;
