//! Progress for the commands that can take minutes (`shadow`, `audit
//! --from-file`, `quarantine export`, `quarantine replay`): drawn on
//! standard error when it is a terminal, nothing otherwise, so that a pipe,
//! a file or a CI log gets only the results (indicatif hides a bar whose
//! target is not a terminal).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps, drawn as `template` (indicatif's: `{bar:40}`,
/// `{pos}`, `{len}`, `{per_sec}`, `{eta}`).
pub(crate) fn bar(len: u64, template: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
    bar
}
