//! A plugin that misbehaves on purpose. Its config names the attack; the
//! attack fires only on records whose payload contains `POISON`, so tests can
//! check that the other records of the same batch come through untouched.
//! Every other record is echoed as `{"line": ...}`.

use serde::Deserialize;
use sluice_guest::{Event, Outcome, Plugin, Record, export_plugin};

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "kebab-case")]
enum Attack {
    /// Spin forever: the per-batch time limit must stop it.
    InfiniteLoop,
    /// Allocate until the memory limit: the host must refuse to grow.
    MemoryBomb,
    /// Recurse without end: wasm's stack guard must trap.
    DeepRecursion,
    /// Panic (a trap) in the middle of the batch.
    Trap,
    /// Return one outcome too few for a batch holding a poison record.
    FewerOutcomes,
    /// Return one outcome too many for a batch holding a poison record.
    MoreOutcomes,
    /// Read a host file through WASI: no directory is granted.
    ReadFile,
    /// Open a TCP connection through WASI: no network is granted.
    Connect,
    /// Read an environment variable: none is granted.
    ReadEnv,
    /// Refuse the config at init.
    RefuseInit,
    /// Output contract: a body that is not JSON at all.
    BodyNotJson,
    /// Output contract: a JSON array where an object belongs.
    BodyArray,
    /// Output contract: a body that is not UTF-8.
    BodyNotUtf8,
    /// Output contract: an empty event id (every such record a "duplicate").
    EmptyId,
    /// Output contract: an event id of a megabyte.
    HugeId,
    /// Output contract: five thousand events from one record (the limit is 1,024).
    EventFlood,
    /// Ten thousand log lines for the poison record (then a clean echo).
    LogFlood,
    /// Quote the poison record wherever a plugin can: in a log line, and in
    /// a reject reason (`REJECT`), a body that breaks the contract
    /// (`NOTJSON`) or a panic (`TRAP`): what the host must mask.
    Tattle,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hostile {
    attack: Attack,
    #[serde(skip)]
    sink: Vec<Vec<u8>>,
}

fn poisoned(r: &Record) -> bool {
    r.payload.windows(6).any(|w| w == b"POISON")
}

fn echo(r: &Record) -> Outcome {
    Outcome::emit_json(&serde_json::json!({ "line": String::from_utf8_lossy(r.payload) }))
}

#[inline(never)]
#[allow(unconditional_recursion)] // the attack
fn recurse(depth: u64, acc: &mut [u64; 16]) -> u64 {
    acc[(depth % 16) as usize] = acc[(depth % 16) as usize].wrapping_add(depth);
    let mut local = *acc;
    local[0] = recurse(depth + 1, &mut local);
    std::hint::black_box(local[0])
}

impl Hostile {
    fn attack(&mut self, r: &Record) -> Outcome {
        match self.attack {
            Attack::InfiniteLoop => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            Attack::MemoryBomb => loop {
                self.sink.push(vec![7u8; 1 << 20]);
                std::hint::black_box(&self.sink);
            },
            Attack::DeepRecursion => {
                let mut acc = [0u64; 16];
                Outcome::drop(format!("{}", recurse(0, &mut acc)))
            }
            Attack::Trap => panic!("hostile plugin: poison record at offset {:?}", r.position),
            Attack::ReadFile => match std::fs::read_to_string("/etc/passwd") {
                Ok(s) => Outcome::emit_json(&serde_json::json!({ "stolen": s })),
                Err(e) => panic!("read /etc/passwd denied: {e}"),
            },
            Attack::Connect => match std::net::TcpStream::connect("127.0.0.1:1") {
                Ok(_) => Outcome::emit_json(&serde_json::json!({ "connected": true })),
                Err(e) => panic!("connect 127.0.0.1:1 denied: {e}"),
            },
            Attack::ReadEnv => match std::env::var("HOME") {
                Ok(v) => Outcome::emit_json(&serde_json::json!({ "home": v })),
                Err(e) => panic!("env HOME denied: {e}"),
            },
            Attack::BodyNotJson => Outcome::emit(Event::new(b"this is not json".to_vec())),
            Attack::BodyArray => Outcome::emit(Event::new(b"[1,2,3]".to_vec())),
            Attack::BodyNotUtf8 => Outcome::emit(Event::new(b"{\"line\":\"\xff\xfe\"}".to_vec())),
            Attack::EmptyId => match echo(r) {
                Outcome::Emit(mut events) => {
                    events.iter_mut().for_each(|e| e.id = Some(String::new()));
                    Outcome::Emit(events)
                }
                other => other,
            },
            Attack::HugeId => Outcome::emit(Event::new(b"{}".to_vec()).with_id("i".repeat(1 << 20))),
            Attack::EventFlood => Outcome::Emit(vec![Event::new(b"{}".to_vec()); 5_000]),
            Attack::LogFlood => {
                for i in 0..10_000 {
                    sluice_guest::log(sluice_guest::Level::Warn, &format!("flood line {i}"));
                }
                echo(r)
            }
            Attack::Tattle => {
                let text = String::from_utf8_lossy(r.payload).into_owned();
                sluice_guest::log(sluice_guest::Level::Warn, &format!("tattle: {text}"));
                if text.contains("REJECT") {
                    Outcome::reject(format!("tattle refuses {text}"))
                } else if text.contains("NOTJSON") {
                    Outcome::emit(Event::new(format!("not json: {text}").into_bytes()))
                } else if text.contains("TRAP") {
                    panic!("tattle cannot handle {text}")
                } else {
                    echo(r)
                }
            }
            Attack::FewerOutcomes | Attack::MoreOutcomes | Attack::RefuseInit => echo(r),
        }
    }
}

impl Plugin for Hostile {
    fn setup(&mut self) -> Result<(), String> {
        if self.attack == Attack::RefuseInit {
            return Err("attack: refuse-init refuses every config (this is the test)".into());
        }
        Ok(())
    }

    fn process(&mut self, record: &Record) -> Outcome {
        if poisoned(record) { self.attack(record) } else { echo(record) }
    }

    fn process_batch(&mut self, batch: &[Record]) -> Vec<Outcome> {
        let mut out: Vec<Outcome> = batch.iter().map(|r| self.process(r)).collect();
        if batch.iter().any(poisoned) {
            match self.attack {
                Attack::FewerOutcomes => {
                    out.pop();
                }
                Attack::MoreOutcomes => out.push(Outcome::drop("extra")),
                _ => {}
            }
        }
        out
    }
}

export_plugin!(Hostile);
