//! `sluice check`: a config, its plugins and, with `--connect`, what it
//! reaches, checked without running anything.

use anyhow::Result;

use super::validate::{BadInput, load};
use crate::config::Config;
use crate::pipeline;
use crate::source::config::SourceConfig;

/// Why `check` failed: the exit code tells a script which (docs/src/exit-codes.md).
pub(crate) enum CheckFailed {
    /// The config, a plugin, a path: exit 2.
    BadInput(anyhow::Error),
    /// Valid, but `--connect` could not reach a broker or the sink: exit 3.
    Unreachable(String),
}

pub(crate) const EXIT_UNREACHABLE: u8 = 3;

/// `check` of one config, or of each pipeline a list file names (`sluice
/// run -c all.toml`) and then of what they may not share.
pub(crate) fn check(check: &super::args::CheckArgs) -> Result<(), CheckFailed> {
    let paths = super::several::expand(std::slice::from_ref(&check.config.config)).map_err(CheckFailed::BadInput)?;
    if paths.len() == 1 && paths[0] == check.config.config {
        return check_one(check);
    }
    let mut configs = Vec::with_capacity(paths.len());
    for path in &paths {
        let one = super::args::CheckArgs { config: super::args::ConfigArgs::of(path.clone()), connect: check.connect };
        check_one(&one)?;
        configs.push(Config::load(path).map_err(|e| CheckFailed::BadInput(e.into()))?);
    }
    let named: Vec<(&std::path::Path, &Config)> = paths.iter().map(|p| p.as_path()).zip(&configs).collect();
    super::several::apart(&named).map_err(|e| CheckFailed::BadInput(anyhow::anyhow!(e)))?;
    println!("{} pipelines in one process: each with its own name, store and group", paths.len());
    Ok(())
}

fn check_one(check: &super::args::CheckArgs) -> Result<(), CheckFailed> {
    let args = &check.config;
    // Read before the load opens the store, which narrows the folder.
    let state_open = crate::config::Config::load(&args.config)
        .ok()
        .and_then(|c| crate::store::open_to_others(&c.pipeline.state_dir));
    let (cfg, runtime, chain) = load(args).map_err(|BadInput(e)| CheckFailed::BadInput(e))?;
    println!("pipeline {:?}: config {} is valid", cfg.pipeline.name, args.config.display());
    // The topics' retention, when Kafka's is the window, replaces these.
    #[cfg_attr(not(feature = "kafka"), allow(unused_mut))]
    let mut window = cfg.dedup.window.unwrap_or(crate::store::dedup::config::DEFAULT_WINDOW);
    #[cfg_attr(not(feature = "kafka"), allow(unused_mut))]
    let mut window_note = if cfg.dedup.window.is_some() { "configured" } else { "default" }.to_string();
    match &cfg.source {
        SourceConfig::File(f) => {
            let files = crate::source::file::discover(&f.paths).map_err(|e| CheckFailed::BadInput(e.into()))?;
            println!("  source: files {:?} ({} found now), follow = {}", f.paths, files.len(), f.follow);
        }
        // Refused when loaded (`crate::features`).
        #[cfg(not(feature = "kafka"))]
        SourceConfig::Kafka(_) => {}
        #[cfg(feature = "kafka")]
        SourceConfig::Kafka(k) => {
            println!("  source: kafka topics {:?}, group {:?}, brokers {}", k.topics, k.group_id, k.connection.brokers);
            for (key, value) in crate::source::kafka::client::describe(k) {
                println!("    {key} = {value}");
            }
            match crate::source::kafka::admin::retention(k) {
                Ok(Some(retention)) => {
                    let shown = crate::units::display(retention);
                    match cfg.dedup.window {
                        Some(w) if w < retention => {
                            println!(
                                "  warning: dedup.window {} is shorter than the topics' retention {shown}: a replay of \
                                 records older than the window delivers them again",
                                crate::units::display(w)
                            );
                        }
                        Some(_) => {}
                        None => {
                            window = retention;
                            window_note = "the topics' retention".into();
                        }
                    }
                }
                Ok(None) => println!(
                    "  note: the topics keep records forever (or do not say); dedup.window bounds replay safety"
                ),
                Err(e) => println!("  warning: cannot reach the brokers now ({e}); the consumer waits for them"),
            }
        }
    }
    for s in chain.stages() {
        println!("  plugin: {} (blake3:{})", s.id(), s.id().digest.to_hex());
    }
    println!(
        "  dedup:  window {} ({window_note}), state {}{}",
        crate::units::display(window),
        cfg.pipeline.state_dir.display(),
        if cfg.dedup.audit { "" } else { ", no audit trails (dedup.audit = false)" }
    );
    println!(
        "  watch:  a partition with records waiting and no batch finished for {} is reported stalled",
        crate::units::display(cfg.watchdog.stall)
    );
    #[cfg(feature = "kafka")]
    if let SourceConfig::Kafka(k) = &cfg.source {
        check_dedup_scaling(&cfg, k, window);
    }
    let sinks = pipeline::setup::open_sinks(&cfg, &runtime)
        .map_err(|e| CheckFailed::BadInput(anyhow::Error::new(e).context("sink")))?;
    if sinks.len() == 1 && cfg.routes.is_empty() {
        println!("  sink:   {}", sinks.describe(0));
    } else {
        // The topology: each sink, each route, where the rest go.
        let fanout =
            pipeline::setup::fanout(&cfg).map_err(|e| CheckFailed::BadInput(anyhow::anyhow!("routes: {e}")))?;
        let kinds: Vec<String> = sinks.iter().map(|(_, s)| s.describe().to_string()).collect();
        for line in fanout.describe(&kinds) {
            println!("  graph:  {line}");
        }
    }
    if let Some(r) = &cfg.schema_registry {
        println!(
            "  schemas: from the registry at {}, kept in {} (what a restart decodes while it is down)",
            r.shown_url(),
            cfg.pipeline.state_dir.join("schemas").display()
        );
    }
    if let Some(warning) = state_open {
        println!("  state:  WARNING {warning}; sluice narrowed it to 0700");
    }
    match (&cfg.metrics.listen, cfg.api.enabled, &cfg.api.token_env) {
        (Some(addr), true, Some(var)) => {
            println!("  api:    /tap, /status.json and the status page on {addr}, bearer token from ${var}")
        }
        (Some(addr), true, None) => {
            println!("  api:    /tap, /status.json and the status page on {addr} (loopback), no token")
        }
        (Some(addr), false, _) => println!("  api:    off; {addr} serves /metrics, /health, /ready only"),
        (None, ..) => {}
    }
    for named in &cfg.sinks {
        if cfg.sinks.len() > 1 {
            println!("  answers of sink {}:", named.name);
        }
        describe_answers(&named.sink);
    }
    if check.connect {
        connect(&cfg, &sinks, &args.config)?;
    }
    Ok(())
}

/// How a sink's backend answers are read: its classifier plugin or its
/// response profile.
fn describe_answers(sink: &crate::sink::config::SinkConfig) {
    if let Some(c) = sink.classifier() {
        let shown = c.name.clone().unwrap_or_else(|| crate::plugin::spec::PluginSpec::from_path(&c.path).name);
        println!("  answers: classifier plugin {shown} ({}), then the host's fixed rules:", c.path.display());
        for rule in crate::sink::http::response::fixed::DESCRIBED {
            println!("    fixed: {rule}");
        }
        let headers = if c.headers.is_empty() { "none".to_string() } else { c.headers.join(", ") };
        println!(
            "    it sees: status, headers {headers}, body up to {} bytes; time limit {}",
            c.max_body_bytes,
            crate::units::display(c.time_limit)
        );
        if let Some(response) = sink.response() {
            println!("    request body shaped by profile {}", response.name());
        }
    } else if let Some(response) = sink.response()
        && let Ok(profile) = response.profile()
    {
        println!("  answers: profile {}: {}", response.name(), profile.description);
        for rule in profile.describe() {
            println!("    {rule}");
        }
        println!(
            "  resends: {}",
            if profile.dedup_by_id {
                "the backend keeps one copy of an event sent twice (by its id)"
            } else {
                "the backend stores every copy: an event delivered, then sent again after a crash or a lost \
                 answer, is there twice (sluice never resends what the backend said it took)"
            }
        );
        if !profile.confirms {
            println!(
                "  warning: profile {} answers 2xx for a request whose records the backend may skip without \
                 naming them: its answers cannot prove delivery (sluice audit says \"sent, unconfirmed\"). \
                 Check the backend's own count of what it stored",
                response.name()
            );
        }
    }
}

/// `--connect`: reach every dependency once and say which answered; all
/// are tried, so one report names every failure.
#[cfg_attr(not(feature = "kafka"), allow(unused_variables))]
fn connect(cfg: &Config, sinks: &crate::sink::named::Sinks, file: &std::path::Path) -> Result<(), CheckFailed> {
    let mut probes: Vec<(String, Result<String, String>)> = Vec::new();
    #[cfg(feature = "kafka")]
    if let SourceConfig::Kafka(k) = &cfg.source {
        let result = crate::source::kafka::admin::probe(k).map_err(|e| e.to_string());
        probes.push((format!("source brokers {}", k.connection.brokers), result));
    }
    for (i, (_, sink)) in sinks.iter().enumerate() {
        probes.push((format!("sink {}", sinks.describe(i)), sink.probe()));
    }
    #[cfg(feature = "http")]
    if let Some(r) = &cfg.schema_registry {
        let result =
            crate::schema_registry::client::RegistryClient::new(r).map_err(|e| e.to_string()).and_then(|c| c.probe());
        probes.push((format!("schema registry {}", r.shown_url()), result));
    }
    let mut failed = Vec::new();
    for (what, result) in &probes {
        match result {
            Ok(said) => println!("  connect: {what}: ok ({said})"),
            Err(why) => {
                println!("  connect: {what}: FAILED ({why})");
                failed.push(format!("{what}: {why}"));
            }
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(CheckFailed::Unreachable(format!(
        "config {} is valid, but {} of its dependencies cannot be reached: {}",
        file.display(),
        failed.len(),
        failed.join("; ")
    )))
}

/// What `check` says of the scope and the changelog: how dedup behaves
/// once the group has more than one member.
#[cfg(feature = "kafka")]
fn check_dedup_scaling(
    cfg: &crate::config::Config,
    k: &crate::source::kafka::config::KafkaSourceConfig,
    window: std::time::Duration,
) {
    use crate::pipeline::kafka::changelog::{TopicState, retention_warning, topic_state};
    use crate::store::dedup::config::DedupScope;
    match cfg.dedup.scope {
        DedupScope::Partition => println!(
            "  dedup:  scope partition (the default): an id is a duplicate on the partition that delivered it; a \
             producer that re-sends an event as a new unkeyed message can land it on another partition, where it \
             passes again (dedup.scope = \"topic\" catches it, at the cost of every instance keeping the whole \
             topic's ids)"
        ),
        DedupScope::Topic if cfg.dedup.repartition => println!(
            "  dedup:  scope topic, repartitioned: each event is produced, keyed by its id, to {:?}, whose \
             partition-scoped back decides every copy of an id in one place, across instances too (a produce and a \
             consume more per event; the back reads it as the group {:?})",
            crate::source::kafka::config::repartition_topic(&k.group_id),
            crate::source::kafka::config::repartition_topic(&k.group_id)
        ),
        DedupScope::Topic => println!(
            "  dedup:  scope topic: an id delivered on any partition of a topic is a duplicate on all of them; \
             every instance follows the whole changelog (its memory and restore time grow with the topic); across \
             instances a copy read within the follower's lag of its original passes (dedup.repartition = true \
             makes it exact)"
        ),
    }
    let Some(topic) = cfg.changelog_topic() else {
        println!(
            "  warning: dedup.changelog.enabled = false: a partition's ids stay on the instance that delivered them; \
             its next owner delivers again what was not committed"
        );
        return;
    };
    if k.transactions {
        println!(
            "  fence:  source.transactions: each batch's offsets commit in a Kafka transaction of its partition's \
             own (transactional id {}); a member that lost a partition is fenced by its next owner, commits nothing \
             more and stops after the batch it was in (which a sink that is not Kafka still gets)",
            crate::pipeline::kafka::changelog::transaction::transactional_id(&k.group_id, "<topic>", "<partition>")
        );
    } else {
        println!(
            "  fence:  none (source.transactions = false): a member whose session expired while it ran on can \
             deliver and commit once more before it learns its partitions moved"
        );
    }
    let on_missing = match cfg.dedup.on_missing_state {
        crate::store::dedup::config::OnMissingState::Fail => "a partition whose changelog is lost refuses to start",
        crate::store::dedup::config::OnMissingState::AcceptDuplicates => {
            "a partition whose changelog is lost runs, and counts its records as unchecked"
        }
    };
    match topic_state(k, &topic, window, cfg.dedup.changelog.retention_factor) {
        Ok(TopicState::Exists { partitions, retention }) => {
            let kept = retention.map(crate::units::display).unwrap_or_else(|| "unknown".into());
            println!("  dedup:  changelog {topic:?} ({partitions} partitions, retention {kept}); {on_missing}");
            if let Some(w) = retention_warning(retention, window) {
                println!("  warning: dedup changelog {topic:?}: {w}");
            }
        }
        Ok(TopicState::WillCreate { partitions, retention }) => println!(
            "  dedup:  changelog {topic:?} does not exist: `sluice run` creates it ({partitions} partitions, \
             retention {}, cleanup.policy delete); {on_missing}",
            crate::units::display(retention)
        ),
        Err(e) => println!("  warning: cannot look up the dedup changelog {topic:?} now ({e})"),
    }
}
