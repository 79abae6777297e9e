//! What can stop a run.

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Plugin(#[from] crate::plugin::error::PluginError),
    /// A plugin of the config that cannot start, named by its key.
    #[error("{key} ({name}): {error}{hint}")]
    PluginAt { key: String, name: String, hint: String, error: Box<crate::plugin::error::PluginError> },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The schemas kept in the state folder.
    #[error(transparent)]
    Schemas(#[from] crate::schema_registry::cache::CacheError),
    #[error(transparent)]
    Source(#[from] crate::source::file::SourceError),
    #[error(transparent)]
    Sink(#[from] crate::sink::SinkError),
    #[error("offset tracking: {0}")]
    Offsets(#[from] crate::custody::offsets::OffsetError),
    #[error("metrics endpoint: {0}")]
    Metrics(String),
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Route(#[from] crate::route::error::RouteError),
    #[error(transparent)]
    Masking(#[from] crate::masking::MaskingError),
    #[error("source paths {0:?} match no file")]
    NoFiles(Vec<String>),
    #[error(transparent)]
    Kafka(Box<crate::source::kafka::KafkaSourceError>),
    /// The dedup changelog (`kafka::changelog`, which converts its own
    /// error into this: the run's error does not import the changelog).
    #[cfg(feature = "kafka")]
    #[error(transparent)]
    Changelog(Box<dyn std::error::Error + Send + Sync>),
    /// A source this binary was built without (`crate::features`).
    #[error(transparent)]
    NotBuilt(#[from] crate::features::NotBuilt),
    /// A pinned plugin whose file is another.
    #[error(
        "{key} ({name}): {path} has digest {found}, but {key}.digest pins {pinned}: the file is not the plugin this \
         config was written for. Put the pinned build back, or pin the new one (`sluice plugin inspect` prints the line)"
    )]
    DigestMismatch { key: String, name: String, path: String, pinned: String, found: String },
    #[error("the task of partition {0} panicked (see the log); its unfinished records are read again next time")]
    Panicked(String),
}

impl From<crate::source::kafka::KafkaSourceError> for PipelineError {
    fn from(e: crate::source::kafka::KafkaSourceError) -> Self {
        PipelineError::Kafka(Box::new(e))
    }
}
