//! What a plugin instance may touch: nothing but its own memory, the log
//! and the clock. A std Rust guest imports WASI, so WASI is linked, against
//! a context that grants nothing: no preopened directory, no environment, no
//! arguments, no network, stdin empty. Stderr is kept (its last few KiB) only
//! so that a crash can be explained to the plugin's author.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_io::poll::Pollable;
use wasmtime_wasi_io::streams::{OutputStream, StreamResult};

/// How much of a plugin's stderr is kept to explain a crash.
const STDERR_TAIL: usize = 4096;

/// The data of one plugin instance's store.
pub(crate) struct StoreState {
    pub(super) plugin_name: Arc<str>,
    wasi: WasiCtx,
    /// WASI's resources, and the helpers' compiled formats and patterns.
    pub(super) table: ResourceTable,
    /// How many helper resources are live, against their caps.
    pub(super) helpers: super::helpers::HelperState,
    pub(super) limiter: MemoryLimiter,
    pub(super) stderr: TailBuffer,
    pub(super) logs: LogBudget,
    /// What `clock.now` answers when the clock is pinned (`sluice test`).
    pub(super) fixed_now: Option<i64>,
}

/// A wall clock that stands still: WASI's, for a plugin that reads the
/// time through std rather than the contract's `clock`.
struct FixedClock(std::time::Duration);

impl wasmtime_wasi::HostWallClock for FixedClock {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(1)
    }
    fn now(&self) -> std::time::Duration {
        self.0
    }
}

/// How many log lines the current call may still send.
pub(super) struct LogBudget {
    limit: u32,
    used: u32,
    suppressed: u64,
}

impl LogBudget {
    pub(super) fn admit(&mut self) -> bool {
        if self.used < self.limit {
            self.used += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }

    /// Start a call's budget; returns how many lines the last call had
    /// suppressed.
    pub(super) fn reset(&mut self) -> u64 {
        self.used = 0;
        std::mem::take(&mut self.suppressed)
    }
}

impl StoreState {
    pub(super) fn new(
        plugin_name: Arc<str>,
        memory_limit: usize,
        log_lines: u32,
        fixed_now: Option<i64>,
    ) -> StoreState {
        let stderr = TailBuffer::default();
        // The builder's defaults already deny files, environment, arguments
        // and sockets; spelled out where a default could be misread.
        let mut builder = WasiCtxBuilder::new();
        builder
            .stderr(stderr.clone())
            .stdout(TailBuffer::default())
            .allow_ip_name_lookup(false)
            .allow_tcp(false)
            .allow_udp(false);
        if let Some(ns) = fixed_now {
            builder.wall_clock(FixedClock(std::time::Duration::from_nanos(u64::try_from(ns).unwrap_or(0))));
        }
        let wasi = builder.build();
        StoreState {
            plugin_name,
            wasi,
            table: ResourceTable::new(),
            helpers: Default::default(),
            limiter: MemoryLimiter { limit: memory_limit, refused: None },
            stderr,
            logs: LogBudget { limit: log_lines, used: 0, suppressed: 0 },
            fixed_now,
        }
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Caps a plugin's linear memory and remembers a refusal, so that the fault
/// can be reported as "memory limit" rather than as whatever the guest's
/// allocator does when growth fails.
pub(super) struct MemoryLimiter {
    pub(super) limit: usize,
    pub(super) refused: Option<usize>,
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.refused = Some(desired);
            // Trapping (rather than returning -1 to the guest) stops the
            // call at once: a guest that ignores the failure cannot go on.
            return Err(wasmtime::format_err!(
                "memory limit exceeded: wanted {} bytes, limit {} bytes",
                desired,
                self.limit
            ));
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// The last [`STDERR_TAIL`] bytes a guest wrote; never blocks, never fails.
#[derive(Clone, Default)]
pub(super) struct TailBuffer(Arc<Mutex<VecDeque<u8>>>);

impl TailBuffer {
    /// The kept bytes as text, and forget them.
    pub(super) fn take(&self) -> String {
        let Ok(mut buf) = self.0.lock() else { return String::new() };
        let bytes: Vec<u8> = buf.drain(..).collect();
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    fn append(&self, bytes: &[u8]) {
        let Ok(mut buf) = self.0.lock() else { return };
        let bytes = &bytes[bytes.len().saturating_sub(STDERR_TAIL)..];
        let kept = buf.len();
        let overflow = (kept + bytes.len()).saturating_sub(STDERR_TAIL).min(kept);
        buf.drain(..overflow);
        buf.extend(bytes);
    }
}

impl IsTerminal for TailBuffer {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for TailBuffer {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for TailBuffer {
    async fn ready(&mut self) {}
}

impl OutputStream for TailBuffer {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for TailBuffer {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_buffer_keeps_only_the_last_bytes() {
        let t = TailBuffer::default();
        t.append(&vec![b'a'; STDERR_TAIL]);
        t.append(b"end");
        let s = t.take();
        assert_eq!(s.len(), STDERR_TAIL);
        assert!(s.ends_with("aend"));
        assert_eq!(t.take(), "", "take forgets");
        t.append(&vec![b'b'; STDERR_TAIL * 3]);
        assert_eq!(t.take().len(), STDERR_TAIL);
    }
}
