//! Headless Chromium for the page tests: the status page drawn from a
//! running pipeline, and its login with the API's token.

use std::path::Path;
use std::process::Command;

/// Headless Chromium (`scripts/setup test` installs Debian's), with the
/// flags this machine needs: no sandbox as root, no network of its own.
pub fn chromium(profile: &Path, args: &[&str]) -> std::process::Output {
    let bin = ["chromium", "/usr/bin/chromium", "chromium-browser"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()))
        .unwrap_or_else(|| panic!("chromium not found: scripts/setup test installs it (apt: chromium)"));
    Command::new("timeout")
        .arg("120")
        .arg(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("chromium: {e}"))
}
