//! What `deploy/` ships, checked against the binary it deploys.

use std::process::Command;

use sluice_e2e::{sluice_bin, workspace_root};

fn unit() -> String {
    let path = workspace_root().join("deploy/systemd/sluice.service");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The value of `key=` in the unit (the first one).
fn value<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("the unit has no {key}="))
        .trim()
}

#[test]
fn the_systemd_unit_verifies_and_agrees_with_the_binary() {
    let unit = unit();
    // The commands are ones the binary has, with the flags it takes.
    assert_eq!(value(&unit, "ExecStartPre"), "/usr/bin/sluice check -c /etc/sluice/sluice.toml");
    assert_eq!(value(&unit, "ExecStart"), "/usr/bin/sluice run -c /etc/sluice/sluice.toml");
    for sub in ["check", "run"] {
        let out = Command::new(sluice_bin!()).args([sub, "--help"]).output().unwrap_or_else(|e| panic!("{e}"));
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && help.contains("-c, --config <FILE>"), "sluice {sub} --help: {help}");
    }
    // A reload is SIGHUP, which `sluice run` handles (tests/pipeline_file.rs,
    // a_reload_under_load…).
    assert_eq!(value(&unit, "ExecReload"), "/bin/kill -HUP $MAINPID");
    // systemd waits longer than sluice's drain before it kills.
    let grace = sluice::config::ShutdownConfig::default().grace;
    let stop: u64 = value(&unit, "TimeoutStopSec").parse().unwrap_or_else(|e| panic!("TimeoutStopSec: {e}"));
    assert!(stop > grace.as_secs(), "TimeoutStopSec={stop} must exceed shutdown.grace ({grace:?})");
    assert_eq!(value(&unit, "KillSignal"), "SIGTERM");
    assert_eq!(value(&unit, "Restart"), "on-failure");
    // Bad input is exit code 2 (README, "Exit codes"): not restarted.
    assert_eq!(value(&unit, "RestartPreventExitStatus"), "2");
    assert_eq!(value(&unit, "StateDirectory"), "sluice");
    assert_ne!(value(&unit, "User"), "root");
    // systemd's own check, on a copy that runs the binary under test.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let copy = dir.path().join("sluice.service");
    let bin = std::path::Path::new(sluice_bin!()).display().to_string();
    std::fs::write(&copy, unit.replace("/usr/bin/sluice", &bin)).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .unwrap_or_else(|e| panic!("systemd-analyze (scripts/setup installs systemd): {e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    let about_the_unit: Vec<&str> = said.lines().filter(|l| l.contains("sluice.service")).collect();
    assert!(out.status.success() && about_the_unit.is_empty(), "systemd-analyze verify: {said}");
    println!("systemd-analyze verify deploy/systemd/sluice.service: ok (TimeoutStopSec {stop} s > grace {grace:?})");
}
