//! The book's page of the first-party plugins' keys
//! (`docs/src/plugins-reference.md`), generated from the plugins' own
//! config types (their JSON Schemas, feature `schema`), with the SDK's
//! timestamp formats and pattern shortcuts, so the page says what the
//! plugins read. `SLUICE_BLESS=1` writes the page; without it the test
//! fails when the page and the types differ.

use sluice_e2e::workspace_root;
use sluice_guest::shortcuts::SHORTCUTS;
use sluice_guest::time::{ITEMS, NAMED};

fn escaped(text: &str) -> String {
    text.replace('|', "\\|")
}

fn page() -> String {
    let mut out = String::from(
        "# First-party plugins\n\n<!-- Generated from the plugins' config types by \
         `SLUICE_BLESS=1 cargo test -p sluice-e2e --test plugins_reference`; do not edit. -->\n\n\
         The keys of each first-party plugin's `config` (in `[[plugins]]`, or the file `config_file` \
         names). A key the plugin does not know is refused at start, naming it. Build them with \
         `scripts/quickstart` (into `out/plugins/`).\n",
    );
    let plugins = [
        ("json", sluice_plugin_json::config_schema()),
        ("ts-window", sluice_plugin_ts_window::config_schema()),
        ("pattern", sluice_plugin_pattern::config_schema()),
        ("avro", sluice_plugin_avro::config_schema()),
        ("protobuf", sluice_plugin_protobuf::config_schema()),
        ("json-schema", sluice_plugin_json_schema::config_schema()),
    ];
    for (name, schema) in &plugins {
        out.push_str(&format!("\n## `{name}`\n"));
        out.push_str(&sluice::config::schema::tables(schema, "plugins.config", &format!(" of `{name}`"), 3));
    }
    out.push_str(
        "\n## Timestamp formats\n\nWhat `timestamp_format` (json, ts-window, avro, protobuf, json-schema) and a timestamp rule's \
         `format` (pattern) take: a name, a pattern of items, or a table `{ format = \"…\", year = 2016, \
         zone = \"Europe/Berlin\", ambiguous = \"earliest\" }` for what the text leaves out.\n\n\
         | name | reads |\n|---|---|\n",
    );
    for (name, example) in NAMED {
        out.push_str(&format!("| `{name}` | {} |\n", escaped(example)));
    }
    out.push_str("\n| item | reads |\n|---|---|\n");
    for (item, reads) in ITEMS {
        out.push_str(&format!("| `{item}` | {} |\n", escaped(reads)));
    }
    out.push_str(
        "\n## Pattern shortcuts\n\n`%{NAME}` matches the shortcut's regex, `%{NAME:field}` captures it into \
         `field`, `%{NAME:field:int}` or `:float` as a number (a value that does not fit rejects the record, \
         naming the field). `sluice plugin inspect --formats` prints the same list.\n\n\
         | shortcut | regex |\n|---|---|\n",
    );
    for (name, regex) in SHORTCUTS {
        out.push_str(&format!("| `{name}` | `{}` |\n", escaped(regex).replace('`', "\\`")));
    }
    out
}

#[test]
fn the_checked_in_page_is_what_the_plugins_define() {
    let path = workspace_root().join("docs/src/plugins-reference.md");
    let want = page();
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == want,
        "{} differs from the plugins' config types: run `SLUICE_BLESS=1 cargo test -p sluice-e2e --test \
         plugins_reference`",
        path.display()
    );
}

/// The page as a newcomer reads it: every key of every plugin described,
/// every table with its keys, the pattern shortcuts and their suffixes.
#[test]
fn the_page_can_be_configured_from() {
    let page = page();
    let problems = sluice::config::schema::reference_problems(&page, &[]);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for key in ["`id_field`", "`timestamp_field`", "`max_age`", "`max_future`", "`patterns`", "`on_no_match`"] {
        assert!(page.contains(key), "the page has {key}");
    }
    assert!(page.contains("`GREEDYDATA`") && page.contains(":int"), "the shortcuts and their suffix");
}
