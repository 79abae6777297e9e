//! `sluice tap`: print a sample of the events passing one point of a
//! running pipeline, as NDJSON on stdout (`telemetry::tap` says what is
//! sampled and how it stays out of the pipeline's way). It reads the
//! pipeline's metrics listener, like `sluice top`.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("point").required(true))]
pub(crate) struct TapArgs {
    /// The pipeline's config: tap reads the endpoint of its `[metrics]
    /// listen`; a list file's, the listener its pipelines share.
    #[arg(long, short = 'c', value_name = "FILE", required_unless_present = "url")]
    pub config: Option<PathBuf>,
    /// The metrics endpoint to read instead, `HOST:PORT`.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "config")]
    pub url: Option<SocketAddr>,
    /// The events the plugin of this name emits.
    #[arg(long, value_name = "PLUGIN", group = "point")]
    pub after: Option<String>,
    /// The events handed to the sink (new to the dedup window).
    #[arg(long, group = "point")]
    pub before_sink: bool,
    /// The records going to the quarantine, with their reasons.
    #[arg(long, group = "point")]
    pub quarantined: bool,
    /// Samples a second at most.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub rate: u32,
    /// In a process that runs several pipelines, this one's events only
    /// (each line names its pipeline either way).
    #[arg(long, value_name = "NAME")]
    pub pipeline: Option<String>,
    /// A file holding the pipeline's API token (`[api] token_env`).
    /// Without it: the variable the config's `api.token_env` names, else
    /// `$SLUICE_API_TOKEN`. Never a flag's value: a command line is seen
    /// by every user of the machine.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// The API token a client command sends, if any: `--token-file`, the
/// variable the config's `api.token_env` names, `$SLUICE_API_TOKEN`.
pub(super) fn api_token(file: Option<&std::path::Path>, config: Option<&std::path::Path>) -> Result<Option<String>> {
    if let Some(f) = file {
        let t = std::fs::read_to_string(f).with_context(|| format!("--token-file {}", f.display()))?;
        anyhow::ensure!(!t.trim().is_empty(), "--token-file {}: the file is empty", f.display());
        return Ok(Some(t.trim().to_string()));
    }
    let from_config = config
        .and_then(|c| super::several::listener(c).ok())
        .and_then(|c| crate::config::Config::load(&c).ok())
        .and_then(|c| c.api.token_env)
        .and_then(|var| std::env::var(var).ok());
    Ok(from_config.or_else(|| std::env::var("SLUICE_API_TOKEN").ok()).map(|t| t.trim().to_string()))
}

pub(crate) fn tap(args: &TapArgs) -> Result<()> {
    let addr = super::top::endpoint(args.url, args.config.as_deref(), "tap")?;
    let mut query = match (&args.after, args.before_sink) {
        (Some(plugin), _) => format!("after={}", encoded(plugin)),
        (None, true) => "before_sink".to_string(),
        (None, false) => "quarantined".to_string(),
    };
    query.push_str(&format!("&rate={}", args.rate));
    if let Some(p) = &args.pipeline {
        query.push_str(&format!("&pipeline={}", encoded(p)));
    }
    let token = api_token(args.token_file.as_deref(), args.config.as_deref())?;
    let authorization = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let mut s = std::net::TcpStream::connect(addr).with_context(|| format!("cannot reach http://{addr}"))?;
    s.write_all(format!("GET /tap?{query} HTTP/1.0\r\nHost: sluice\r\n{authorization}\r\n").as_bytes())?;
    let mut from = BufReader::new(s);
    let mut status = String::new();
    from.read_line(&mut status)?;
    // The head, to the empty line.
    loop {
        let mut h = String::new();
        if from.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
    }
    if status.contains(" 401") {
        anyhow::bail!(
            "http://{addr}/tap: the API refused the token (401): pass --token-file, or set the variable [api] token_env names"
        );
    }
    if !status.contains(" 200") {
        let mut why = String::new();
        let _ = std::io::Read::read_to_string(&mut from, &mut why);
        anyhow::bail!("http://{addr}/tap: {}", why.trim());
    }
    let out = std::io::stdout();
    let mut out = out.lock();
    for line in from.lines() {
        let line = line.context("the tap's stream")?;
        if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
            // `sluice tap … | head`: the reader has what it wanted.
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(e.into());
        }
    }
    anyhow::bail!("http://{addr}/tap: the pipeline closed the stream (its process stopped)")
}

/// A plugin name as a query value.
fn encoded(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_plugin_name_survives_the_query() {
        assert_eq!(super::encoded("json"), "json");
        assert_eq!(super::encoded("a b/é"), "a%20b%2F%C3%A9");
    }
}
