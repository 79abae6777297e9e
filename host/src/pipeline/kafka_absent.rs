//! `pipeline::kafka` in a build without the `kafka` feature: the few
//! names a replay reaches for, as types that cannot be made. A config with
//! a Kafka source is refused when it is loaded (`crate::features`), so
//! nothing here is ever asked for more than "none": a replay of a file
//! pipeline has no repartitioned sides and no changelog, and its code path
//! is the same one the full build runs.

pub(crate) mod repartition {
    use std::convert::Infallible;

    use crate::config::Config;
    use crate::pipeline::error::PipelineError;
    use crate::record::Position;
    use crate::sink::named::Sinks;

    /// A repartitioned pipeline's two halves: never, without Kafka.
    pub(crate) struct Sides {
        pub front: Config,
        pub back: Config,
        pub front_sink: Sinks,
        never: Infallible,
    }

    impl Sides {
        pub(crate) fn of(_cfg: &Config) -> Result<Option<Sides>, PipelineError> {
            Ok(None)
        }

        pub(crate) fn is_back(&self, _position: &Position) -> bool {
            match self.never {}
        }
    }
}

pub(crate) mod by_id_value {
    use crate::record::Record;

    /// Only events of a repartitioned back are decoded, and there is none.
    pub(crate) fn decode(_record: &mut Record) -> Result<(), String> {
        Ok(())
    }
}

pub(crate) mod changelog {
    use std::convert::Infallible;
    use std::marker::PhantomData;

    use rocksdb::WriteBatch;

    use crate::config::Config;
    use crate::custody::ids::IdDigest;
    use crate::pipeline::driver::{IdLog, SentIds};
    use crate::pipeline::error::PipelineError;
    use crate::pipeline::stop::Stop;
    use crate::source::kafka::config::KafkaSourceConfig;
    use crate::store::Store;
    use crate::store::dedup::DedupWindow;

    /// The dedup changelog: a Kafka topic, so never, without Kafka.
    pub(crate) struct Changelog<'s> {
        never: Infallible,
        _store: PhantomData<&'s Store>,
    }

    impl<'s> Changelog<'s> {
        pub(crate) fn open(
            _cfg: &Config,
            _source: &KafkaSourceConfig,
            _store: &'s Store,
            _dedup: &'s DedupWindow<'s>,
            _stop: &Stop,
        ) -> Result<Option<Changelog<'s>>, PipelineError> {
            Ok(None)
        }
    }

    impl IdLog for Changelog<'_> {
        fn send<'l>(&'l self, _partition: &str, _now_secs: u64, _ids: &[IdDigest]) -> Box<dyn SentIds + 'l> {
            match self.never {}
        }

        fn remember(&self, _partition: &str, _acked: i64, _write: &mut WriteBatch) -> Result<(), PipelineError> {
            match self.never {}
        }
    }
}
