//! Progress of the long work inside a running pipeline (a partition's ids
//! restored from the dedup changelog) for a person at a terminal: one bar
//! per partition on standard error, drawn only when the binary asked for
//! it (`enable`) and stderr is a terminal, so a pipe, a file, a CI log or
//! an embedding program gets only the log lines.
//!
//! The bars share standard error with the log: while any is drawn, a log
//! line is written between two draws (`write_log`) instead of through the
//! middle of a bar.

use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

static ENABLED: AtomicBool = AtomicBool::new(false);
static BARS: OnceLock<MultiProgress> = OnceLock::new();

/// Draw the pipeline's bars from now on, where stderr is a terminal (the
/// `sluice` binary; a library user draws its own).
pub(crate) fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// The bars drawn now, if the binary enabled them; `None` leaves the log
/// alone (the common case: no restore, or no terminal).
fn drawn() -> Option<&'static MultiProgress> {
    BARS.get().filter(|bars| !bars.is_hidden())
}

/// Write one log line to stderr between two draws of the bars, so neither
/// is torn.
pub(crate) fn write_log(line: &[u8]) {
    let write = || {
        // A log line that cannot be written has nowhere else to go.
        let _ = std::io::stderr().lock().write_all(line);
    };
    match drawn() {
        Some(bars) => bars.suspend(write),
        None => write(),
    }
}

/// One partition's restore from the dedup changelog, drawn as a bar of
/// changelog offsets read while it lives; cleared when dropped (the log's
/// "dedup state restored" line says how it ended).
pub(crate) struct Restoring {
    bar: Option<ProgressBar>,
}

impl Restoring {
    /// `partition` will read `offsets` changelog offsets (every message on
    /// its changelog partition, its own or not: that is what takes time).
    pub(crate) fn start(partition: &str, offsets: u64) -> Self {
        if !ENABLED.load(Ordering::Relaxed) || offsets == 0 {
            return Self { bar: None };
        }
        let bars = BARS.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        if bars.is_hidden() {
            return Self { bar: None };
        }
        let bar = ProgressBar::new(offsets);
        bar.set_style(
            ProgressStyle::with_template(
                "restoring {prefix} dedup ids {bar:30} {human_pos}/{human_len} changelog offsets ({eta} left)",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(partition.to_string());
        Self { bar: Some(bars.add(bar)) }
    }

    /// `done` of the offsets are read.
    pub(crate) fn at(&self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }
}

impl Drop for Restoring {
    fn drop(&mut self) {
        if let (Some(bar), Some(bars)) = (self.bar.take(), BARS.get()) {
            bar.finish_and_clear();
            bars.remove(&bar);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn nothing_is_drawn_unless_the_binary_asked() {
        // Tests never call enable(): the library draws nothing of its own.
        let r = super::Restoring::start("orders/0", 1_000);
        assert!(r.bar.is_none());
        r.at(10);
    }
}
