//! One wasmtime engine per process: compiles each plugin once, keyed by the
//! blake3 digest of its bytes (in memory, and on disk so that a restart, or
//! a Python component that takes seconds to compile, pays it once), and
//! drives the clock that enforces per-batch time limits. How much of the
//! compiled code is kept is `cache`'s.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

use super::cache::{self, Recent};
use super::contract::{self, Contract, Pre};
use super::error::PluginError;
use super::sandbox::StoreState;
use super::spec::{PluginLimits, PluginSpec};
use crate::verdict::PluginId;

/// How often the epoch advances; time limits are rounded up to it.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// A plugin compiled, linked and ready to instantiate.
pub struct LoadedPlugin {
    pub(super) id: PluginId,
    pub(super) pre: Pre,
    pub(super) config_json: String,
    pub(super) limits: PluginLimits,
    pub(super) engine: Engine,
    pub(super) schemas: Option<Arc<crate::schema_registry::cache::Schemas>>,
}

impl LoadedPlugin {
    /// Its name and the digest of its bytes.
    pub fn id(&self) -> &PluginId {
        &self.id
    }

    /// The contract version the component speaks, found at load.
    pub(crate) fn contract(&self) -> Contract {
        self.pre.contract()
    }
}

/// Where compiled plugins came from, since the runtime started.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Components compiled by Cranelift (a miss in both caches).
    pub compiled: u64,
    /// Components loaded precompiled from the cache folder.
    pub from_disk: u64,
    /// Components found compiled already in this process (a reload).
    pub from_memory: u64,
}

#[derive(Default)]
struct CacheCounters {
    compiled: AtomicU64,
    from_disk: AtomicU64,
    from_memory: AtomicU64,
}

/// The plugin runtime: create one and share it.
pub struct Runtime {
    engine: Engine,
    linker: Linker<StoreState>,
    memory_cache: Mutex<Recent<blake3::Hash, Component>>,
    disk_cache: Option<PathBuf>,
    counters: CacheCounters,
}

impl Runtime {
    /// `disk_cache`: a directory for compiled plugins, or none to compile on
    /// every start. The directory must be trusted: compiled code is loaded
    /// from it as is (it is created owner-only).
    pub fn new(disk_cache: Option<PathBuf>) -> Result<Runtime, PluginError> {
        Runtime::tuned(disk_cache, |_| {})
    }

    /// sluice's engine settings, then `tune` over them: for
    /// `benches/plugin_runtime`, which measures the candidates beside these
    /// in one run. Every setting not named here stays wasmtime's default
    /// because none measured better (benches/README.md, plugin_runtime).
    #[doc(hidden)]
    pub fn tuned(disk_cache: Option<PathBuf>, tune: impl FnOnce(&mut Config)) -> Result<Runtime, PluginError> {
        let mut config = Config::new();
        // Time limits: an epoch check at function entries and loop heads,
        // much cheaper than fuel.
        config.epoch_interruption(true);
        // Deep recursion must trap cleanly inside the guest, well before the
        // host thread's own stack is at risk.
        config.max_wasm_stack(1 << 20);
        tune(&mut config);
        let engine = Engine::new(&config).map_err(|e| PluginError::Engine(e.to_string()))?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| PluginError::Engine(e.to_string()))?;
        contract::add_to_linker(&mut linker).map_err(|e| PluginError::Engine(e.to_string()))?;

        // The clock ticks while anything holds the engine: the runtime, or
        // a plugin loaded from it (`LoadedPlugin` keeps a clone), so a
        // plugin that outlives the runtime that loaded it (a sink's
        // classifier, `sluice sink test`) still has its time limit.
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("sluice-epoch".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| PluginError::Engine(format!("cannot start the epoch thread: {e}")))?;

        Ok(Runtime {
            engine,
            linker,
            memory_cache: Mutex::new(Recent::new(cache::MEMORY_ENTRIES)),
            disk_cache,
            counters: CacheCounters::default(),
        })
    }

    /// The on-disk cache every command uses: `$SLUICE_PLUGIN_CACHE`, else
    /// `$XDG_CACHE_HOME/sluice/plugins`. One place decides it, so that
    /// `run`, `check`, `shadow` and a reload find what `plugin test`
    /// compiled.
    pub(crate) fn default_cache_dir() -> Option<PathBuf> {
        match std::env::var_os("SLUICE_PLUGIN_CACHE") {
            Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
            _ => dirs::cache_dir().map(|d| d.join("sluice").join("plugins")),
        }
    }

    /// Read, compile (or fetch from cache) and link a plugin. Does not run
    /// it: see [`crate::plugin::isolate::Isolated::new`], which instantiates and calls `init`.
    pub fn load(&self, spec: &PluginSpec) -> Result<Arc<LoadedPlugin>, PluginError> {
        let bytes = std::fs::read(&spec.path).map_err(|e| PluginError::Read { path: spec.path.clone(), source: e })?;
        let digest = blake3::hash(&bytes);
        let id = PluginId { name: spec.name.clone(), digest };
        let component = self.compile(&spec.path, &bytes, digest)?;
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| PluginError::Link { plugin: id.to_string(), message: format!("{e:#}") })?;
        let pre = Pre::detect(instance_pre).map_err(|message| PluginError::Link { plugin: id.to_string(), message })?;
        let config_json = serde_json::to_string(&spec.config)
            .map_err(|e| PluginError::Config { plugin: id.to_string(), message: e.to_string() })?;
        Ok(Arc::new(LoadedPlugin {
            id,
            pre,
            config_json,
            limits: spec.limits.clone(),
            engine: self.engine.clone(),
            schemas: spec.schemas.clone(),
        }))
    }

    /// Which contract version a compiled component speaks, or why it speaks
    /// none that this host runs.
    pub(crate) fn contract_of(&self, component: &Component) -> Result<Contract, String> {
        let instance_pre = self.linker.instantiate_pre(component).map_err(|e| format!("{e:#}"))?;
        Pre::detect(instance_pre).map(|pre| pre.contract())
    }

    /// Compile `bytes`, or take the compiled code from the caches.
    pub(crate) fn compile(&self, path: &Path, bytes: &[u8], digest: blake3::Hash) -> Result<Component, PluginError> {
        if let Ok(mut cache) = self.memory_cache.lock()
            && let Some(c) = cache.get(&digest)
        {
            self.counters.from_memory.fetch_add(1, Ordering::Relaxed);
            return Ok(c);
        }
        let cached_file =
            self.disk_cache.as_ref().map(|dir| dir.join(format!("{}-{}.cwasm", digest.to_hex(), self.compat_tag())));
        let from_disk = cached_file.as_ref().filter(|f| f.exists()).and_then(|f| {
            // Read, not mmap (`deserialize_file`): a file truncated under a
            // mapping kills the process with SIGBUS, and the cache may be
            // shared or cleaned by other tools.
            let bytes = std::fs::read(f).ok()?;
            // SAFETY: the cache directory is ours (created owner-only) and
            // wasmtime checks the artifact's header and engine compatibility;
            // a stale or corrupt file is an error and we recompile.
            match unsafe { Component::deserialize(&self.engine, &bytes) } {
                Ok(c) => {
                    cache::touch(f);
                    Some(c)
                }
                Err(e) => {
                    tracing::warn!(file = %f.display(), "ignoring unusable compiled plugin in cache: {e}");
                    None
                }
            }
        });
        let component = match from_disk {
            Some(c) => {
                self.counters.from_disk.fetch_add(1, Ordering::Relaxed);
                c
            }
            None => {
                self.counters.compiled.fetch_add(1, Ordering::Relaxed);
                let c = compile_saying_so(path, self.disk_cache.as_deref(), || Component::new(&self.engine, bytes))
                    .map_err(|e| PluginError::Compile { path: path.to_path_buf(), message: format!("{e:#}") })?;
                if let Some(file) = &cached_file
                    && let Err(e) = c
                        .serialize()
                        .map_err(|e| std::io::Error::other(e.to_string()))
                        .and_then(|bytes| cache::store(file, &bytes))
                {
                    tracing::warn!(file = %file.display(), "cannot cache compiled plugin: {e}");
                }
                c
            }
        };
        if let Ok(mut cache) = self.memory_cache.lock() {
            cache.insert(digest, component.clone());
        }
        Ok(component)
    }

    /// Distinguishes artifacts of different wasmtime builds and settings.
    fn compat_tag(&self) -> String {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        format!("{:016x}", h.finish())
    }

    /// How the plugins loaded so far were had.
    pub fn cache_stats(&self) -> CacheStats {
        CacheStats {
            compiled: self.counters.compiled.load(Ordering::Relaxed),
            from_disk: self.counters.from_disk.load(Ordering::Relaxed),
            from_memory: self.counters.from_memory.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }
}

/// How long a compile may run before it is said: a Rust plugin compiles
/// in well under it; a Python or JavaScript build (30–40 MiB of wasm, an
/// interpreter inside) takes about 20 s the first time, silent otherwise.
const SAY_COMPILING_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Run `compile`, and say once that it is running if it takes longer than
/// `SAY_COMPILING_AFTER`: on the terminal when there is one (`check`,
/// `plugin test`), in the log otherwise; and how long it took.
fn compile_saying_so<T>(path: &Path, cache: Option<&Path>, compile: impl FnOnce() -> T) -> T {
    use std::io::IsTerminal;
    let say = |line: String| {
        if std::io::stderr().is_terminal() {
            eprintln!("{line}");
        } else {
            tracing::info!("{line}");
        }
    };
    let done = std::sync::Mutex::new(false);
    let wake = std::sync::Condvar::new();
    let started = std::time::Instant::now();
    let (result, said) = std::thread::scope(|s| {
        // Waits for the compile or the delay, whichever ends first; says
        // so when the delay did.
        let watcher = s.spawn(|| {
            let guard = done.lock().unwrap_or_else(|p| p.into_inner());
            let (guard, _) =
                wake.wait_timeout_while(guard, SAY_COMPILING_AFTER, |d| !*d).unwrap_or_else(|p| p.into_inner());
            let slow = !*guard;
            if slow {
                let cached = cache.map_or_else(
                    || "not cached: no cache directory".to_string(),
                    |d| format!("cached in {}", d.display()),
                );
                say(format!("compiling plugin {} for this machine, once ({cached} afterwards)…", path.display()));
            }
            slow
        });
        let result = compile();
        *done.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        (result, watcher.join().unwrap_or(false))
    });
    if said {
        say(format!("compiled plugin {} in {:.1} s", path.display(), started.elapsed().as_secs_f64()));
    }
    result
}
