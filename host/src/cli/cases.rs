//! `sluice test -c sluice.toml --cases DIR`: a config's unit tests, a
//! verdict per case (the runner is `pipeline::cases`).

use std::time::Instant;

use anyhow::{Context, Result};

use crate::config::Config;
use crate::pipeline::cases::{self, Case};
use crate::plugin::engine::Runtime;

/// `Ok(true)`: every case passed. `Err`: the config, its plugins or the
/// cases cannot be read (exit 2).
pub(crate) fn test(args: &super::args::ConfigTestArgs) -> Result<bool> {
    let file = &args.config.config;
    let cfg = Config::load(file)?;
    super::mask::mask_output_as(&cfg);
    let cases = crate::plugin::conformance::load_dir::<Case>(&args.cases)?;
    let runtime = Runtime::new(Runtime::default_cache_dir())?;
    // A plugin that refuses its config is the config's fault, not a case's.
    crate::pipeline::setup::build_chain(&runtime, &cfg).with_context(|| format!("config {}", file.display()))?;
    let mut failed = 0;
    for (name, case) in &cases {
        let started = Instant::now();
        let verdict = cases::run(&cfg, &runtime, name, case).and_then(|got| cases::judge(case, &got));
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let about = if case.description.is_empty() { String::new() } else { format!(" — {}", case.description) };
        match verdict {
            Ok(()) => println!("ok    {name} ({ms:.0} ms){about}"),
            Err(why) => {
                failed += 1;
                println!("FAIL  {name}: {why}{about}");
            }
        }
    }
    println!(
        "{} cases, {} passed, {failed} failed: {} against {}",
        cases.len(),
        cases.len() - failed,
        file.display(),
        args.cases.display()
    );
    Ok(failed == 0)
}
