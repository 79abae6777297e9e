//! Several pipelines in one `sluice run`: which configs, and what they may
//! not share. Each pipeline keeps its own group id, state folder and
//! commits (a destination that must not wait on another gets a consumer of
//! its own, as the buffer-layer design recommends); the process gives them
//! one metrics and API listener, one log and one status page, and names
//! each pipeline in what it shows (`telemetry::labels`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::config::Config;
use crate::source::config::SourceConfig;

/// The configs `-c` named, a list file (`pipelines = ["a.toml", …]`, its
/// only key) replaced by the files it lists, relative to it. A file named
/// twice is refused: it would be two pipelines of one name and one store.
pub(crate) fn expand(given: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in given {
        match listed(path)? {
            None => out.push(path.clone()),
            Some(list) => {
                for p in list {
                    if listed(&p)?.is_some() {
                        bail!("{}: lists {}, itself a list: list the configs in one file", path.display(), p.display());
                    }
                    out.push(p);
                }
            }
        }
    }
    for (i, p) in out.iter().enumerate() {
        let same =
            |q: &PathBuf| std::fs::canonicalize(q).ok().zip(std::fs::canonicalize(p).ok()).is_some_and(|(a, b)| a == b);
        if out[..i].iter().any(same) {
            bail!("config {} is given twice: each pipeline runs once", p.display());
        }
    }
    Ok(out)
}

/// The config of the one pipeline a command works on (its store, its
/// group, its sources): `path` itself, or the config of a list file whose
/// `pipeline.name` is `pipeline` (which a list of one may leave out).
/// `--pipeline` with a pipeline's own config must name it: a wrong name
/// would otherwise act on another pipeline's store unnoticed.
pub(crate) fn one(path: &Path, pipeline: Option<&str>) -> Result<PathBuf> {
    let Some(list) = listed(path)? else {
        if let Some(want) = pipeline {
            let cfg = Config::load(path)?;
            if cfg.pipeline.name != want {
                bail!(
                    "config {} runs pipeline {:?}, not {want:?} (--pipeline picks one of a list file's pipelines)",
                    path.display(),
                    cfg.pipeline.name
                );
            }
        }
        return Ok(path.to_path_buf());
    };
    let named: Vec<(PathBuf, String)> = list
        .into_iter()
        .map(|p| {
            let cfg = Config::load(&p).with_context(|| format!("listed in {}", path.display()))?;
            Ok((p, cfg.pipeline.name))
        })
        .collect::<Result<_>>()?;
    let names = || named.iter().map(|(_, n)| n.as_str()).collect::<Vec<_>>().join(", ");
    match pipeline {
        Some(want) => match named.iter().find(|(_, n)| n == want) {
            Some((p, _)) => Ok(p.clone()),
            None => bail!("{} lists no pipeline {want:?}; its pipelines: {}", path.display(), names()),
        },
        None if named.len() == 1 => Ok(named[0].0.clone()),
        None => bail!(
            "{} lists {} pipelines ({}), and this command works on one: name it with --pipeline NAME",
            path.display(),
            named.len(),
            names()
        ),
    }
}

/// The config whose `[metrics]` and `[api]` the listener of a run of
/// `path` serves (`top`, `tap`): `path` itself, or the first config of a
/// list file that sets `metrics.listen` (the pipelines of a process share
/// that listener, and `apart` keeps their `[api]` the same).
pub(crate) fn listener(path: &Path) -> Result<PathBuf> {
    let Some(list) = listed(path)? else { return Ok(path.to_path_buf()) };
    for p in &list {
        let cfg = Config::load(p).with_context(|| format!("listed in {}", path.display()))?;
        if cfg.metrics.listen.is_some() {
            return Ok(p.clone());
        }
    }
    bail!(
        "{}: none of its pipelines sets metrics.listen, and this command reads their listener: set it \
         ([metrics] listen = \"127.0.0.1:9898\") or pass --url",
        path.display()
    )
}

/// The files a list file names, or `None` for a pipeline config (or a
/// file that cannot be read: `Config::load` says why, naming it).
fn listed(path: &Path) -> Result<Option<Vec<PathBuf>>> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(None) };
    let Ok(table) = text.parse::<toml::Table>() else { return Ok(None) };
    if table.len() != 1 {
        return Ok(None);
    }
    let Some(list) = table.get("pipelines") else { return Ok(None) };
    let here = path.parent().unwrap_or(Path::new("."));
    let items = list.as_array().with_context(|| format!("{}: pipelines: a list of config files", path.display()))?;
    if items.is_empty() {
        bail!("{}: pipelines: lists no config", path.display());
    }
    items
        .iter()
        .enumerate()
        .map(|(i, v)| match v.as_str() {
            Some(p) => Ok(here.join(p)),
            None => bail!("{}: pipelines[{i}]: a config file's path, as a string", path.display()),
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Why these pipelines cannot share one process, naming the files and the
/// key; `Ok` for one pipeline.
pub(crate) fn apart(configs: &[(&Path, &Config)]) -> Result<(), String> {
    let mut problems = Vec::new();
    for (i, (a_path, a)) in configs.iter().enumerate() {
        for (b_path, b) in &configs[..i] {
            let both = format!("configs {} and {}", b_path.display(), a_path.display());
            if a.pipeline.name == b.pipeline.name {
                problems.push(format!(
                    "{both} both name pipeline.name {:?}: each pipeline of a process needs its own (it labels its \
                     metrics, its status and its tap lines)",
                    a.pipeline.name
                ));
            }
            if a.pipeline.state_dir == b.pipeline.state_dir {
                problems.push(format!(
                    "{both} share pipeline.state_dir {}: each pipeline keeps its own store",
                    a.pipeline.state_dir.display()
                ));
            }
            if let (SourceConfig::Kafka(ka), SourceConfig::Kafka(kb)) = (&a.source, &b.source)
                && ka.group_id == kb.group_id
            {
                problems.push(format!(
                    "{both} both join Kafka group source.group_id {:?}: two members of one group split its \
                     partitions between them; give each pipeline its own group id",
                    ka.group_id
                ));
            }
            if let (Some(la), Some(lb)) = (a.metrics.listen, b.metrics.listen) {
                if la != lb {
                    problems.push(format!(
                        "{both} say metrics.listen {lb} and {la}: the pipelines of one process share one listener; \
                         give them the same address, or set it in one"
                    ));
                } else if format!("{:?}", a.api) != format!("{:?}", b.api) {
                    problems.push(format!(
                        "{both} differ in [api]: the listener they share has one API and one token; make their \
                         [api] tables the same"
                    ));
                }
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, state: &str, group: Option<&str>, listen: Option<&str>) -> Config {
        let source = match group {
            Some(g) => {
                format!("[source]\ntype = \"kafka\"\nbrokers = \"127.0.0.1:9\"\ntopics = [\"t\"]\ngroup_id = \"{g}\"\n")
            }
            None => "[source]\ntype = \"file\"\npaths = [\"x.log\"]\n".to_string(),
        };
        let metrics = listen.map(|l| format!("[metrics]\nlisten = \"{l}\"\n")).unwrap_or_default();
        let text = format!(
            "[pipeline]\nname = \"{name}\"\nstate_dir = \"/tmp/{state}\"\n{source}[sink]\ntype = \"stdout\"\n{metrics}"
        );
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("c.toml");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("x.log"), "").unwrap_or_else(|e| panic!("{e}"));
        Config::load(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn pipelines_that_would_share_a_name_a_store_a_group_or_listen_apart_are_refused_by_file_and_key() {
        let (pa, pb) = (Path::new("a.toml"), Path::new("b.toml"));
        let a = config("a", "sa", Some("ga"), Some("127.0.0.1:9100"));
        let b = config("b", "sb", Some("gb"), Some("127.0.0.1:9100"));
        assert_eq!(apart(&[(pa, &a), (pb, &b)]), Ok(()));
        let same = config("a", "sa", Some("ga"), Some("127.0.0.1:9200"));
        let why = apart(&[(pa, &a), (pb, &same)]).err().unwrap_or_default();
        for part in [
            "configs a.toml and b.toml",
            "pipeline.name \"a\"",
            "pipeline.state_dir /tmp/sa",
            "group_id \"ga\"",
            "metrics.listen",
        ] {
            assert!(why.contains(part), "{part} in {why}");
        }
        let files = config("c", "sc", None, None);
        assert_eq!(apart(&[(pa, &a), (pb, &files)]), Ok(()));
    }

    #[test]
    fn a_list_file_names_the_configs_relative_to_itself_and_a_config_twice_is_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap_or_else(|e| panic!("{e}"));
            p
        };
        let a = write("a.toml", "[pipeline]\nname = \"a\"\n");
        let b = write("b.toml", "[pipeline]\nname = \"b\"\n");
        let list = write("all.toml", "pipelines = [\"a.toml\", \"b.toml\"]\n");
        let got = expand(std::slice::from_ref(&list)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, [dir.path().join("a.toml"), dir.path().join("b.toml")]);
        assert_eq!(expand(&[a.clone(), b.clone()]).ok(), Some(vec![a.clone(), b]));
        let twice = expand(&[list, a]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(twice.contains("a.toml is given twice"), "{twice}");
        let bad = write("bad.toml", "pipelines = [\"a.toml\", 3]\n");
        let why = expand(&[bad]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(why.contains("pipelines[1]"), "{why}");
    }

    #[test]
    fn a_command_of_one_pipeline_takes_it_from_a_list_file_by_name_and_top_its_shared_listener() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("x.log"), "").unwrap_or_else(|e| panic!("{e}"));
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap_or_else(|e| panic!("{e}"));
            p
        };
        let pipeline = |name: &str, metrics: &str| {
            format!(
                "[pipeline]\nname = \"{name}\"\nstate_dir = \"s-{name}\"\n[source]\ntype = \"file\"\npaths =                  [\"x.log\"]\n[sink]\ntype = \"stdout\"\n{metrics}"
            )
        };
        let a = write("a.toml", &pipeline("alpha", ""));
        let b = write("b.toml", &pipeline("beta", "[metrics]\nlisten = \"127.0.0.1:9100\"\n"));
        let list = write("all.toml", "pipelines = [\"a.toml\", \"b.toml\"]\n");
        let err = |r: Result<PathBuf>| r.err().map(|e| format!("{e:#}")).unwrap_or_default();

        assert_eq!(one(&list, Some("beta")).ok(), Some(b.clone()));
        assert_eq!(one(&list, Some("alpha")).ok(), Some(a.clone()));
        let which = err(one(&list, None));
        assert!(which.contains("lists 2 pipelines (alpha, beta)") && which.contains("--pipeline"), "{which}");
        let none = err(one(&list, Some("gamma")));
        assert!(none.contains("lists no pipeline \"gamma\"; its pipelines: alpha, beta"), "{none}");
        // A pipeline's own config: itself, and --pipeline must name it.
        assert_eq!(one(&a, None).ok(), Some(a.clone()));
        assert_eq!(one(&a, Some("alpha")).ok(), Some(a.clone()));
        let wrong = err(one(&a, Some("beta")));
        assert!(wrong.contains("runs pipeline \"alpha\", not \"beta\""), "{wrong}");
        // A list of one needs no name.
        let single = write("one.toml", "pipelines = [\"b.toml\"]\n");
        assert_eq!(one(&single, None).ok(), Some(b.clone()));
        // A listed config that does not load is named, with its list.
        write("broken.toml", "[pipeline]\nname = 3\n");
        let with_broken = write("with-broken.toml", "pipelines = [\"a.toml\", \"broken.toml\"]\n");
        let said = err(one(&with_broken, Some("alpha")));
        assert!(said.contains("listed in") && said.contains("broken.toml"), "{said}");

        // top and tap: the one config of the list that sets the listener.
        assert_eq!(listener(&list).ok(), Some(b.clone()));
        assert_eq!(listener(&a).ok(), Some(a.clone()));
        let quiet = write("quiet.toml", "pipelines = [\"a.toml\"]\n");
        assert!(err(listener(&quiet)).contains("none of its pipelines sets metrics.listen"));
    }
}
