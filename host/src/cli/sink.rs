//! `sluice sink classify`: what a response profile makes of a backend's
//! answer, before a single record is sent to that backend.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;

use crate::sink::http::response::Profile;
use crate::sink::http::response::corpus::{self, Case};

#[derive(Args, Debug)]
pub struct ClassifyArgs {
    /// A built-in profile (`elasticsearch_bulk`, `clickhouse`, …).
    #[arg(long, value_name = "NAME", conflicts_with = "config")]
    pub profile: Option<String>,
    /// The profile of this pipeline config's sink (`[sink.response]`).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Case files, or folders of them (`*.json`, in name order).
    #[arg(value_name = "CASE", required = true)]
    pub cases: Vec<PathBuf>,
}

/// `Ok(false)` when a case's answer does not come to what it expects.
pub fn classify(args: &ClassifyArgs) -> anyhow::Result<bool> {
    let (name, profile) = match (&args.profile, &args.config) {
        (Some(name), None) => (name.clone(), Profile::builtin(name).map_err(anyhow::Error::msg)?),
        (None, Some(path)) => {
            let cfg = crate::config::Config::load(path).with_context(|| format!("config {}", path.display()))?;
            let Some(response) = cfg.sink.response() else {
                bail!("{}: the sink is not an HTTP backend; it has no response profile", path.display());
            };
            (response.name().to_string(), response.profile().map_err(anyhow::Error::msg)?)
        }
        _ => bail!("name a profile (--profile NAME) or a config whose sink has one (--config FILE)"),
    };
    let mut files = Vec::new();
    for path in &args.cases {
        if path.is_dir() {
            files.extend(corpus::cases(path)?);
        } else {
            files.push(path.clone());
        }
    }
    // A reader that stops early (`| head`) ends the listing, not the
    // program with a panic.
    let mut out = std::io::stdout().lock();
    let mut all = true;
    for path in files {
        let case = Case::load(&path)?;
        match case.check(&profile, &path) {
            Ok(got) => writeln!(out, "ok    {}: {got}", path.display()),
            Err(corpus::CaseError::Mismatch { expected, got, .. }) => {
                all = false;
                writeln!(out, "FAIL  {}: expected {expected}, got {got}", path.display())
            }
            Err(e) => return Err(e.into()),
        }
        .and_then(|()| if case.about.is_empty() { Ok(()) } else { writeln!(out, "      {}", case.about) })
        .ok();
    }
    writeln!(out, "profile {name}: {}", if all { "every case as expected" } else { "some cases differ" }).ok();
    Ok(all)
}
