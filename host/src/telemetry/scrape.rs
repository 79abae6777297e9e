//! sluice's own `/metrics` text read back, and what two readings a second
//! apart say per partition: what `sluice top` shows. It reads the endpoint
//! an operator's Prometheus reads, so the view and the dashboards agree and
//! a running pipeline needs nothing more than `[metrics] listen`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

/// One reading of the metrics text.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scrape {
    series: Vec<Series>,
}

#[derive(Debug, Clone, PartialEq)]
struct Series {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ScrapeError {
    #[error("cannot reach http://{addr}/metrics: {source}")]
    Connect { addr: SocketAddr, source: std::io::Error },
    #[error("http://{addr}/metrics answered {status}")]
    Status { addr: SocketAddr, status: String },
}

/// `GET /metrics` of the endpoint at `addr` (HTTP/1.0, plain: it is on
/// loopback, and this keeps `top` free of an HTTP client runtime).
pub(crate) fn fetch(addr: SocketAddr, timeout: Duration) -> Result<Scrape, ScrapeError> {
    let io = |source| ScrapeError::Connect { addr, source };
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
    s.set_read_timeout(Some(timeout)).map_err(io)?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: sluice\r\n\r\n").map_err(io)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(io)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200") {
        return Err(ScrapeError::Status { addr, status: status.to_string() });
    }
    Ok(parse(body))
}

/// The Prometheus text format: `name{label="value",…} number`, comments
/// skipped; a line that does not parse is skipped too (a view, not a
/// validator).
pub(crate) fn parse(text: &str) -> Scrape {
    Scrape { series: text.lines().filter(|l| !l.starts_with('#')).filter_map(series).collect() }
}

fn series(line: &str) -> Option<Series> {
    let line = line.trim();
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        loop {
            // key="value" pairs, separated by commas, up to the brace.
            let (i, c) = chars.next()?;
            match c {
                '}' => {
                    rest = &inner[i + 1..];
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            '"' => break,
                            other => value.push(other),
                        }
                    }
                    labels.push((std::mem::take(&mut key), value));
                }
                other => key.push(other),
            }
        }
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Series { name, labels: named_by_pipeline(labels), value })
}

/// With several pipelines in one process (`telemetry::labels`), each
/// partition and sink is shown as `pipeline:name`: two pipelines that read
/// one topic with two group ids have the same partition names, and every
/// view keyed by partition or sink (`top`, the status page) keeps them
/// apart without knowing of pipelines.
fn named_by_pipeline(mut labels: Vec<(String, String)>) -> Vec<(String, String)> {
    let Some(at) = labels.iter().position(|(k, _)| k == "pipeline") else { return labels };
    let (_, pipeline) = labels.remove(at);
    for (k, v) in &mut labels {
        if k == "partition" || k == "sink" || k == "route" {
            *v = format!("{pipeline}:{v}");
        }
    }
    labels.push(("pipeline".into(), pipeline));
    labels
}

impl Scrape {
    /// The sum of `name` over the series whose labels include `with`, or
    /// none when there is no such series.
    pub(crate) fn get(&self, name: &str, with: &[(&str, &str)]) -> Option<f64> {
        let mut found = None;
        for s in self.series.iter().filter(|s| s.name == name) {
            if with.iter().all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v)) {
                *found.get_or_insert(0.0) += s.value;
            }
        }
        found
    }

    /// The values of `label` that `name` has series for.
    pub(crate) fn label_values(&self, name: &str, label: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .series
            .iter()
            .filter(|s| s.name == name)
            .filter_map(|s| s.labels.iter().find(|(k, _)| k == label).map(|(_, v)| v.clone()))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// One partition between two readings.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PartitionView {
    pub name: String,
    /// Records per second taken in, and finished by each door.
    pub in_rate: f64,
    pub delivered_rate: f64,
    pub duplicate_rate: f64,
    pub quarantined_rate: f64,
    pub dropped_rate: f64,
    /// As the later reading has them.
    pub gauges: Gauges,
}

impl PartitionView {
    /// The word for its state, the worst first.
    pub(crate) fn state(&self) -> &'static str {
        let g = &self.gauges;
        if g.stalled {
            "STALLED"
        } else if g.late {
            "late"
        } else if g.backpressured {
            "backpressured"
        } else if self.in_rate > 0.0 || g.in_flight > 0.0 {
            "flowing"
        } else {
            "idle"
        }
    }
}

/// What two readings `seconds` apart say.
#[derive(Debug, Clone, Default)]
pub(crate) struct View {
    pub partitions: Vec<PartitionView>,
    pub total: PartitionView,
    /// Per sink: `closed`, `open` or `probing`.
    pub breakers: BTreeMap<String, &'static str>,
}

/// One partition in one reading: its counters since the start, and its
/// gauges. What the status page keeps a second at a time, and what two
/// readings make rates of.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct Reading {
    /// Records taken in, and finished by each door.
    pub read: f64,
    pub delivered: f64,
    pub duplicate: f64,
    pub quarantined: f64,
    pub dropped: f64,
    /// Beside the counters in the status page's JSON.
    #[serde(flatten)]
    pub gauges: Gauges,
}

/// What a partition's gauges say at one reading.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct Gauges {
    /// Kafka: the high watermark minus the committed offset.
    pub lag: Option<f64>,
    /// What the source holds unread (Kafka: librdkafka's lag in records;
    /// a file: its unread bytes).
    pub behind: Option<f64>,
    /// Age of the oldest record not yet finished, seconds.
    pub oldest_age: f64,
    pub in_flight: f64,
    pub backpressured: bool,
    pub stalled: bool,
    pub late: bool,
}

impl Gauges {
    /// The whole pipeline's: sums, the oldest age, any flag.
    fn total<'a>(all: impl Iterator<Item = &'a Gauges> + Clone) -> Gauges {
        let some_sum = |f: fn(&Gauges) -> Option<f64>| {
            let v: Vec<f64> = all.clone().filter_map(f).collect();
            (!v.is_empty()).then(|| v.iter().sum())
        };
        Gauges {
            lag: some_sum(|g| g.lag),
            behind: some_sum(|g| g.behind),
            oldest_age: all.clone().map(|g| g.oldest_age).fold(0.0, f64::max),
            in_flight: all.clone().map(|g| g.in_flight).sum(),
            backpressured: all.clone().any(|g| g.backpressured),
            stalled: all.clone().any(|g| g.stalled),
            late: all.clone().any(|g| g.late),
        }
    }
}

/// Every partition of a reading, by name.
pub(crate) fn readings(s: &Scrape) -> BTreeMap<String, Reading> {
    let mut names = s.label_values("sluice_records_in_total", "partition");
    for gauge in ["sluice_consumer_lag", "sluice_batches_in_flight", "sluice_source_behind"] {
        names.extend(s.label_values(gauge, "partition"));
    }
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let p = [("partition", name.as_str())];
            let door = |d: &str| {
                s.get("sluice_records_out_total", &[("partition", name.as_str()), ("door", d)]).unwrap_or(0.0)
            };
            let flag = |gauge: &str| s.get(gauge, &p).is_some_and(|v| v > 0.0);
            let reading = Reading {
                read: s.get("sluice_records_in_total", &p).unwrap_or(0.0),
                delivered: door("delivered"),
                duplicate: door("duplicate"),
                quarantined: door("quarantined"),
                dropped: door("dropped"),
                gauges: Gauges {
                    lag: s.get("sluice_consumer_lag", &p),
                    behind: s.get("sluice_source_behind", &p),
                    oldest_age: s.get("sluice_oldest_unfinished_age_seconds", &p).unwrap_or(0.0),
                    in_flight: s.get("sluice_batches_in_flight", &p).unwrap_or(0.0),
                    backpressured: flag("sluice_partition_backpressured"),
                    stalled: flag("sluice_partition_stalled"),
                    late: flag("sluice_partition_late"),
                },
            };
            (name, reading)
        })
        .collect()
}

/// Each sink's breaker in a reading: 0 closed, 1 open, 2 probing.
pub(crate) fn breaker_states(s: &Scrape) -> BTreeMap<String, u8> {
    s.label_values("sluice_breaker_state", "sink")
        .into_iter()
        .map(|sink| {
            let state = s.get("sluice_breaker_state", &[("sink", sink.as_str())]).unwrap_or(0.0) as u8;
            (sink, state)
        })
        .collect()
}

/// The routes in force, as `sluice check` draws them
/// (`sluice_route_info{route}`), in order: what `top` shows under the
/// breakers.
pub(crate) fn routes(s: &Scrape) -> Vec<String> {
    let label = |series: &Series, key: &str| series.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let mut found: Vec<(String, u64, String)> = s
        .series
        .iter()
        .filter(|series| series.name == "sluice_route_info" && series.value > 0.0)
        .filter_map(|series| {
            let at = label(series, "at").and_then(|a| a.parse().ok()).unwrap_or(u64::MAX);
            Some((label(series, "pipeline").unwrap_or_default(), at, label(series, "route")?))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, _, route)| route).collect()
}

pub(crate) fn view(before: &Scrape, now: &Scrape, seconds: f64) -> View {
    let earlier = readings(before);
    let partitions: Vec<PartitionView> = readings(now)
        .into_iter()
        .map(|(name, r)| {
            let was = earlier.get(&name).cloned().unwrap_or_default();
            // A counter that went down: the process restarted; no rate yet.
            let rate = |a: f64, b: f64| if seconds > 0.0 && b >= a { (b - a) / seconds } else { 0.0 };
            PartitionView {
                in_rate: rate(was.read, r.read),
                delivered_rate: rate(was.delivered, r.delivered),
                duplicate_rate: rate(was.duplicate, r.duplicate),
                quarantined_rate: rate(was.quarantined, r.quarantined),
                dropped_rate: rate(was.dropped, r.dropped),
                gauges: r.gauges,
                name,
            }
        })
        .collect();
    let sum = |f: fn(&PartitionView) -> f64| partitions.iter().map(f).sum::<f64>();
    let total = PartitionView {
        name: "total".into(),
        in_rate: sum(|p| p.in_rate),
        delivered_rate: sum(|p| p.delivered_rate),
        duplicate_rate: sum(|p| p.duplicate_rate),
        quarantined_rate: sum(|p| p.quarantined_rate),
        dropped_rate: sum(|p| p.dropped_rate),
        gauges: Gauges::total(partitions.iter().map(|p| &p.gauges)),
    };
    let breakers = breaker_states(now)
        .into_iter()
        .map(|(sink, state)| (sink, ["closed", "open", "probing"].get(usize::from(state)).copied().unwrap_or("closed")))
        .collect();
    View { partitions, total, breakers }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = r#"# TYPE sluice_records_in_total counter
sluice_records_in_total{partition="/var/log/a,b.log"} 1000
sluice_records_in_total{partition="t/0"} 50
sluice_records_out_total{partition="/var/log/a,b.log",door="delivered"} 900
sluice_records_out_total{partition="/var/log/a,b.log",door="quarantined"} 10
sluice_breaker_state{sink="http://x/ingest"} 0
"#;

    const NOW: &str = r#"# TYPE sluice_records_in_total counter
sluice_records_in_total{partition="/var/log/a,b.log"} 3000
sluice_records_in_total{partition="t/0"} 50
sluice_records_out_total{partition="/var/log/a,b.log",door="delivered"} 2700
sluice_records_out_total{partition="/var/log/a,b.log",door="quarantined"} 30
sluice_consumer_lag{partition="t/0"} 12345
sluice_source_behind{partition="/var/log/a,b.log"} 4096
sluice_batches_in_flight{partition="/var/log/a,b.log"} 2
sluice_partition_backpressured{partition="/var/log/a,b.log"} 1
sluice_partition_stalled{partition="t/0"} 1
sluice_oldest_unfinished_age_seconds{partition="t/0"} 301.5
sluice_breaker_state{sink="http://x/ingest"} 1
sluice_commit_latency_seconds_bucket{partition="t/0",le="+Inf"} 7
odd{label="with \"quotes\" and \\ backslash"} 1
"#;

    #[test]
    fn readings_parse_with_commas_and_escapes_in_labels() {
        let s = parse(NOW);
        assert_eq!(s.get("sluice_records_in_total", &[("partition", "/var/log/a,b.log")]), Some(3000.0));
        assert_eq!(s.get("sluice_records_in_total", &[]), Some(3050.0), "a sum over every partition");
        assert_eq!(s.get("sluice_commit_latency_seconds_bucket", &[("le", "+Inf")]), Some(7.0));
        assert_eq!(s.get("odd", &[("label", r#"with "quotes" and \ backslash"#)]), Some(1.0));
        assert_eq!(s.get("absent", &[]), None);
        assert!(parse("garbage without a value\n{broken 1\n").series.is_empty());
    }

    #[test]
    fn two_readings_give_rates_lag_and_states_per_partition_and_in_total() {
        let v = view(&parse(BEFORE), &parse(NOW), 2.0);
        let names: Vec<&str> = v.partitions.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["/var/log/a,b.log", "t/0"]);
        let file = &v.partitions[0];
        assert_eq!((file.in_rate, file.delivered_rate, file.quarantined_rate), (1000.0, 900.0, 10.0));
        assert_eq!((file.gauges.behind, file.gauges.in_flight, file.state()), (Some(4096.0), 2.0, "backpressured"));
        let kafka = &v.partitions[1];
        assert_eq!(
            (kafka.in_rate, kafka.gauges.lag, kafka.gauges.oldest_age, kafka.state()),
            (0.0, Some(12345.0), 301.5, "STALLED")
        );
        assert_eq!((v.total.in_rate, v.total.gauges.lag, v.total.state()), (1000.0, Some(12345.0), "STALLED"));
        assert_eq!(v.breakers.get("http://x/ingest"), Some(&"open"));
        // A restarted process: its counters start again, no negative rate.
        let again = view(&parse(NOW), &parse(BEFORE), 1.0);
        assert_eq!(again.partitions[0].in_rate, 0.0);
    }

    /// Two pipelines on one topic: each partition and sink is read under
    /// its pipeline's name, apart from the other's.
    #[test]
    fn several_pipelines_are_read_apart_as_pipeline_colon_name() {
        let s = parse(
            "sluice_records_in_total{partition=\"t/0\",pipeline=\"a\"} 5\n\
             sluice_records_in_total{partition=\"t/0\",pipeline=\"b\"} 7\n\
             sluice_breaker_state{sink=\"archive\",pipeline=\"b\"} 1\n\
             sluice_records_in_total{partition=\"one.log\"} 3\n",
        );
        let r = readings(&s);
        assert_eq!(r.keys().collect::<Vec<_>>(), ["a:t/0", "b:t/0", "one.log"]);
        assert_eq!((r["a:t/0"].read, r["b:t/0"].read), (5.0, 7.0));
        assert_eq!(breaker_states(&s).get("b:archive"), Some(&1));
        assert_eq!(s.get("sluice_records_in_total", &[("pipeline", "b")]), Some(7.0));
        // Routes in their order, each pipeline's apart; one no longer in
        // force (0) is not shown.
        let r = parse(
            "sluice_route_info{at=\"1\",route=\"the rest → x\",pipeline=\"b\"} 1\n\
             sluice_route_info{at=\"0\",route=\"route 0: /n exists → y\",pipeline=\"b\"} 1\n\
             sluice_route_info{at=\"0\",route=\"route 0: /old = \\\"1\\\" → y\",pipeline=\"a\"} 0\n",
        );
        assert_eq!(routes(&r), ["b:route 0: /n exists → y", "b:the rest → x"]);
    }
}
