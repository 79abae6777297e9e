//! A classifier that misbehaves as its config says, for the answers it is
//! given while `fault_on_status` matches (every status when unset); on
//! other answers it reads a 2xx as accepted. Each fault must come out
//! systemic: the records wait, none is quarantined.

use sluice_classifier::{Classifier, Fate, Reply, Request, Response, export_classifier};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hostile {
    /// `trap`, `spin`, `grow` (memory), `short` (one fate too few),
    /// `row-outside`, `reject-all` (blames every record, whatever the status).
    mode: String,
    #[serde(default)]
    fault_on_status: Option<u16>,
}

impl Classifier for Hostile {
    fn setup(&mut self) -> Result<(), String> {
        match self.mode.as_str() {
            "trap" | "spin" | "grow" | "short" | "row-outside" | "reject-all" => Ok(()),
            other => Err(format!("mode: {other:?} is not a mode")),
        }
    }

    fn classify(&mut self, request: &Request, response: &Response) -> Reply {
        if self.fault_on_status.is_some_and(|s| s != response.status) {
            return if (200..300).contains(&response.status) {
                Reply::All(Fate::Accepted)
            } else {
                Reply::All(Fate::Systemic(response.excerpt()))
            };
        }
        match self.mode.as_str() {
            "trap" => panic!("the classifier panics on purpose"),
            "spin" => loop {
                std::hint::black_box(request.len());
            },
            "grow" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "short" => Reply::Each(vec![Fate::Accepted; request.len().saturating_sub(1)]),
            "row-outside" => Reply::BadRow { row: request.len() + 3, reason: "a row that was never sent".into() },
            _ => Reply::All(Fate::Reject(format!("blamed by the classifier: {}", response.excerpt()))),
        }
    }
}

export_classifier!(Hostile);
