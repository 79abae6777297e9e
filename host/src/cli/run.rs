//! `sluice run`: every pipeline it was given, loaded and validated as
//! `check` does, then run, and reloaded. SIGHUP, or a change of the file under
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
//!
//! With several pipelines in one process (`cli/several.rs`) each has its
//! own [`Control`] and its own thread, labelled with its name
//! (`telemetry::labels`): a SIGHUP reloads each from its own file, a
//! signal to stop drains them all, and one that fails stops the others.

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::args::PipelineArgs;
use super::validate::{BadInput, validate};
use crate::config::Config;
use crate::pipeline;
use crate::pipeline::stop::Stop;
use crate::plugin::chain::Chain;
use crate::plugin::engine::Runtime;
use crate::source::config::SourceConfig;

/// What the threads of one pipeline of a run share.
#[derive(Default)]
struct Control {
    /// Its config file, read again on a reload.
    path: std::path::PathBuf,
    /// Its name as its threads' metrics label, when the process runs
    /// several pipelines (`telemetry::labels`); `None` with one.
    label: Option<Arc<str>>,
    /// The running pipeline's stop.
    current: Mutex<Stop>,
    /// SIGTERM or SIGINT came: no pipeline follows this one.
    shutting_down: AtomicBool,
    /// A validated config waiting for the running pipeline to drain.
    pending: Mutex<Option<(Config, String)>>,
    /// The config in force and its digest.
    in_force: Mutex<Option<(Config, String)>>,
}

impl Control {
    fn stop_current(&self) {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).request();
    }

    /// No pipeline of this one follows: it drains, commits and ends.
    fn shut_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.stop_current();
    }

    fn config(&self) -> Option<Config> {
        self.in_force.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|(c, _)| c.clone())
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

fn counted(control: &Control, result: &'static str) {
    crate::telemetry::labels::within(control.label.clone(), || {
        metrics::counter!("sluice_config_reloads_total", "result" => result).increment(1)
    });
}

fn in_force(control: &Control, digest: &str, old: Option<&str>) {
    crate::telemetry::labels::within(control.label.clone(), || {
        if let Some(old) = old {
            metrics::gauge!("sluice_config_info", "digest" => old.to_string()).set(0.0);
        }
        metrics::gauge!("sluice_config_info", "digest" => digest.to_string()).set(1.0);
    });
    crate::telemetry::history::HISTORY.set_config_digest(control.label.as_deref(), digest.to_string());
}

/// One reload request: validate, and either stage the new config (and stop
/// the running pipeline) or say why not.
fn reload(runtime: &Runtime, control: &Control) {
    let args = super::args::ConfigArgs::of(control.path.clone());
    let file = args.config.display();
    match validate(&args, runtime, false) {
        Err(BadInput(e)) => {
            counted(control, "invalid");
            tracing::error!("config reload refused, the running config stays: {e:#}");
        }
        Ok((new, chain)) => {
            let new_digest = digest(&args.config, &new, &chain);
            let guard = control.in_force.lock().unwrap_or_else(|p| p.into_inner());
            let Some((old, old_digest)) = guard.as_ref() else { return };
            if let Some(why) = immutable_change(old, &new) {
                counted(control, "refused");
                tracing::error!("config reload refused, the running config stays: config {file}: {why}");
            } else if *old_digest == new_digest {
                counted(control, "unchanged");
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

/// The pipelines of a run: each config file, its config, and the chain
/// `validate` loaded it with.
pub(super) type Loaded = Vec<(std::path::PathBuf, Config, Chain)>;

pub(crate) fn run(args: &super::args::PipelineArgs) -> ExitCode {
    match load_all(&args.configs) {
        Ok((loaded, runtime)) => run_loaded(args, loaded, &runtime),
        Err(BadInput(e)) => {
            crate::telemetry::redact::error(&format_args!("{e:#}"));
            ExitCode::from(2)
        }
    }
}

/// Every pipeline `run` was given, each validated as `check` does, and
/// checked against the others: one process holds them all, so they must
/// not share what each must own.
fn load_all(given: &[std::path::PathBuf]) -> Result<(Loaded, crate::plugin::engine::Runtime), BadInput> {
    let paths = super::several::expand(given).map_err(BadInput)?;
    let runtime = crate::plugin::engine::Runtime::new(crate::plugin::engine::Runtime::default_cache_dir())
        .map_err(|e| BadInput(e.into()))?;
    let mut loaded = Vec::with_capacity(paths.len());
    for path in paths {
        let (cfg, chain) = super::validate::validate(&super::args::ConfigArgs::of(path.clone()), &runtime, true)?;
        loaded.push((path, cfg, chain));
    }
    let configs: Vec<(&std::path::Path, &Config)> = loaded.iter().map(|(p, c, _)| (p.as_path(), c)).collect();
    super::several::apart(&configs).map_err(|e| BadInput(anyhow::anyhow!(e)))?;
    super::mask::mask_output_as_all(&loaded.iter().map(|(_, c, _)| c).collect::<Vec<_>>());
    Ok((loaded, runtime))
}

/// Run the pipelines of `loaded` (each a config file, the config and the
/// chain `load` validated it with: its digests are the config's in force),
/// each on its own thread with its own reloads, until every one has ended.
/// A pipeline that fails stops the others (they drain and commit) and the
/// process exits 1, so that a supervisor restarts the whole of it.
fn run_loaded(args: &PipelineArgs, loaded: Loaded, runtime: &Runtime) -> ExitCode {
    let several = loaded.len() > 1;
    // The recorder the listener will serve, before the first metric: each
    // pipeline's `sluice_config_info` is said below, before any starts.
    crate::telemetry::install();
    let grace = loaded.iter().map(|(_, c, _)| c.shutdown.grace).max().unwrap_or_default();
    let mut controls = Vec::with_capacity(loaded.len());
    for (path, cfg, chain) in loaded {
        let label = several.then(|| Arc::from(cfg.pipeline.name.as_str()));
        let control = Arc::new(Control { path, label, ..Control::default() });
        let first = digest(&control.path, &cfg, &chain);
        // Here, in the order `run` was given them, not as their threads
        // happen to start: the status page lists them in this order.
        about(&cfg, first.clone());
        in_force(&control, &first, None);
        *control.in_force.lock().unwrap_or_else(|p| p.into_inner()) = Some((cfg, first));
        controls.push(control);
    }
    // `None`: every pipeline (SIGHUP); `Some(i)`: pipeline i's file changed.
    let (reloads, requests) = mpsc::channel::<Option<usize>>();
    watch_signals(controls.clone(), reloads.clone(), grace);
    let finished = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (controls, finished) = (&controls, &finished);
        scope.spawn(move || {
            while !finished.load(Ordering::SeqCst) {
                match requests.recv_timeout(Duration::from_millis(200)) {
                    Ok(which) => {
                        for (i, control) in controls.iter().enumerate() {
                            if which.is_none_or(|w| w == i) {
                                reload(runtime, control);
                            }
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        });
        if args.watch_config {
            scope.spawn(move || {
                let mut seen: Vec<_> = controls.iter().map(|c| fingerprint(&c.path)).collect();
                while !finished.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_secs(1));
                    for (i, control) in controls.iter().enumerate() {
                        let now = fingerprint(&control.path);
                        if now.is_some() && now != seen[i] {
                            seen[i] = now;
                            let _ = reloads.send(Some(i));
                        }
                    }
                }
            });
        }
        let drivers: Vec<_> = controls
            .iter()
            .map(|control| {
                scope.spawn(move || {
                    crate::telemetry::labels::within(control.label.clone(), || {
                        drive(control, controls, runtime, args.summary)
                    })
                })
            })
            .collect();
        let mut code = 0u8;
        for driver in drivers {
            code = code.max(driver.join().unwrap_or(1));
        }
        finished.store(true, Ordering::SeqCst);
        ExitCode::from(code)
    })
}

/// The log's masking: with several pipelines, what any of them masks.
fn mask_output_as(controls: &[Arc<Control>]) {
    let configs: Vec<Config> = controls.iter().filter_map(|c| c.config()).collect();
    super::mask::mask_output_as_all(&configs.iter().collect::<Vec<_>>());
}

/// The status page's description of a pipeline now in force (a start, a
/// reload): it replaces the one of the same name.
fn about(cfg: &Config, digest: String) {
    let several = cfg.sinks.len() > 1;
    crate::telemetry::history::HISTORY.set_about(crate::telemetry::history::About {
        pipeline: cfg.pipeline.name.clone(),
        plugins: cfg.plugins.iter().map(|p| p.name.clone()).collect(),
        sinks: if several { cfg.sinks.iter().map(|s| s.name.clone()).collect() } else { Vec::new() },
        routes: routes_of(cfg),
        config_digest: Some(digest),
    });
}

/// Run one pipeline's configs, one after the other, until one ends without
/// a reload waiting; 0 when it ended well, 1 when it failed (and then the
/// other pipelines of the process are stopped).
fn drive(control: &Control, all: &[Arc<Control>], runtime: &Runtime, summary: super::summary::SummaryForm) -> u8 {
    let mut routes = Vec::new();
    loop {
        let stop = Stop::default();
        *control.current.lock().unwrap_or_else(|p| p.into_inner()) = stop.clone();
        let Some((cfg, digest)) = control.in_force.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return 1;
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
        about(&cfg, digest);
        routes_in_force(&mut routes, &cfg);
        let result = pipeline::run(&cfg, runtime, &stop);
        match result {
            Err(e) => {
                let e = anyhow::Error::new(e).context(format!("pipeline {}", cfg.pipeline.name));
                crate::telemetry::redact::error(&format_args!("{e:#}"));
                if all.len() > 1 {
                    tracing::error!("stopping the other pipelines of this process: one failed");
                    for other in all {
                        other.shut_down();
                    }
                }
                return 1;
            }
            Ok(stats) => {
                let next = control.pending.lock().unwrap_or_else(|p| p.into_inner()).take();
                match next.filter(|_| !control.shutting_down.load(Ordering::SeqCst)) {
                    Some((new, digest)) => {
                        let mut force = control.in_force.lock().unwrap_or_else(|p| p.into_inner());
                        let old = force.as_ref().map(|(_, d)| d.clone());
                        in_force(control, &digest, old.as_deref());
                        counted(control, "ok");
                        tracing::warn!(
                            digest,
                            delivered = stats.total.delivered,
                            "config reloaded: the old pipeline drained and committed; the new one starts"
                        );
                        *force = Some((new, digest));
                        drop(force);
                        mask_output_as(all);
                    }
                    None => {
                        super::summary::print_run(&stats, &cfg.pipeline.name, summary);
                        return 0;
                    }
                }
            }
        }
    }
}

/// With several sinks, the routes as `sluice check` draws them.
fn routes_of(cfg: &Config) -> Vec<String> {
    match pipeline::setup::fanout(cfg) {
        Ok(f) if cfg.sinks.len() > 1 => f.describe(&[]).into_iter().filter(|l| !l.starts_with("sink ")).collect(),
        _ => Vec::new(),
    }
}

/// `sluice_route_info{at, route}` 1 for each route of `cfg` (with several
/// sinks), as `check` draws them, in order, and 0 for those of the config
/// before it: what `top` shows, and a dashboard can.
fn routes_in_force(shown: &mut Vec<String>, cfg: &Config) {
    // The recorder the listener serves, before the pipeline starts it.
    crate::telemetry::install();
    let now = routes_of(cfg);
    for (at, old) in shown.iter().enumerate() {
        if now.get(at) != Some(old) {
            metrics::gauge!("sluice_route_info", "at" => at.to_string(), "route" => old.clone()).set(0.0);
        }
    }
    for (at, route) in now.iter().enumerate() {
        metrics::gauge!("sluice_route_info", "at" => at.to_string(), "route" => route.clone()).set(1.0);
    }
    *shown = now;
}

/// First SIGTERM/SIGINT: stop reading, let in-flight batches finish and
/// checkpoint, within `grace`. A second signal, or the grace running out,
/// exits at once: whatever was unfinished is read again next time. SIGHUP:
/// a reload request.
fn watch_signals(controls: Vec<Arc<Control>>, reloads: mpsc::Sender<Option<usize>>, grace: Duration) {
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
                    _ = hup.recv() => { let _ = reloads.send(None); }
                }
            }
            tracing::warn!("stopping: finishing in-flight batches (a second signal exits at once)");
            for control in &controls {
                control.shut_down();
            }
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
