//! `sluice store repair`.

use anyhow::{Context, Result};

use super::args::ConfigArgs;
use crate::config::Config;
use crate::pipeline;
use crate::source::config::SourceConfig;
use crate::store::Store;

/// `sluice store repair`: rebuild a damaged store, then say what it holds,
/// so the operator sees where each file will be read from next.
pub(crate) fn repair_store(args: &ConfigArgs) -> Result<()> {
    let cfg = Config::load(&args.config).with_context(|| format!("config {}", args.config.display()))?;
    super::mask::mask_output_as(&cfg);
    let path = &cfg.pipeline.state_dir;
    let (store, how) = Store::repair(path, &pipeline::setup::identity(&cfg))?;
    let checkpoints = store.checkpoints()?;
    let how = match how {
        crate::store::Repaired::LogReplayed => "its write-ahead log replayed up to its first damaged record, if any",
        crate::store::Repaired::Rebuilt => "rebuilt by RocksDB's repairer from every file it could read",
    };
    println!("state store {} repaired ({how}): it opens, for pipeline {:?}", path.display(), cfg.pipeline.name);
    if matches!(cfg.source, SourceConfig::File(_)) {
        if checkpoints.is_empty() {
            println!(
                "no file checkpoint survived: every file is read from its start (the dedup ids kept absorb what they can)"
            );
        }
        for (file, cp) in &checkpoints {
            println!("  {file}: read from byte {}", cp.offset);
        }
    } else {
        println!("Kafka offsets live in Kafka; the dedup ids kept absorb what was delivered and is read again");
    }
    Ok(())
}
