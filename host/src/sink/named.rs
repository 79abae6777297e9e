//! The set of sinks a run delivers through: `[[sinks]]` (each with its own
//! retries, breaker, response rules and metrics label; their config is
//! `NamedSinkConfig` in `config.rs`), or the single `[sink]` as a set of one
//! sink named `default`.

use std::sync::Arc;

use super::SinkError;
use super::config::NamedSinkConfig;
use super::context::SinkContext;
use super::retrying::RetryingSink;
use crate::route::Fanout;
use crate::route::config::RouteConfig;

/// A run's sinks, in the config's order, each driven through its retries
/// and breaker, with the routes over them.
pub(crate) struct Sinks {
    /// Shared with the views [`Sinks::only`] makes.
    list: Vec<(String, Arc<RetryingSink>)>,
    /// The names and routes (one sink too: a route a plugin names is
    /// checked against it); `None` for [`Sinks::one`].
    fanout: Option<Arc<Fanout>>,
}

impl Sinks {
    pub(crate) fn build(
        configs: &[NamedSinkConfig],
        routes: &[RouteConfig],
        ctx: SinkContext<'_>,
    ) -> Result<Sinks, SinkError> {
        let names: Vec<String> = configs.iter().map(|c| c.name.clone()).collect();
        let fanout = Fanout::new(&names, routes)
            .map_err(|e| SinkError::Setup { target: "routes".into(), message: e.to_string() })?;
        let several = configs.len() > 1;
        let list = configs
            .iter()
            .map(|c| Ok((c.name.clone(), Arc::new(c.sink.build_named(several.then_some(c.name.as_str()), ctx)?))))
            .collect::<Result<_, SinkError>>()?;
        Ok(Sinks { list, fanout: Some(Arc::new(fanout)) })
    }

    /// One sink, named `default` (tests, a repartitioning front's topic).
    pub(crate) fn one(sink: RetryingSink) -> Sinks {
        Sinks { list: vec![(crate::route::config::DEFAULT_SINK.to_string(), Arc::new(sink))], fanout: None }
    }

    /// The same sinks, with every event routed to the one named `name`
    /// (its ids keyed as always): what a replay of the records it refused
    /// delivers through. `None` when no sink has that name now, or there
    /// is only one.
    pub(crate) fn only(&self, name: &str) -> Option<Sinks> {
        let fanout = self.fanout.as_ref().filter(|f| !f.is_single())?;
        let at = fanout.index_of(name)?;
        Some(Sinks { list: self.list.clone(), fanout: Some(Arc::new(fanout.only(at))) })
    }

    /// The names and routes a batch's plan fans events out by (with one
    /// sink, the name a plugin's route is checked against).
    pub(crate) fn fanout(&self) -> Option<&Arc<Fanout>> {
        self.fanout.as_ref()
    }

    /// Whether any sink's breaker is open (the watchdog's "late").
    pub(crate) fn breaker_open(&self) -> bool {
        self.list.iter().any(|(_, s)| s.breaker_open())
    }

    pub(crate) fn get(&self, i: usize) -> Option<&RetryingSink> {
        self.list.get(i).map(|(_, s)| &**s)
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &RetryingSink)> {
        self.list.iter().map(|(n, s)| (n.as_str(), &**s))
    }

    /// What the audit's trail, logs and metrics labels call sink `i`: its
    /// target, after its name when the pipeline has several.
    pub(crate) fn describe(&self, i: usize) -> String {
        self.list.get(i).map_or_else(|| "?".into(), |(_, s)| s.describe().to_string())
    }
}
