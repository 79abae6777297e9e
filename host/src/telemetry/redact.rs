//! Every log line and error message is masked before it is written, with
//! the masking of the config in force (`quarantine.mask_fields`,
//! `mask_patterns`): logs are shipped to other systems, and a secret
//! masked in the store must not reach them through a WARN line, a
//! plugin's own message or a backend's answer quoted in an error.
//!
//! The sites that speak of one record mask with that record's values first
//! (`Quarantine::reason_for`); this is the net under every line, which
//! knows only the patterns and the masked field names.

use std::borrow::Cow;
use std::io::Write;
use std::sync::{Arc, RwLock};

use crate::masking::Masking;

/// The masking of the config in force; none before a config is loaded.
static IN_FORCE: RwLock<Option<Arc<Masking>>> = RwLock::new(None);

/// Mask every line written from now on as `masking` says (a config was
/// loaded, or reloaded).
pub(crate) fn install(masking: Masking) {
    let masking = (!masking.is_empty()).then(|| Arc::new(masking));
    *IN_FORCE.write().unwrap_or_else(|p| p.into_inner()) = masking;
}

/// The masking of the config in force, if it masks anything (`tap`).
pub(crate) fn in_force() -> Option<Arc<Masking>> {
    IN_FORCE.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// `text` as it may be written: masked by the config in force.
pub(crate) fn line(text: &str) -> Cow<'_, str> {
    let masking = IN_FORCE.read().unwrap_or_else(|p| p.into_inner()).clone();
    match masking {
        Some(m) => Cow::Owned(m.text(text, &[]).into_owned()),
        None => Cow::Borrowed(text),
    }
}

/// `error: <e>` on stderr, masked: where the binary ends with an error.
pub(crate) fn error(e: &dyn std::fmt::Display) {
    eprintln!("error: {}", line(&e.to_string()));
}

/// The log's writer: standard error, one masked line at a time. The
/// formatter writes an event in one or more pieces; they are collected and
/// written, masked, in one call when it is done with the event.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Stderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line(Vec::with_capacity(256))
    }
}

pub(crate) struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.0);
        crate::telemetry::progress::write_log(line(&text).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_line_is_masked_by_the_config_in_force_and_kept_whole_without_one() {
        // The one test of this module that installs: the masking is
        // process-wide.
        let text = r#"WARN plugin says: bad {"password":"Hunter2"} token=abc123 ok"#;
        super::install(crate::masking::Masking::default());
        assert_eq!(super::line(text), text);
        let fields = ["password".to_string()];
        let masking = crate::masking::Masking::new(&fields, &[r"token=(\S+)".into()]).unwrap_or_else(|e| panic!("{e}"));
        super::install(masking);
        assert_eq!(super::line(text), r#"WARN plugin says: bad {"password":***} token=*** ok"#);
        super::install(crate::masking::Masking::default());
    }
}
