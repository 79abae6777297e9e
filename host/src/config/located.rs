//! Where a config's key is written: the line and column a problem's key
//! has in the TOML file, so that an error points into the file the
//! operator wrote, not only at a key path. The typed config is read
//! through the `config` crate (files and `SLUICE__…` overrides merged),
//! which keeps no positions; the file's text is parsed once more here, with
//! spans, only when there is a problem to place.

use toml::de::{DeTable, DeValue};

/// One step of a key path: `source`, `properties."sasl.password"`,
/// `plugins[0]`.
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// `source.properties."a.b"`, `plugins[1].config.id_field` as steps; `None`
/// when the path cannot be read.
fn steps(path: &str) -> Option<Vec<Step>> {
    let mut out = Vec::new();
    let mut chars = path.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            '.' => {
                chars.next();
            }
            '"' => {
                chars.next();
                let mut key = String::new();
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => key.push(chars.next()?),
                        other => key.push(other),
                    }
                }
                out.push(Step::Key(key));
            }
            '[' => {
                chars.next();
                let mut digits = String::new();
                while let Some(d) = chars.next_if(|d| d.is_ascii_digit()) {
                    digits.push(d);
                }
                if chars.next()? != ']' {
                    return None;
                }
                out.push(Step::Index(digits.parse().ok()?));
            }
            _ => {
                let mut key = String::new();
                while let Some(k) = chars.next_if(|k| !matches!(k, '.' | '[' | '"')) {
                    key.push(k);
                }
                out.push(Step::Key(key));
            }
        }
    }
    Some(out)
}

/// The (line, column), both from 1, of the deepest part of `path` that
/// `text` writes: the key itself, else the nearest table above it that is
/// written (a missing key is placed at its table).
pub(crate) fn locate(text: &str, path: &str) -> Option<(usize, usize)> {
    let steps = steps(path)?;
    let root = DeTable::parse(text).ok()?;
    let mut table: &DeTable<'_> = root.get_ref();
    let mut at: Option<usize> = None;
    let mut value: Option<&DeValue<'_>> = None;
    for step in &steps {
        match (step, value) {
            (Step::Key(k), None | Some(DeValue::Table(_))) => {
                if let Some(DeValue::Table(t)) = value {
                    table = t;
                }
                let Some((key, v)) = table.iter().find(|(key, _)| key.get_ref().as_ref() == k.as_str()) else {
                    break;
                };
                at = Some(key.span().start);
                value = Some(v.get_ref());
            }
            (Step::Index(i), Some(DeValue::Array(items))) => {
                let Some(item) = items.get(*i) else { break };
                at = Some(item.span().start);
                value = Some(item.get_ref());
            }
            _ => break,
        }
    }
    at.map(|offset| line_and_column(text, offset))
}

fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The key a problem names, made more precise by its message where serde
/// names a key of its own (`unknown field \`colour\``): that key's line,
/// not its table's.
pub(crate) fn locate_problem(text: &str, key: &str, message: &str) -> Option<(usize, usize)> {
    let named = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
        .map(|field| if key.is_empty() { field.to_string() } else { format!("{key}.\"{field}\"") });
    named.and_then(|k| locate(text, &k)).or_else(|| locate(text, key))
}

/// Where a plugin's refusal of its config points in the file: the key its
/// message starts with (`timestamp.zone: …`, the SDKs' `invalid plugin
/// config: id_field: …`, `patterns[1] does not capture …`) under
/// `plugins[plugin].config`, else that table. A plugin names its keys by
/// its own path; the host knows where its table is written.
pub(crate) fn locate_plugin_problem(text: &str, plugin: usize, message: &str) -> Option<(usize, usize)> {
    let table = format!("plugins[{plugin}].config");
    let message = message.strip_prefix("invalid plugin config: ").unwrap_or(message);
    if message.starts_with("unknown field `") {
        return locate_problem(text, &table, message);
    }
    let lead: String =
        message.chars().take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '[' | ']')).collect();
    let lead = lead.trim_end_matches('.');
    if lead.is_empty() {
        return locate(text, &table);
    }
    let rest = message[lead.len()..].trim_start_matches(':').trim_start();
    locate_problem(text, &format!("{table}.{lead}"), rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "[pipeline]\nname = \"p\"\n\n[source]\ntype = \"kafka\"\ncommit_interval = \"1ms\"\n\
                        properties = { \"sasl.password\" = \"x\" }\n\n[[plugins]]\nname = \"a\"\n\n[[plugins]]\n\
                        name = \"b\"\nconfig = { id_field = 7 }\n";

    #[test]
    fn keys_are_placed_where_the_file_writes_them() {
        assert_eq!(locate(TEXT, "source.commit_interval"), Some((6, 1)));
        assert_eq!(locate(TEXT, "source.properties.\"sasl.password\""), Some((7, 16)));
        assert_eq!(locate(TEXT, "plugins[1].config.id_field"), Some((14, 12)));
        assert_eq!(locate(TEXT, "plugins[0].name"), Some((10, 1)));
        // A key the file does not write: its table.
        assert_eq!(locate(TEXT, "source.brokers"), Some((4, 2)));
        assert_eq!(locate(TEXT, "sink.path"), None);
        assert_eq!(locate("not = [toml", "not"), None, "a file that does not parse places nothing");
    }

    #[test]
    fn a_plugins_refusal_is_placed_at_the_key_it_names() {
        let text = "[[plugins]]\nname = \"p\"\n[plugins.config]\npatterns = ['a']\nid_field = 7\n\
                    timestamp = { fields = [\"t\"], format = \"%Y\", zone = \"Mars\" }\n";
        let at = |m: &str| locate_plugin_problem(text, 0, m);
        assert_eq!(at("invalid plugin config: id_field: invalid type: integer `7`"), Some((5, 1)));
        assert_eq!(at("timestamp.zone: unknown time zone \"Mars\""), Some((6, 46)));
        assert_eq!(at("invalid plugin config: timestamp: unknown field `zon`, expected …"), Some((6, 1)));
        assert_eq!(at("invalid plugin config: unknown field `id_feld`, expected …"), Some((3, 10)));
        assert_eq!(at("patterns[0] captures no field: use %{SHORTCUT:name}"), Some((4, 13)));
        // A message that names no key: the plugin's config table.
        assert_eq!(at("give at least one pattern"), Some((3, 10)));
        assert_eq!(at("(no key)"), Some((3, 10)));
    }

    #[test]
    fn an_unknown_field_is_placed_at_itself() {
        let text = "[source]\ntype = \"file\"\ncolour = \"blue\"\n";
        assert_eq!(locate_problem(text, "source", "unknown field `colour`, expected one of …"), Some((3, 1)));
        assert_eq!(locate_problem(text, "source", "missing field `paths`"), Some((1, 2)));
    }

    #[test]
    fn paths_read_quotes_and_indices() {
        assert_eq!(
            steps("a.\"b.c\"[2].d"),
            Some(vec![Step::Key("a".into()), Step::Key("b.c".into()), Step::Index(2), Step::Key("d".into())])
        );
        assert_eq!(steps("a[x]"), None);
    }
}
