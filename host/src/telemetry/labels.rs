//! Which pipeline a thread works for, when one process runs several
//! (`sluice run -c a.toml -c b.toml`): every metric it records gets a
//! `pipeline` label, its tap samples and quarantine reasons name it.
//!
//! Why a thread-local and not a label at each call site: the metrics are
//! recorded in some sixty places that know a partition or a sink, not the
//! pipeline, and two pipelines that read one topic with two group ids have
//! the same partition names; a per-partition gauge without the label would
//! flip between the two. The label is set once on each thread a pipeline
//! starts ([`inherit`] carries it into the threads that thread spawns), and
//! a recorder layer ([`Labelled`]) adds it. A process with one pipeline
//! sets none: its metrics are named as they always were, and the layer
//! costs one thread-local read per metric call (per batch, not per record).

use std::cell::RefCell;
use std::sync::Arc;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit};

thread_local! {
    static PIPELINE: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// The pipeline this thread works for, when the process runs several.
pub(crate) fn current() -> Option<Arc<str>> {
    PIPELINE.with(|p| p.borrow().clone())
}

/// Run `f` as work of `pipeline` (none: unlabelled), restoring the label
/// this thread had after.
pub(crate) fn within<R>(pipeline: Option<Arc<str>>, f: impl FnOnce() -> R) -> R {
    let before = PIPELINE.with(|p| std::mem::replace(&mut *p.borrow_mut(), pipeline));
    struct Restore(Option<Option<Arc<str>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(before) = self.0.take() {
                PIPELINE.with(|p| *p.borrow_mut() = before);
            }
        }
    }
    let _restore = Restore(Some(before));
    f()
}

/// `f` to run on a new thread as work of this thread's pipeline: what
/// every thread a pipeline spawns is wrapped in.
pub(crate) fn inherit<R>(f: impl FnOnce() -> R) -> impl FnOnce() -> R {
    let pipeline = current();
    move || within(pipeline, f)
}

/// A recorder that adds `pipeline="…"` to what a labelled thread records.
pub(crate) struct Labelled<R>(pub R);

impl<R> Labelled<R> {
    fn key(key: &Key) -> Option<Key> {
        current().map(|p| key.with_extra_labels(vec![Label::new("pipeline", p.to_string())]))
    }
}

impl<R: Recorder> Recorder for Labelled<R> {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_counter(key, unit, description)
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_gauge(key, unit, description)
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_histogram(key, unit, description)
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        match Self::key(key) {
            Some(k) => self.0.register_counter(&k, metadata),
            None => self.0.register_counter(key, metadata),
        }
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        match Self::key(key) {
            Some(k) => self.0.register_gauge(&k, metadata),
            None => self.0.register_gauge(key, metadata),
        }
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        match Self::key(key) {
            Some(k) => self.0.register_histogram(&k, metadata),
            None => self.0.register_histogram(key, metadata),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pipelines on one partition name keep two gauges; an unlabelled
    /// thread's metric is named as before; a spawned thread inherits its
    /// spawner's pipeline.
    #[test]
    fn a_labelled_thread_records_under_its_pipeline_and_its_children_inherit_it() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let labelled = Labelled(recorder);
        metrics::with_local_recorder(&labelled, || {
            metrics::gauge!("lag", "partition" => "t/0").set(1.0);
            within(Some(Arc::from("a")), || metrics::gauge!("lag", "partition" => "t/0").set(2.0));
            let child = within(Some(Arc::from("b")), || std::thread::spawn(inherit(current)));
            assert_eq!(child.join().ok().flatten().as_deref(), Some("b"));
            within(Some(Arc::from("b")), || metrics::gauge!("lag", "partition" => "t/0").set(3.0));
            assert_eq!(current(), None, "restored after");
        });
        let text = handle.render();
        for line in [
            "lag{partition=\"t/0\"} 1",
            "lag{partition=\"t/0\",pipeline=\"a\"} 2",
            "lag{partition=\"t/0\",pipeline=\"b\"} 3",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
    }
}
