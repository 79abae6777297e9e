//! A file pipeline that runs while a tool watches it (`sluice top`, `sluice
//! tap`, the status page): `input.log` → `json` → `out.ndjson`, metrics on
//! a free port, and a writer that keeps the file growing (about 2,000 lines
//! a second) so that rates are not zero.

use std::io::Write;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Watched {
    pub dir: tempfile::TempDir,
    /// The metrics listener's port.
    pub port: u16,
    pipeline: Child,
    stop: Arc<AtomicBool>,
    written: Arc<AtomicUsize>,
    writer: Option<JoinHandle<()>>,
}

impl Watched {
    /// `first` lines `line(0)…`, the pipeline `name` started on them
    /// (`sluice` is the suite's `sluice_bin!()`), then the writer; `extra`
    /// is TOML added to the config.
    pub fn start(
        sluice: &Path,
        name: &str,
        first: usize,
        line: impl Fn(usize) -> String + Send + 'static,
        extra: &str,
    ) -> Watched {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let input = dir.path().join("input.log");
        std::fs::write(&input, (0..first).map(&line).collect::<String>()).unwrap_or_else(|e| panic!("{e}"));
        let port = crate::kafka::free_port();
        // The tools read the API (`/tap`, `/status.json`): on, on loopback,
        // without a token, unless `extra` says otherwise.
        let api = if extra.contains("[api]") { "" } else { "[api]\nenabled = true\n" };
        // Named sinks in `extra` replace the one file sink.
        let sink = if extra.contains("[[sinks]]") { "" } else { "[sink]\ntype = \"file\"\npath = \"out.ndjson\"\n" };
        let cfg = format!(
            "[pipeline]\nname = \"{name}\"\nstate_dir = \"state\"\nbatch_size = 100\n\n\
             [source]\ntype = \"file\"\npaths = [\"input.log\"]\nfollow = true\npoll_interval = \"50ms\"\n\n{}\n\
             {sink}\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n{api}{extra}\n",
            crate::json_chain_toml(true, None)
        );
        std::fs::write(dir.path().join("sluice.toml"), cfg).unwrap_or_else(|e| panic!("{e}"));
        let pipeline = crate::running_pipeline(sluice, dir.path(), port);
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicUsize::new(first));
        let writer = {
            let (stop, written) = (stop.clone(), written.clone());
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new().append(true).open(input).unwrap_or_else(|e| panic!("{e}"));
                while !stop.load(Ordering::SeqCst) {
                    let i = written.load(Ordering::SeqCst);
                    f.write_all((i..i + 100).map(&line).collect::<String>().as_bytes())
                        .unwrap_or_else(|e| panic!("{e}"));
                    written.store(i + 100, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        };
        Watched { dir, port, pipeline, stop, written, writer: Some(writer) }
    }

    /// Stop growing the file; how many lines it holds.
    pub fn stop_writing(&mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        self.written.load(Ordering::SeqCst)
    }

    /// SIGTERM the pipeline; whether it ended cleanly.
    pub fn stop(mut self) -> bool {
        self.stop_writing();
        let _ = std::process::Command::new("kill").args(["-TERM", &self.pipeline.id().to_string()]).status();
        self.pipeline.wait().is_ok_and(|c| c.success())
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.stop_writing();
        let _ = self.pipeline.kill();
        let _ = self.pipeline.wait();
    }
}
