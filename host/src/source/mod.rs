//! Where records come from. For now, the framing every line-based source
//! shares; the file and Kafka sources arrive with the pipeline.

pub mod framing;
