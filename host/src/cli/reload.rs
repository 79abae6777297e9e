//! `sluice run` and its reloads. SIGHUP, or a change of the file under
//! `--watch-config`, re-reads the config and every plugin and validates all
//! of it as `check` does, while the pipeline runs on. Only a config that
//! passes replaces the running one, and then the way a shutdown does: the
//! pipeline stops reading, what is in flight is delivered, made durable and
//! committed, and the same process starts the new pipeline (a Kafka member
//! leaves the group and joins again). No record is in two pipelines, and
//! none is dropped between them: custody is the shutdown's and the start's,
//! both of which the suites test.
//!
//! A config that fails leaves the running one in force, with one log line
//! naming the file and key and `sluice_config_reloads_total{result}`. Keys
//! that cannot change live (the pipeline's name, its state folder, the
//! source's type, a Kafka group) are refused the same way.

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::PipelineArgs as RunArgs;
use super::validate::{BadInput, validate};
use crate::config::{Config, SourceConfig};
use crate::pipeline::{self, Stop};
use crate::plugin::{Chain, Runtime};

/// What the threads of a run share.
#[derive(Default)]
struct Control {
    /// The running pipeline's stop.
    current: Mutex<Stop>,
    /// SIGTERM or SIGINT came: no pipeline follows this one.
    shutting_down: AtomicBool,
    /// A validated config waiting for the running pipeline to drain.
    pending: Mutex<Option<(Config, String)>>,
    /// The config in force and its digest.
    in_force: Mutex<Option<(Config, String)>>,
    /// The run is over: the helper threads end.
    finished: AtomicBool,
}

impl Control {
    fn stop_current(&self) {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).request();
    }
}

/// The digest of a config in force: its file, every plugin's bytes and
/// every plugin's table (a `config_file`'s included).
fn digest(path: &Path, cfg: &Config, chain: &Chain) -> String {
    let mut h = blake3::Hasher::new();
    h.update(&std::fs::read(path).unwrap_or_default());
    for s in chain.stages() {
        h.update(s.id().digest.as_bytes());
    }
    for p in &cfg.plugins {
        h.update(p.config.to_string().as_bytes());
    }
    h.finalize().to_hex()[..16].to_string()
}

/// Why `new` cannot replace `old` without a restart, if it cannot.
fn immutable_change(old: &Config, new: &Config) -> Option<String> {
    let source = |c: &Config| match &c.source {
        SourceConfig::File(_) => ("file", String::new()),
        SourceConfig::Kafka(k) => ("kafka", k.group_id.clone()),
    };
    let changed = |key: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
        Some(format!(
            "{key} cannot change while sluice runs (it is {a:?}, the new config says {b:?}); restart sluice for that"
        ))
    };
    if old.pipeline.name != new.pipeline.name {
        return changed("pipeline.name", &old.pipeline.name, &new.pipeline.name);
    }
    if old.pipeline.state_dir != new.pipeline.state_dir {
        return changed("pipeline.state_dir", &old.pipeline.state_dir, &new.pipeline.state_dir);
    }
    let (a, b) = (source(old), source(new));
    if a.0 != b.0 {
        return changed("source.type", &a.0, &b.0);
    }
    if a.1 != b.1 {
        return changed("source.group_id", &a.1, &b.1);
    }
    None
}

fn counted(result: &'static str) {
    metrics::counter!("sluice_config_reloads_total", "result" => result).increment(1);
}

fn in_force(digest: &str, old: Option<&str>) {
    if let Some(old) = old {
        metrics::gauge!("sluice_config_info", "digest" => old.to_string()).set(0.0);
    }
    metrics::gauge!("sluice_config_info", "digest" => digest.to_string()).set(1.0);
    crate::telemetry::history::HISTORY.set_config_digest(digest.to_string());
}

/// One reload request: validate, and either stage the new config (and stop
/// the running pipeline) or say why not.
fn reload(args: &RunArgs, runtime: &Runtime, control: &Control) {
    let file = args.config.config.display();
    match validate(&args.config, runtime, false) {
        Err(BadInput(e)) => {
            counted("invalid");
            tracing::error!("config reload refused, the running config stays: {e:#}");
        }
        Ok((new, chain)) => {
            let new_digest = digest(&args.config.config, &new, &chain);
            let guard = control.in_force.lock().unwrap_or_else(|p| p.into_inner());
            let Some((old, old_digest)) = guard.as_ref() else { return };
            if let Some(why) = immutable_change(old, &new) {
                counted("refused");
                tracing::error!("config reload refused, the running config stays: config {file}: {why}");
            } else if *old_digest == new_digest {
                counted("unchanged");
                tracing::info!(digest = new_digest, "config reload: nothing changed in {file} or its plugins");
            } else {
                drop(guard);
                tracing::warn!(digest = new_digest, "config reload: {file} is valid; draining the running pipeline");
                *control.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some((new, new_digest));
                control.stop_current();
            }
        }
    }
}

/// What the file looks like now, for `--watch-config`.
fn fingerprint(path: &Path) -> Option<blake3::Hash> {
    std::fs::read(path).ok().map(|b| blake3::hash(&b))
}

/// `chain` is the one `load` validated `cfg` with: its digests are the
/// config's in force.
pub fn run(args: &RunArgs, cfg: Config, chain: &Chain, runtime: &Runtime) -> ExitCode {
    let control = Arc::new(Control::default());
    let (reloads, requests) = mpsc::channel::<()>();
    watch_signals(control.clone(), reloads.clone(), cfg.shutdown.grace);
    let first = digest(&args.config.config, &cfg, chain);
    in_force(&first, None);
    *control.in_force.lock().unwrap_or_else(|p| p.into_inner()) = Some((cfg, first));
    std::thread::scope(|scope| {
        let control = &control;
        scope.spawn(move || {
            while !control.finished.load(Ordering::SeqCst) {
                match requests.recv_timeout(Duration::from_millis(200)) {
                    Ok(()) => reload(args, runtime, control),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        });
        if args.watch_config {
            let path = args.config.config.clone();
            scope.spawn(move || {
                let mut seen = fingerprint(&path);
                while !control.finished.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_secs(1));
                    let now = fingerprint(&path);
                    if now.is_some() && now != seen {
                        seen = now;
                        let _ = reloads.send(());
                    }
                }
            });
        }
        let code = drive(control, runtime, args.summary);
        control.finished.store(true, Ordering::SeqCst);
        code
    })
}

/// Run pipelines, one after the other, until one ends without a reload
/// waiting.
fn drive(control: &Control, runtime: &Runtime, summary: super::SummaryForm) -> ExitCode {
    loop {
        let stop = Stop::default();
        *control.current.lock().unwrap_or_else(|p| p.into_inner()) = stop.clone();
        let cfg = match control.in_force.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some((c, _)) => c.clone(),
            None => return ExitCode::from(1),
        };
        // A signal, or another valid reload, that came while the
        // pipelines changed hands: its stop went to the old one.
        if control.shutting_down.load(Ordering::SeqCst)
            || control.pending.lock().unwrap_or_else(|p| p.into_inner()).is_some()
        {
            stop.request();
        }
        // What `sluice tap --after` may name from now on.
        crate::telemetry::tap::TAPS.set_stages(cfg.plugins.iter().map(|p| p.name.clone()).collect());
        let several = cfg.sinks.len() > 1;
        crate::telemetry::history::HISTORY.set_about(crate::telemetry::history::About {
            pipeline: cfg.pipeline.name.clone(),
            plugins: cfg.plugins.iter().map(|p| p.name.clone()).collect(),
            sinks: if several { cfg.sinks.iter().map(|s| s.name.clone()).collect() } else { Vec::new() },
            routes: match pipeline::fanout(&cfg) {
                Ok(f) if several => f.describe(&[]).into_iter().filter(|l| !l.starts_with("sink ")).collect(),
                _ => Vec::new(),
            },
        });
        let result = pipeline::run(&cfg, runtime, &stop);
        match result {
            Err(e) => {
                let e = anyhow::Error::new(e).context(format!("pipeline {}", cfg.pipeline.name));
                crate::telemetry::redact::error(&format_args!("{e:#}"));
                return ExitCode::from(1);
            }
            Ok(stats) => {
                let next = control.pending.lock().unwrap_or_else(|p| p.into_inner()).take();
                match next.filter(|_| !control.shutting_down.load(Ordering::SeqCst)) {
                    Some((new, digest)) => {
                        let mut force = control.in_force.lock().unwrap_or_else(|p| p.into_inner());
                        let old = force.as_ref().map(|(_, d)| d.clone());
                        in_force(&digest, old.as_deref());
                        counted("ok");
                        tracing::warn!(
                            digest,
                            delivered = stats.total.delivered,
                            "config reloaded: the old pipeline drained and committed; the new one starts"
                        );
                        super::mask_output_as(&new);
                        *force = Some((new, digest));
                    }
                    None => {
                        super::summary::print_run(&stats, &cfg.pipeline.name, summary);
                        return ExitCode::SUCCESS;
                    }
                }
            }
        }
    }
}

/// First SIGTERM/SIGINT: stop reading, let in-flight batches finish and
/// checkpoint, within `grace`. A second signal, or the grace running out,
/// exits at once: whatever was unfinished is read again next time. SIGHUP:
/// a reload request.
fn watch_signals(control: Arc<Control>, reloads: mpsc::Sender<()>, grace: Duration) {
    let spawned = std::thread::Builder::new().name("sluice-signals".into()).spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        rt.block_on(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut int), Ok(mut hup)) =
                (signal(SignalKind::terminate()), signal(SignalKind::interrupt()), signal(SignalKind::hangup()))
            else {
                return;
            };
            loop {
                tokio::select! {
                    _ = term.recv() => break,
                    _ = int.recv() => break,
                    _ = hup.recv() => { let _ = reloads.send(()); }
                }
            }
            tracing::warn!("stopping: finishing in-flight batches (a second signal exits at once)");
            control.shutting_down.store(true, Ordering::SeqCst);
            control.stop_current();
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
                _ = tokio::time::sleep(grace) => tracing::error!("grace period over; exiting"),
            }
            std::process::exit(130);
        });
    });
    if let Err(e) = spawned {
        tracing::error!("cannot watch signals: {e}");
    }
}
