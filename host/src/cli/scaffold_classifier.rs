//! `sluice plugin new --kind classifier --lang …`: a classifier project
//! (`wit/classifier.wit`) that builds and passes its own answer cases in
//! three commands (new, build, `sluice sink classify`). As parse-plugin
//! projects (`scaffold.rs`), it is self-contained: the WIT and the SDK are
//! copied in from this binary.
//!
//! The template reads a made-up but typical answer: a 2xx whose body may
//! list refused records by position (`{"rejected":[{"index":1,"reason":
//! "…"}]}`), a 400/413/422 that names none (split), anything else the
//! backend's (systemic). An author replaces it with what their backend
//! says, and the cases with answers recorded from it.

use anyhow::Result;

use super::args::{Lang, NewArgs};
use super::scaffold::{RUST_BUILD, RUST_MANIFEST, WIT, make_executable, say_steps, write_sources};

const WIT_CLASSIFIER: &str = include_str!("../../../wit/classifier.wit");
const RUST_SDK: &str = include_str!("../../../guest-sdk/classifier/src/lib.rs");
const PY_SDK: &str = include_str!("../../../guest-sdk/python/sluice_classifier.py");
const JS_SDK: &str = include_str!("../../../guest-sdk/js/sluice-classifier.js");

/// Answer cases in the corpus format (`conformance/responses/`).
const CASES: [(&str, &str); 3] = [
    (
        "01-all-taken.json",
        r#"{
 "about": "a 2xx that lists no refused record: all accepted",
 "ids": ["a", "b", "c"],
 "response": {"status": 200, "json": {"rejected": []}},
 "expect": {"answers": ["accepted", "accepted", "accepted"]}
}
"#,
    ),
    (
        "02-one-refused-by-position.json",
        r#"{
 "about": "the backend names the second record: it alone is quarantined, with the backend's reason",
 "ids": ["a", "b", "c"],
 "response": {"status": 200, "json": {"rejected": [{"index": 1, "reason": "field level: not a number"}]}},
 "expect": {"answers": ["accepted", "reject", "accepted"], "reason": "field level"}
}
"#,
    ),
    (
        "03-unavailable-is-systemic.json",
        r#"{
 "about": "a 503 is the backend's fault: the records wait, none is quarantined",
 "ids": ["a", "b"],
 "response": {"status": 503, "body": "upstream unavailable"},
 "expect": {"systemic": true}
}
"#,
    ),
];

pub(crate) fn new(args: &NewArgs) -> Result<()> {
    let root = super::scaffold::project_root(args)?;
    let root = root.as_path();
    let write = |rel: &str, text: &str| super::scaffold::write_file(root, rel, text);
    write("wit/plugin.wit", WIT)?;
    write("wit/classifier.wit", WIT_CLASSIFIER)?;
    for (file, text) in CASES {
        write(&format!("cases/{file}"), text)?;
    }
    let name = &args.name;
    let snake = name.replace('-', "_");
    let wasm = match args.lang {
        Lang::Rust => {
            write("sluice-classifier/src/lib.rs", &RUST_SDK.replace("\"../../wit\"", "\"../wit\""))?;
            write("sluice-classifier/Cargo.toml", RUST_SDK_MANIFEST)?;
            write("sluice-guest-common/src/lib.rs", super::scaffold::RUST_COMMON)?;
            write("sluice-guest-common/Cargo.toml", super::scaffold::RUST_COMMON_MANIFEST)?;
            write("Cargo.toml", &RUST_MANIFEST.replace("{name}", name).replace("{sdk}", "sluice-classifier"))?;
            write("src/lib.rs", RUST_CLASSIFIER)?;
            write("build.sh", RUST_BUILD)?;
            format!("target/wasm32-wasip2/release/{snake}.wasm")
        }
        Lang::Python => write_sources(&write, root, args.lang, "classifier", name, PY_SDK, PY_CLASSIFIER)?,
        Lang::Js => write_sources(&write, root, args.lang, "classifier", name, JS_SDK, JS_CLASSIFIER)?,
        Lang::C => write_sources(&write, root, args.lang, "classifier", name, "", C_CLASSIFIER)?,
    };
    make_executable(&root.join("build.sh"))?;
    write("README.md", &README.replace("{name}", name).replace("{wasm}", &wasm))?;
    say_steps(args, root, &[format!("sluice sink classify --plugin {wasm} cases")]);
    Ok(())
}

const README: &str = r#"# {name}

A sluice classifier: it reads how an HTTP backend answered one request of
the sink, for a backend no built-in response profile covers. Build it, then
run its answer cases through the sluice host:

```sh
./build.sh                                          # → {wasm}
sluice sink classify --plugin {wasm} cases          # a verdict per case
```

Then name it in the pipeline's sink:

```toml
[sink.classifier]
path = "{wasm}"
headers = []          # response headers it may read
```

`cases/*.json` are answers and the fates they must come to (the format is
the response corpus's: `conformance/responses/` in the sluice repository).
Record real answers of your backend into new cases. The host's fixed rules
apply after the classifier: a 404, a 429 or a 5xx stays systemic whatever
it says, and a trap or a wrong number of fates is systemic too.
`wit/classifier.wit` is the contract, documented type by type.
"#;

const RUST_SDK_MANIFEST: &str = r#"[package]
name = "sluice-classifier"
version = "0.1.0"
edition = "2024"

[lib]
name = "sluice_classifier"

[dependencies]
wit-bindgen = { version = "0.61", default-features = false, features = ["macros", "realloc"] }
serde = { version = "1", features = ["derive"] }
serde_json = "1"
sluice-guest-common = { path = "../sluice-guest-common" }
"#;

const RUST_CLASSIFIER: &str = r#"//! A backend's answer, read per record: a 2xx may list refused records by
//! position; a 400/413/422 names none; anything else is the backend's.

use serde::Deserialize;
use sluice_classifier::{Classifier, Fate, Reply, Request, Response, export_classifier};

/// The classifier is its own config (`[sink.classifier] config`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct Answers {}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    rejected: Vec<Refused>,
}

#[derive(Deserialize)]
struct Refused {
    index: usize,
    #[serde(default)]
    reason: String,
}

impl Classifier for Answers {
    fn classify(&mut self, request: &Request, response: &Response) -> Reply {
        match response.status {
            200..=299 => {}
            400 | 413 | 422 => return Reply::Split(response.excerpt()),
            _ => return Reply::All(Fate::Systemic(response.excerpt())),
        }
        let body: Body = match response.json() {
            Ok(b) => b,
            Err(e) => return Reply::All(Fate::Systemic(e)),
        };
        let mut fates = vec![Fate::Accepted; request.len()];
        for r in body.rejected {
            match fates.get_mut(r.index) {
                Some(f) => *f = Fate::Reject(r.reason),
                None => return Reply::All(Fate::Systemic(format!("the answer names record {}", r.index))),
            }
        }
        Reply::Each(fates)
    }
}

export_classifier!(Answers);
"#;

const PY_CLASSIFIER: &str = r#""""A backend's answer, read per record: a 2xx may list refused records by
position; a 400/413/422 names none; anything else is the backend's."""

from sluice_classifier import Classifier, accepted, each, export, for_all, reject, split, systemic


class Answers(Classifier):
    def classify(self, request, response):
        if response.status in (400, 413, 422):
            return split(response.excerpt())
        if not 200 <= response.status < 300:
            return for_all(systemic(response.excerpt()))
        try:
            refused = response.json().get("rejected") or []
        except ValueError as e:
            return for_all(systemic(str(e)))
        fates = [accepted()] * len(request)
        for r in refused:
            i = r.get("index")
            if not isinstance(i, int) or not 0 <= i < len(fates):
                return for_all(systemic(f"the answer names record {i}"))
            fates[i] = reject(r.get("reason", ""))
        return each(fates)


WitWorld = export(Answers)
"#;

const JS_CLASSIFIER: &str = r#"// A backend's answer, read per record: a 2xx may list refused records by
// position; a 400/413/422 names none; anything else is the backend's.
import { Classifier, accepted, all, each, exportClassifier, reject, split, systemic } from "./sluice-classifier.js";

class Answers extends Classifier {
  classify(request, response) {
    if ([400, 413, 422].includes(response.status)) return split(response.excerpt());
    if (response.status < 200 || response.status > 299) return all(systemic(response.excerpt()));
    let refused;
    try {
      refused = response.json().rejected ?? [];
    } catch (e) {
      return all(systemic(e.message));
    }
    const fates = Array.from({ length: request.length }, accepted);
    for (const r of refused) {
      if (!Number.isInteger(r.index) || r.index < 0 || r.index >= fates.length) {
        return all(systemic(`the answer names record ${r.index}`));
      }
      fates[r.index] = reject(r.reason ?? "");
    }
    return each(fates);
  }
}

export const { init, classify } = exportClassifier(Answers);
"#;

const C_CLASSIFIER: &str = r#"/* A backend's answer, read per record: a 2xx may list refused records by
 * position; a 400/413/422 names none; anything else is the backend's. */
#include <stdlib.h>

#include "sluice_classifier.h"

static void classify(const sluice_request *req, const sluice_response *resp, sluice_reply *reply) {
    if (resp->status == 400 || resp->status == 413 || resp->status == 422) {
        sluice_reply_split(reply, "%s", sluice_response_excerpt(resp));
        return;
    }
    if (resp->status < 200 || resp->status > 299) {
        sluice_reply_all(reply, SLUICE_SYSTEMIC, "%s", sluice_response_excerpt(resp));
        return;
    }
    sluice_bytes list, item, raw;
    int found = resp->truncated ? -1 : sluice_json_member(resp->body, "rejected", &list);
    if (found < 0) {
        sluice_reply_all(reply, SLUICE_SYSTEMIC, "HTTP %u: the body is not the JSON expected", (unsigned)resp->status);
        return;
    }
    sluice_reply_all(reply, SLUICE_ACCEPTED, NULL);
    if (found == 0) return;
    size_t pos = 0;
    while (sluice_json_next_item((const char *)list.ptr, &pos, &item) == 1) {
        int64_t index;
        char *reason = NULL;
        if (sluice_json_member((const char *)item.ptr, "index", &raw) != 1 || !sluice_json_int64(raw, &index) ||
            index < 0 || (size_t)index >= req->count) {
            sluice_reply_all(reply, SLUICE_SYSTEMIC, "the answer names a record that was not sent");
            return;
        }
        if (sluice_config_string((const char *)item.ptr, "reason", &reason) != 1) reason = NULL;
        sluice_reply_one(reply, (size_t)index, SLUICE_REJECT, "%s", reason ? reason : "");
        free(reason);
    }
}

/* No config: setup is NULL. */
SLUICE_CLASSIFIER(NULL, classify)
"#;
