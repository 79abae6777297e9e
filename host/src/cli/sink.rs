//! `sluice sink classify`: what a response profile or a classifier plugin
//! makes of a backend's answer, before a single record is sent to that
//! backend.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;

use crate::plugin::engine::Runtime;
use crate::sink::http::classifier::{ClassifierConfig, Reader};
use crate::sink::http::corpus::{self, Case};
use crate::sink::http::response::profile::Profile;

#[derive(Args, Debug)]
pub(crate) struct ClassifyArgs {
    /// A built-in profile (`elasticsearch_bulk`, `clickhouse`, …).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["config", "plugin"])]
    pub profile: Option<String>,
    /// The reader of this pipeline config's sink: its classifier plugin
    /// (`[sink.classifier]`) or its profile (`[sink.response]`).
    #[arg(long, short = 'c', value_name = "FILE", conflicts_with = "plugin")]
    pub config: Option<PathBuf>,
    /// A classifier plugin (`.wasm`, `wit/classifier.wit`).
    #[arg(long, value_name = "FILE")]
    pub plugin: Option<PathBuf>,
    /// The plugin's config, a JSON object (with `--plugin`).
    #[arg(long, value_name = "JSON", requires = "plugin")]
    pub plugin_config: Option<String>,
    /// Response headers the plugin sees (with `--plugin`; repeat it).
    #[arg(long = "plugin-header", value_name = "NAME", requires = "plugin")]
    pub plugin_headers: Vec<String>,
    /// Case files, or folders of them (`*.json`, in name order).
    #[arg(value_name = "CASE", required = true)]
    pub cases: Vec<PathBuf>,
}

/// `Ok(false)` when a case's answer does not come to what it expects.
pub(crate) fn classify(args: &ClassifyArgs) -> anyhow::Result<bool> {
    let (name, reader) = match (&args.profile, &args.config, &args.plugin) {
        (Some(name), None, None) => (format!("profile {name}"), Reader::profile(Profile::builtin(name)?)),
        (None, Some(path), None) => {
            let cfg = crate::config::Config::load(path).with_context(|| format!("config {}", path.display()))?;
            let Some(response) = cfg.first_sink().response() else {
                bail!("{}: the sink is not an HTTP backend; it has no response profile", path.display());
            };
            match cfg.first_sink().classifier() {
                Some(c) => plugin_reader(&c)?,
                None => (format!("profile {}", response.name()), Reader::profile(response.profile()?)),
            }
        }
        (None, None, Some(path)) => {
            let config = match &args.plugin_config {
                Some(text) => serde_json::from_str(text).context("--plugin-config is not JSON")?,
                None => serde_json::json!({}),
            };
            let c = ClassifierConfig {
                path: path.clone(),
                name: None,
                config,
                headers: args.plugin_headers.clone(),
                ..ClassifierConfig::default()
            };
            if let Err((key, message)) = c.first_problem() {
                bail!("--plugin: {key}: {message}");
            }
            plugin_reader(&c)?
        }
        _ => bail!(
            "name a profile (--profile NAME), a classifier (--plugin FILE) or a config whose sink has one (--config FILE)"
        ),
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
        match case.check(&reader, &path) {
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
    writeln!(out, "{name}: {}", if all { "every case as expected" } else { "some cases differ" }).ok();
    Ok(all)
}

fn plugin_reader(c: &ClassifierConfig) -> anyhow::Result<(String, Reader)> {
    let runtime = Runtime::new(Runtime::default_cache_dir())?;
    let r = c.build(&runtime).with_context(|| format!("classifier {}", c.path.display()))?;
    Ok((format!("classifier {}", r.name()), Reader::Plugin(Box::new(r))))
}
