//! What the command line's own output hides: once a config is loaded,
//! every log line and error is masked as its `[quarantine]` says.

/// A config was loaded: from now on, log lines and errors are masked as its
/// `quarantine.mask_fields` and `mask_patterns` say. (A pattern that does
/// not compile never gets here: loading the config refused it.)
pub(crate) fn mask_output_as(cfg: &crate::config::Config) {
    mask_output_as_all(&[cfg]);
}

/// The log's masking for the pipelines of one process: each masks what
/// its config says, and one log is shared, so it masks what any of them
/// would.
pub(crate) fn mask_output_as_all(configs: &[&crate::config::Config]) {
    let fields: Vec<String> = configs.iter().flat_map(|c| c.quarantine.mask_fields.iter().cloned()).collect();
    let patterns: Vec<String> = configs.iter().flat_map(|c| c.quarantine.mask_patterns.iter().cloned()).collect();
    if let Ok(m) = crate::masking::Masking::new(&fields, &patterns) {
        crate::telemetry::redact::install(m);
    }
}
