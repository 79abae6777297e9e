//! The http and clickhouse sinks against plain reqwest posting the same
//! bodies, in the same run.
//!
//! - *accept-all*: a local endpoint (this program re-run as a child
//!   process, so its CPU is not ours) that reads each body and answers 200.
//! - *clickhouse*: a real ClickHouse (Debian's 18.16, started here),
//!   `INSERT … FORMAT JSONEachRow` into a ReplacingMergeTree.
//!
//! The baseline posts bodies rendered before the clock starts, one request
//! at a time, and reads each answer; sluice's sink renders its bodies from
//! the events, reads each answer per event, and goes through the retry
//! driver and the breaker, also one request at a time (`concurrency = 1`).
//! Records per second per core are records over this process's CPU
//! seconds; wall-clock records per second are printed beside them.
//!
//! `cargo bench -p sluice-benches --bench sink_http`
//! (`SLUICE_BENCH_RECORDS`, default 200,000).

use std::time::Instant;

use sluice::delivery::Delivery;
use sluice::delivery::FinalAnswer;
use sluice::sink::clickhouse::ClickhouseSinkConfig;
use sluice::sink::context::SinkContext;
use sluice::sink::http::body::Framing;
use sluice::sink::http::client::HttpSink;
use sluice::sink::http::config::{HttpSinkConfig, Payload};
use sluice::sink::http::response::profile::Render;
use sluice::sink::retrying::RetryingSink;
use sluice_benches::{cpu_seconds, json_lines, now_secs};

const BATCH: usize = 1000;
const SERVER_ENV: &str = "SLUICE_BENCH_ACCEPT_ALL";

/// The child process: accept everything, as cheaply as possible.
fn serve_accept_all() {
    use http_body_util::{BodyExt, Full};
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("{e}"));
        println!("{}", listener.local_addr().map(|a| a.port()).unwrap_or(0));
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            tokio::spawn(async move {
                let service = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                    let _ = req.into_body().collect().await;
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(bytes::Bytes::new())))
                });
                let _ = http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(stream), service).await;
            });
        }
    });
}

struct Figures {
    per_core: f64,
    wall: f64,
}

fn measure(n: usize, f: impl FnOnce()) -> Figures {
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    f();
    let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    Figures { per_core: n as f64 / cpu, wall: n as f64 / wall }
}

/// Plain reqwest: the same bodies, prepared beforehand, one at a time.
fn baseline(url: &str, bodies: &[Vec<u8>], n: usize) -> Figures {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let client = reqwest::Client::new();
    measure(n, || {
        rt.block_on(async {
            for body in bodies {
                let r = client.post(url).body(body.clone()).send().await.unwrap_or_else(|e| panic!("{e}"));
                let status = r.status();
                let text = r.bytes().await.unwrap_or_default();
                assert!(status.is_success(), "baseline: HTTP {status}: {}", String::from_utf8_lossy(&text));
            }
        })
    })
}

fn through_sluice(sink: &RetryingSink, batches: &[Vec<Delivery>], n: usize) -> Figures {
    measure(n, || {
        for b in batches {
            let out = sink.deliver(b, &|| false);
            assert!(
                out.iter().all(|o| *o == Some(FinalAnswer::Accepted)),
                "sink: {:?}",
                out.iter().find(|o| **o != Some(FinalAnswer::Accepted))
            );
        }
    })
}

/// One batch's request body, as the sink frames it.
fn body(batch: &[Delivery], payload: &Payload) -> Vec<u8> {
    let f = Framing { render: Render::Ndjson, payload, index: None, labels: None };
    f.body(&batch.iter().collect::<Vec<_>>())
}

fn bodies(batches: &[Vec<Delivery>], payload: &Payload) -> Vec<Vec<u8>> {
    batches.iter().map(|b| body(b, payload)).collect()
}

/// What sluice does that the baseline does not time: rendering each body
/// from the events (the baseline's bodies are rendered before its clock
/// starts). Each body is dropped before the next, as the sink drops it
/// after its request, so the allocator reuses its pages. Printed beside
/// the ratios, so the gap can be read as rendering plus the sink's own
/// work per request.
fn rendering(batches: &[Vec<Delivery>], payload: &Payload, n: usize) -> Figures {
    measure(n, || {
        for b in batches {
            std::hint::black_box(body(b, payload));
        }
    })
}

fn report(name: &str, base: &[Figures], ours: &[Figures], render: &[Figures]) {
    let best = |v: &[Figures], f: fn(&Figures) -> f64| v.iter().map(f).fold(0.0, f64::max);
    let (bc, bw) = (best(base, |f| f.per_core), best(base, |f| f.wall));
    let (sc, sw) = (best(ours, |f| f.per_core), best(ours, |f| f.wall));
    println!("{name}:");
    println!("  plain reqwest  {bc:>12.0} rec/s per core  {bw:>10.0} rec/s wall");
    println!("  sluice sink    {sc:>12.0} rec/s per core  {sw:>10.0} rec/s wall");
    let rc = best(render, |f| f.per_core);
    println!("  rendering the bodies alone {rc:>12.0} rec/s per core");
    println!("  ratio (reqwest / sluice): {:.2}x per core, {:.2}x wall", bc / sc, bw / sw);
    // CPU seconds per million records: sluice = reqwest + rendering + the rest.
    let us = |per_core: f64| 1e6 / per_core;
    println!(
        "  CPU s per million records: reqwest {:.3}, sluice {:.3} = reqwest + rendering {:.3} + the sink's own {:.3}",
        us(bc),
        us(sc),
        us(rc),
        us(sc) - us(bc) - us(rc)
    );
}

fn main() {
    if std::env::var_os(SERVER_ENV).is_some() {
        serve_accept_all();
        return;
    }
    let n: usize = std::env::var("SLUICE_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let now = now_secs();
    let ts = now * 1_000_000_000;
    let batches: Vec<Vec<Delivery>> = json_lines(n, now)
        .chunks(BATCH)
        .enumerate()
        .map(|(c, lines)| {
            lines
                .iter()
                .enumerate()
                .map(|(i, l)| Delivery::new(format!("ev-{:010}", c * BATCH + i), Some(ts), l.as_bytes()))
                .collect()
        })
        .collect();

    // Accept-all endpoint in a child process.
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let mut child = std::process::Command::new(exe)
        .env(SERVER_ENV, "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let port = {
        use std::io::BufRead;
        let mut line = String::new();
        let out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let _ = std::io::BufReader::new(out).read_line(&mut line);
        line.trim().parse::<u16>().unwrap_or_else(|e| panic!("server port {line:?}: {e}"))
    };
    let url = format!("http://127.0.0.1:{port}/ingest");
    let plugins = sluice_benches::runtime();
    let cfg: HttpSinkConfig = toml_cfg(&format!(
        "url = \"{url}\"\n[batch]\nmax_records = {BATCH}\nmax_bytes = \"16MiB\"\n[request]\nconcurrency = 1\n"
    ));
    let sink = RetryingSink::new(
        Box::new(
            HttpSink::new(&cfg, None, SinkContext { plugins: &plugins, registry: None })
                .unwrap_or_else(|e| panic!("{e}")),
        ),
        cfg.guard.retry.clone(),
        cfg.guard.breaker.clone(),
    );
    let ready = bodies(&batches, &Payload::Envelope);
    let (mut base, mut ours, mut rend) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..2 {
        base.push(baseline(&url, &ready, n));
        ours.push(through_sluice(&sink, &batches, n));
        rend.push(rendering(&batches, &Payload::Envelope, n));
    }
    let _ = child.kill();
    let _ = child.wait();
    report(&format!("accept-all endpoint, {n} records of ~300 bytes in requests of {BATCH}"), &base, &ours, &rend);

    // ClickHouse.
    let ch = sluice_e2e::clickhouse::ClickHouse::start();
    for t in ["base", "ours"] {
        ch.query(&format!(
            "CREATE TABLE {t} (event_id String, ts DateTime, service String, level String, user UInt32, msg String) \
             ENGINE = ReplacingMergeTree ORDER BY event_id"
        ));
    }
    let ch_cfg = |table: &str| -> ClickhouseSinkConfig {
        toml_cfg(&format!(
            "url = \"{}\"\ntable = \"{table}\"\n[batch]\nmax_records = {BATCH}\nmax_bytes = \"16MiB\"\n[request]\nconcurrency = 1\n\
             [settings]\ndate_time_input_format = \"best_effort\"\n",
            ch.url()
        ))
    };
    let ours_cfg = ch_cfg("ours");
    let ch_sink = RetryingSink::new(
        Box::new(
            HttpSink::new(&ours_cfg.http(), Some(ours_cfg.name()), SinkContext { plugins: &plugins, registry: None })
                .unwrap_or_else(|e| panic!("{e}")),
        ),
        ours_cfg.guard.retry.clone(),
        ours_cfg.guard.breaker.clone(),
    );
    let row_payload = Payload::Event { id_field: "event_id".into(), timestamp_field: None };
    let rows = bodies(&batches, &row_payload);
    let base_url = ch_cfg("base").http().url;
    let (mut base, mut ours, mut rend) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..2 {
        base.push(baseline(&base_url, &rows, n));
        ours.push(through_sluice(&ch_sink, &batches, n));
        rend.push(rendering(&batches, &row_payload, n));
    }
    let count = |t: &str| ch.query(&format!("SELECT uniqExact(event_id) FROM {t}")).trim().to_string();
    assert_eq!(count("ours"), n.to_string(), "every id in the table");
    assert_eq!(count("base"), n.to_string());
    report(&format!("clickhouse 18.16, {n} rows in inserts of {BATCH}"), &base, &ours, &rend);
}

fn toml_cfg<T: serde::de::DeserializeOwned>(text: &str) -> T {
    toml::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}
