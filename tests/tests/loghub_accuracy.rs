//! The `pattern` plugin, with the configs shipped in `examples/loghub/`,
//! against the Loghub ground truth: every field named by a column of the
//! `*_structured.csv` (LineId, EventId and EventTemplate aside) must equal
//! the truth on at least 99% of lines, per file. Lines that the plugin
//! rejects count as wrong on every field.

use sluice::plugin::chain::build_chain;
use sluice::plugin::engine::Runtime;
use sluice::record::Record;
use sluice::verdict::Verdict;
use sluice_e2e::{example_config, spec, test_data};

const SAMPLES: &[(&str, &str)] = &[
    ("Apache", "loghub/apache.toml"),
    ("HDFS", "loghub/hdfs.toml"),
    ("Linux", "loghub/linux.toml"),
    ("OpenSSH", "loghub/openssh.toml"),
    ("Zookeeper", "loghub/zookeeper.toml"),
];

const NOT_FIELDS: &[&str] = &["LineId", "EventId", "EventTemplate"];

#[test]
fn pattern_configs_match_the_loghub_ground_truth() {
    let runtime = Runtime::new(None).unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Vec::new();
    for (name, config) in SAMPLES {
        let dir = test_data().join("loghub");
        let log = std::fs::read(dir.join(format!("{name}_2k.log"))).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut lines = sluice::source::framing::LineReader::new(&log[..]);
        let mut records = Vec::new();
        while let Some(line) = lines.next_line().unwrap_or_else(|e| panic!("{e}")) {
            records.push(Record::line(line.bytes, *name, 0, line.offset));
        }
        let mut truth = csv::Reader::from_path(dir.join(format!("{name}_2k.log_structured.csv")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let headers: Vec<String> = truth.headers().map(|h| h.iter().map(String::from).collect()).unwrap_or_default();
        let rows: Vec<csv::StringRecord> =
            truth.records().map(|r| r.unwrap_or_else(|e| panic!("{name}: {e}"))).collect();
        assert_eq!(rows.len(), records.len(), "{name}: the log and its ground truth disagree on the line count");

        let mut chain =
            build_chain(&runtime, &[spec("pattern", example_config(config))]).unwrap_or_else(|e| panic!("{e}"));
        let verdicts = chain.run(records).unwrap_or_else(|e| panic!("{e}"));
        let fields: Vec<(usize, &String)> =
            headers.iter().enumerate().filter(|(_, h)| !NOT_FIELDS.contains(&h.as_str())).collect();
        let mut wrong_lines = Vec::new();
        for (i, (verdict, row)) in verdicts.iter().zip(&rows).enumerate() {
            let body = match verdict {
                Verdict::Emit(events) if events.len() == 1 => events[0].body_json(),
                other => {
                    wrong_lines.push(format!("line {}: {other:?}", i + 1));
                    continue;
                }
            };
            let bad: Vec<String> = fields
                .iter()
                .filter(|(col, h)| body.get(h.as_str()).and_then(|v| v.as_str()).unwrap_or("") != &row[*col])
                .map(|(col, h)| format!("{h}: got {:?}, truth {:?}", body.get(h.as_str()), &row[*col]))
                .collect();
            if !bad.is_empty() {
                wrong_lines.push(format!("line {}: {}", i + 1, bad.join("; ")));
            }
        }
        let total = rows.len();
        let right = total - wrong_lines.len();
        let pct = 100.0 * right as f64 / total as f64;
        println!("loghub accuracy {name:<10} {right}/{total} lines, every field right: {pct:.2}%");
        for w in wrong_lines.iter().take(5) {
            println!("    {w}");
        }
        if pct < 99.0 {
            failures.push(format!("{name}: {pct:.2}%"));
        }
    }
    assert!(failures.is_empty(), "below 99%: {failures:?}");
}
