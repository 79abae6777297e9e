//! `sluice lag` and `sluice replay`: a Kafka group's offsets, read and
//! reset.

#[cfg(feature = "kafka")]
use anyhow::Context;
use anyhow::Result;

#[cfg(feature = "kafka")]
use crate::config::Config;
#[cfg(feature = "kafka")]
use crate::source::config::SourceConfig;

/// `sluice lag` and `sluice replay` in a build without Kafka.
#[cfg(not(feature = "kafka"))]
fn without_kafka(command: &str) -> Result<()> {
    match crate::features::Feature::Kafka.missing(command) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

#[cfg(not(feature = "kafka"))]
pub(crate) fn lag(_args: &super::args::LagArgs) -> Result<()> {
    without_kafka("sluice lag")
}

#[cfg(not(feature = "kafka"))]
pub(crate) fn replay(_args: &super::args::ReplayArgs) -> Result<()> {
    without_kafka("sluice replay")
}

#[cfg(feature = "kafka")]
fn kafka_source(cfg: &Config, file: &std::path::Path) -> Result<crate::source::kafka::config::KafkaSourceConfig> {
    match &cfg.source {
        SourceConfig::Kafka(k) => Ok((**k).clone()),
        SourceConfig::File(_) => anyhow::bail!("config {}: source.type is not kafka", file.display()),
    }
}

/// `sluice lag`: per partition, the group's committed offset, the high
/// watermark, and the difference.
#[cfg(feature = "kafka")]
pub(crate) fn lag(args: &super::args::LagArgs) -> Result<()> {
    let cfg = Config::load(&args.config.config)?;
    super::mask::mask_output_as(&cfg);
    let k = kafka_source(&cfg, &args.config.config)?;
    let rows = crate::source::kafka::admin::lag(&k).with_context(|| format!("group {:?}", k.group_id))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!("{:<32} {:>12} {:>12} {:>12}", "PARTITION", "COMMITTED", "HIGH", "LAG");
    for r in &rows {
        let committed = r.committed.map(|c| c.to_string()).unwrap_or_else(|| "-".into());
        println!("{:<32} {committed:>12} {:>12} {:>12}", format!("{}/{}", r.topic, r.partition), r.high, r.lag);
    }
    println!("total lag: {}", rows.iter().map(|r| r.lag).sum::<i64>());
    Ok(())
}

/// `sluice replay`: reset the group's offsets; the next run re-reads.
#[cfg(feature = "kafka")]
pub(crate) fn replay(args: &super::args::ReplayArgs) -> Result<()> {
    let cfg = Config::load(&args.config.config)?;
    super::mask::mask_output_as(&cfg);
    let k = kafka_source(&cfg, &args.config.config)?;
    let resets = crate::source::kafka::admin::reset(&k, &args.from, &args.partitions, args.force)?;
    for r in &resets {
        let from = r.from.map(|f| f.to_string()).unwrap_or_else(|| "-".into());
        println!("{}: {from} -> {}", r.partition, r.to);
    }
    println!(
        "group {:?} reset; the next `sluice run` re-reads from there (inside dedup.window nothing is delivered twice)",
        k.group_id
    );
    Ok(())
}
