//! What `deploy/` ships, checked against the binary it deploys: the
//! systemd unit, the Kubernetes StatefulSet, and the container image
//! (built from Debian's archive, run with `chroot`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_e2e::{plugin, sluice_bin, workspace_root};

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
    // Bad input is exit code 2 (docs/src/exit-codes.md): not restarted.
    assert_eq!(value(&unit, "RestartPreventExitStatus"), "2");
    assert_eq!(value(&unit, "StateDirectory"), "sluice");
    assert_ne!(value(&unit, "User"), "root");
    let files: u64 = value(&unit, "LimitNOFILE").parse().unwrap_or(0);
    assert!(files >= 16_384, "LimitNOFILE={files}: the store keeps every table open");
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

/// The documents of deploy/kubernetes/sluice.yaml, by kind.
fn manifest() -> (Value, Value, Value) {
    let path = workspace_root().join("deploy/kubernetes/sluice.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs: Vec<Value> = text
        .split("\n---\n")
        .map(|d| serde_yaml::from_str(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect();
    let of = |kind: &str| {
        docs.iter().find(|d| d["kind"] == kind).cloned().unwrap_or_else(|| panic!("no {kind} in {}", path.display()))
    };
    (of("ConfigMap"), of("Service"), of("StatefulSet"))
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_else(|| panic!("no string at {pointer}"))
}

/// The image's user, as the build script sets it.
fn image_uid() -> u64 {
    let script = std::fs::read_to_string(workspace_root().join("deploy/container/build")).unwrap_or_default();
    script
        .lines()
        .find_map(|l| l.strip_prefix("uid="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("deploy/container/build sets no uid="))
}

/// The first-party plugins under the names the image (and its config) use.
fn plugins_as_installed(dir: &Path) -> PathBuf {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap_or_else(|e| panic!("{e}"));
    for name in ["json", "pattern", "ts-window"] {
        std::fs::copy(plugin(name), plugins.join(format!("{name}.wasm"))).unwrap_or_else(|e| panic!("{e}"));
    }
    plugins
}

#[test]
fn the_statefulset_agrees_with_the_binary_and_its_config() {
    let (config_map, service, set) = manifest();
    let pod = &set["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    // The ConfigMap's config is the image's default config.
    let config = str_at(&config_map, "/data/sluice.toml");
    let image_config =
        std::fs::read_to_string(workspace_root().join("deploy/container/sluice.toml")).unwrap_or_default();
    let without_header: String =
        image_config.lines().skip_while(|l| l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    assert_eq!(config.trim_end(), without_header.trim_end(), "deploy/container/sluice.toml and the ConfigMap differ");
    // The args run the mounted config, with flags the binary has.
    let mount = |name: &str| {
        container["volumeMounts"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["name"] == name))
            .and_then(|m| m["mountPath"].as_str())
            .unwrap_or_else(|| panic!("no volumeMount {name}"))
            .to_string()
    };
    let config_dir = mount("config");
    let config_volume = pod["volumes"].as_array().and_then(|v| v.iter().find(|v| v["name"] == "config"));
    assert_eq!(config_volume.map(|v| &v["configMap"]["name"]), Some(&config_map["metadata"]["name"]));
    let args: Vec<&str> = container["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    assert_eq!(args, ["run", "-c", &format!("{config_dir}/sluice.toml")]);
    let help = Command::new(sluice_bin!()).args(["run", "--help"]).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(String::from_utf8_lossy(&help.stdout).contains("-c, --config <FILE>"));
    // The state store is on the volume claim, which is ReadWriteOnce.
    let state_mount = mount("state");
    let claim = &set["spec"]["volumeClaimTemplates"][0];
    assert_eq!(claim["metadata"]["name"], "state");
    assert_eq!(claim["spec"]["accessModes"][0], "ReadWriteOnce");
    let state_dir = config
        .lines()
        .find_map(|l| l.strip_prefix("state_dir = "))
        .and_then(|v| v.split('"').nth(1))
        .unwrap_or_else(|| panic!("no state_dir in the ConfigMap"));
    assert!(state_dir.starts_with(&format!("{state_mount}/")), "{state_dir} is not on the claim ({state_mount})");
    // Every variable the config reads is set; the pod's name is the
    // static member id.
    let env: Vec<&Value> = container["env"].as_array().into_iter().flatten().collect();
    let pod_name = env.iter().find(|e| e["name"] == "POD_NAME").unwrap_or_else(|| panic!("no POD_NAME"));
    assert_eq!(pod_name["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name");
    for var in config.split("${").skip(1).filter_map(|s| s.split('}').next()) {
        assert!(env.iter().any(|e| e["name"] == var), "the config reads ${{{var}}}, which the pod does not set");
    }
    assert!(config.contains("\"group.instance.id\" = \"${POD_NAME}\""), "{config}");
    // The API's token comes from a Secret, never from the manifest.
    assert!(config.contains("token_env = \"SLUICE_API_TOKEN\""), "{config}");
    let token = env.iter().find(|e| e["name"] == "SLUICE_API_TOKEN").unwrap_or_else(|| panic!("no SLUICE_API_TOKEN"));
    assert_eq!(token["valueFrom"]["secretKeyRef"]["key"], "token", "{token}");
    assert!(token.get("value").is_none(), "the token's value is not in the manifest");
    // Ports: the metrics listener is the named port the probes and the
    // Service use.
    let listen = config
        .lines()
        .find_map(|l| l.strip_prefix("listen = "))
        .and_then(|v| v.split('"').nth(1))
        .unwrap_or_else(|| panic!("no metrics.listen"));
    let port: u64 = listen.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(0);
    assert_eq!(container["ports"][0]["name"], "metrics");
    assert_eq!(container["ports"][0]["containerPort"].as_u64(), Some(port));
    assert!(listen.starts_with("0.0.0.0:"), "the kubelet probes the pod's address: {listen}");
    assert_eq!(str_at(container, "/readinessProbe/httpGet/path"), "/ready");
    assert_eq!(str_at(container, "/livenessProbe/httpGet/path"), "/health");
    assert_eq!(str_at(container, "/readinessProbe/httpGet/port"), "metrics");
    assert_eq!(str_at(container, "/livenessProbe/httpGet/port"), "metrics");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
    assert_eq!(service["spec"]["clusterIP"], "None");
    assert_eq!(set["spec"]["serviceName"], service["metadata"]["name"]);
    assert_eq!(set["spec"]["selector"]["matchLabels"], set["spec"]["template"]["metadata"]["labels"]);
    // The pod runs as the image's user.
    assert_eq!(pod["securityContext"]["runAsUser"].as_u64(), Some(image_uid()));
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    // Kubernetes waits longer than sluice drains.
    let grace_secs = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(0);
    let shutdown = config
        .lines()
        .find_map(|l| l.strip_prefix("grace = "))
        .and_then(|v| v.split('"').nth(1))
        .map(|g| sluice_guest::duration::parse(g).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or(sluice::config::ShutdownConfig::default().grace);
    assert!(
        grace_secs > shutdown.as_secs() + 5,
        "terminationGracePeriodSeconds {grace_secs} vs shutdown.grace {shutdown:?}"
    );

    // The binary with this config: it loads, the pod's name becomes the
    // member id, and the probe paths answer on the metrics port.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let plugins = plugins_as_installed(dir.path());
    let metrics_port = sluice_e2e::kafka::free_port();
    let local = config
        .replace("/usr/lib/sluice/plugins", &plugins.display().to_string())
        .replace(state_dir, &dir.path().join("state").display().to_string())
        .replace(listen, &format!("127.0.0.1:{metrics_port}"));
    let copy = dir.path().join("sluice.toml");
    std::fs::write(&copy, local).unwrap_or_else(|e| panic!("{e}"));
    let closed = format!("127.0.0.1:{}", sluice_e2e::kafka::free_port());
    let sluice = |args: &[&str]| {
        let mut c = Command::new(sluice_bin!());
        c.args(args)
            .arg("-c")
            .arg(&copy)
            .env("POD_NAME", "sluice-0")
            .env("SLUICE_API_TOKEN", "a-token-of-the-deploy-suite")
            .env("SLUICE_BROKERS", &closed)
            .env("SLUICE_LOG", "info")
            .env("XDG_CACHE_HOME", std::env::temp_dir().join("sluice-e2e-cache"));
        c
    };
    let out = sluice(&["check"]).output().unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("group.instance.id = sluice-0") && said.contains("session.timeout.ms = 30000"), "{said}");
    let log = std::fs::File::create(dir.path().join("run.log")).unwrap_or_else(|e| panic!("{e}"));
    let mut child = sluice(&["run"]).stdout(Stdio::null()).stderr(log).spawn().unwrap_or_else(|e| panic!("{e}"));
    let log = || std::fs::read_to_string(dir.path().join("run.log")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut health = String::new();
    while !health.contains(" 200 OK") {
        assert!(
            Instant::now() < deadline,
            "no /health on {metrics_port}: {health}\n{}\n{}",
            log(),
            std::fs::read_to_string(&copy).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
        health = sluice_e2e::get(metrics_port as u16, "/health");
    }
    // No broker: joined to nothing, so not ready, and says so.
    let ready = sluice_e2e::get(metrics_port as u16, "/ready");
    assert!(ready.contains(" 503 "), "{ready}");
    // SIGTERM while it waits for the brokers: gone inside the pod's grace
    // period. (A broker look-up blocks for up to 10 s, as long as
    // shutdown.grace, so the exit may be the grace's 130; nothing was read,
    // so nothing is owed either way.)
    let stopped = Instant::now();
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let status = loop {
        if let Some(status) = child.try_wait().ok().flatten() {
            break status;
        }
        assert!(stopped.elapsed() < Duration::from_secs(grace_secs), "still running {grace_secs}s after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(matches!(status.code(), Some(0 | 130)), "{status}: {}", log());
    println!(
        "StatefulSet: args, mounts, ports {port}, probes, user {}, grace {grace_secs}s > {shutdown:?} agree; /health 200, \
         /ready 503 without a broker; SIGTERM to exit {:?}",
        image_uid(),
        stopped.elapsed()
    );
}

/// A podman image removed at the end of the test, pass or fail.
struct Image(String);

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("podman").args(["rmi", "--force", &self.0]).output();
    }
}

#[test]
fn the_container_image_holds_every_library_and_runs_as_its_user() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let plugins = plugins_as_installed(dir.path());
    let tag = format!("localhost/sluice:test-{}", std::process::id());
    let image = Image(tag.clone());
    let out = dir.path().join("image");
    let built = Command::new(workspace_root().join("deploy/container/build"))
        .arg(sluice_bin!())
        .arg(&plugins)
        .arg(&out)
        .arg(&tag)
        .output()
        .unwrap_or_else(|e| panic!("deploy/container/build: {e}"));
    assert!(built.status.success(), "deploy/container/build: {}", String::from_utf8_lossy(&built.stderr));
    // The image's settings, as podman sees them.
    let inspect =
        Command::new("podman").args(["image", "inspect", &image.0]).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(inspect.status.success(), "{}", String::from_utf8_lossy(&inspect.stderr));
    let inspected: Value = serde_json::from_slice(&inspect.stdout).unwrap_or_else(|e| panic!("{e}"));
    let cfg = &inspected[0]["Config"];
    let uid = image_uid();
    assert_eq!(cfg["User"], format!("{uid}:{uid}"));
    assert_eq!(cfg["Entrypoint"], serde_json::json!(["/usr/local/bin/sluice"]));
    assert_eq!(cfg["Cmd"], serde_json::json!(["run", "-c", "/etc/sluice/sluice.toml"]));
    assert!(cfg["Volumes"].get("/var/lib/sluice").is_some(), "{cfg}");
    assert!(
        cfg["Env"].as_array().is_some_and(|e| e.iter().any(|v| v == "XDG_CACHE_HOME=/var/lib/sluice/cache")),
        "{cfg}"
    );
    // The StatefulSet runs what the image holds.
    let (_, _, set) = manifest();
    let container = &set["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["args"], cfg["Cmd"]);
    assert!(
        container["volumeMounts"].as_array().is_some_and(|m| m.iter().any(|m| m["mountPath"] == "/var/lib/sluice"))
    );

    // The root filesystem, unpacked: `chroot` runs the binary from it as
    // the image's user, so every library it links is in the image.
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("{e}"));
    let untar = Command::new("tar")
        .arg("-xf")
        .arg(out.join("rootfs.tar"))
        .arg("-C")
        .arg(&root)
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(untar.success());
    let in_image = |args: &[&str], env: &[(&str, &str)]| {
        let out = Command::new("chroot")
            .arg(format!("--userspec={uid}:{uid}"))
            .arg(&root)
            .args(["/usr/bin/env", "-i", "XDG_CACHE_HOME=/var/lib/sluice/cache"])
            .args(env.iter().map(|(k, v)| format!("{k}={v}")))
            .arg("/usr/local/bin/sluice")
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("chroot: {e}"));
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, version) = in_image(&["--version"], &[]);
    let host = Command::new(sluice_bin!()).arg("--version").output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(code, 0, "{version}");
    assert_eq!(version.trim().rsplit(' ').next(), String::from_utf8_lossy(&host.stdout).trim().rsplit(' ').next());
    // `check --connect` of the image's own config against a real broker:
    // the plugins load, TLS-capable librdkafka links, the store opens on
    // the volume as the non-root user.
    let broker = sluice_e2e::kafka::Broker::start(sluice_e2e::kafka::Storage::Memory);
    sluice_e2e::kafka::create_topic(&broker.brokers(), "logs", 2);
    sluice_e2e::kafka::create_topic(&broker.brokers(), "logs-parsed", 2);
    // Without its API token the image's config refuses to start, naming
    // the key: the listener is on 0.0.0.0 and the API is on.
    let (code, said) = in_image(
        &["check", "-c", "/etc/sluice/sluice.toml"],
        &[("POD_NAME", "sluice-0"), ("SLUICE_BROKERS", &broker.brokers())],
    );
    assert_ne!(code, 0, "{said}");
    assert!(said.contains("api.token_env") && said.contains("SLUICE_API_TOKEN"), "{said}");
    let (code, said) = in_image(
        &["check", "--connect", "-c", "/etc/sluice/sluice.toml"],
        &[
            ("POD_NAME", "sluice-0"),
            ("SLUICE_BROKERS", &broker.brokers()),
            ("SLUICE_API_TOKEN", "a-token-of-the-deploy-suite"),
        ],
    );
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("plugin: json@") && said.contains("plugin: ts-window@"), "{said}");
    assert!(said.contains("group.instance.id = sluice-0"), "{said}");
    assert!(said.contains("connect: source brokers") && said.contains("connect: sink kafka"), "{said}");
    assert_eq!(said.matches(": ok (").count(), 2, "{said}");
    // It wrote only to its volume.
    let state = std::fs::metadata(root.join("var/lib/sluice/state")).unwrap_or_else(|e| panic!("state: {e}"));
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&state) as u64, uid);
    assert_eq!(std::fs::read_dir(root.join("tmp")).map(|d| d.count()).unwrap_or(1), 0, "nothing in /tmp");
    let size = std::fs::metadata(out.join("rootfs.tar")).map(|m| m.len()).unwrap_or(0);
    println!("image {tag}: user {uid}, rootfs {} MiB; sluice --version and check --connect ran in it", size >> 20);
}
