//! A TCP fault proxy for the suites: it sits on loopback between sluice and
//! a broker or a sink and, as the test scripts it, passes the bytes,
//! delays them, holds them (a network partition: nothing arrives and
//! nothing is refused, so clients find out only by their own timeouts),
//! resets every open connection, or cuts the next response part-way and
//! resets.
//!
//! Held bytes are not dropped: TCP would retransmit them across a real
//! partition, and a protocol stream with a hole in it is not a network
//! fault but a corruption no peer would see. A connection opened while
//! the link is held is accepted and waits, as a SYN that gets no answer
//! does.
//!
//! For a Kafka broker, the broker must advertise the proxy's address
//! (`kafka::Broker::start_behind_proxy`): clients connect where the
//! metadata tells them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the link does to the bytes crossing it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Every byte passes at once.
    Pass,
    /// Each chunk read waits this long before it is passed on.
    Delay(Duration),
    /// Nothing passes either way until the link is set to something
    /// else; then what was held passes.
    Hold,
    /// A black hole: every byte either way is thrown away, and a new
    /// connection never reaches upstream; connections stay open, as a
    /// route that drops packets leaves them. Nothing arrives later.
    Blackhole,
}

struct Control {
    link: watch::Sender<Link>,
    /// Bumped to reset every open connection.
    resets: watch::Sender<u64>,
    /// The next chunk from upstream passes this many bytes, then the
    /// connection is reset (0: no cut armed).
    cut_after: AtomicU64,
    /// Bytes passed client → upstream and upstream → client.
    up: AtomicU64,
    down: AtomicU64,
    /// Bytes a black hole threw away, both ways.
    swallowed: AtomicU64,
    connections: AtomicU64,
}

pub struct FaultProxy {
    port: u16,
    control: Arc<Control>,
    /// The proxy's own runtime: dropping it stops the listener and every
    /// connection.
    _runtime: tokio::runtime::Runtime,
}

impl FaultProxy {
    /// A proxy on a free loopback port to `upstream`.
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        FaultProxy::start_on(crate::kafka::free_port(), upstream)
    }

    /// A proxy on loopback port `port` to `upstream`.
    pub fn start_on(port: u16, upstream: SocketAddr) -> FaultProxy {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fault-proxy")
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("the fault proxy's runtime: {e}"));
        let control = Arc::new(Control {
            link: watch::channel(Link::Pass).0,
            resets: watch::channel(0).0,
            cut_after: AtomicU64::new(0),
            up: AtomicU64::new(0),
            down: AtomicU64::new(0),
            swallowed: AtomicU64::new(0),
            connections: AtomicU64::new(0),
        });
        let listener = runtime
            .block_on(TcpListener::bind(("127.0.0.1", port)))
            .unwrap_or_else(|e| panic!("the fault proxy cannot listen on 127.0.0.1:{port}: {e}"));
        let c = control.clone();
        runtime.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                c.connections.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(serve(client, upstream, c.clone()));
            }
        });
        FaultProxy { port, control, _runtime: runtime }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`, for a client's config.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn set(&self, link: Link) {
        self.control.link.send_replace(link);
    }

    /// Reset (RST) every connection open now; later ones are served.
    pub fn reset_all(&self) {
        self.control.resets.send_modify(|n| *n += 1);
    }

    /// The next chunk a server sends passes its first `bytes` bytes (at
    /// least one), then the connection is reset: a response cut mid-way.
    pub fn cut_next_response_after(&self, bytes: u64) {
        self.control.cut_after.store(bytes.max(1), Ordering::Relaxed);
    }

    /// Bytes passed so far: (client → upstream, upstream → client).
    pub fn bytes(&self) -> (u64, u64) {
        (self.control.up.load(Ordering::Relaxed), self.control.down.load(Ordering::Relaxed))
    }

    /// Bytes a black hole threw away (both ways together).
    pub fn swallowed(&self) -> u64 {
        self.control.swallowed.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.control.connections.load(Ordering::Relaxed)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Up,
    Down,
}

async fn serve(mut client: TcpStream, upstream: SocketAddr, control: Arc<Control>) {
    let mut resets = control.resets.subscribe();
    resets.mark_unchanged();
    let connected = async {
        let mut link = control.link.subscribe();
        // Through a black hole a connection never reaches upstream, even
        // once the link is back: its client has given up on it by then.
        if *link.borrow_and_update() == Link::Blackhole {
            std::future::pending::<()>().await;
        }
        wait_passing(&mut link).await;
        TcpStream::connect(upstream).await
    };
    let mut server = tokio::select! {
        s = connected => match s {
            Ok(s) => s,
            // Upstream refuses: so does the proxy, with a reset.
            Err(_) => return reset(client),
        },
        _ = resets.changed() => return reset(client),
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let cut = {
        let (mut cr, mut cw) = client.split();
        let (mut sr, mut sw) = server.split();
        let up = pump(&mut cr, &mut sw, &control, Way::Up);
        let down = pump(&mut sr, &mut cw, &control, Way::Down);
        tokio::pin!(up, down);
        // One way closed (a FIN, passed on): the other runs to its own end,
        // so a response after a half-close still arrives whole.
        tokio::select! {
            r = &mut up => match r {
                Ended::Closed => tokio::select! { r = &mut down => r, _ = resets.changed() => Ended::Reset },
                Ended::Reset => r,
            },
            r = &mut down => match r {
                Ended::Closed => tokio::select! { r = &mut up => r, _ = resets.changed() => Ended::Reset },
                Ended::Reset => r,
            },
            _ = resets.changed() => Ended::Reset,
        }
    };
    if cut == Ended::Reset {
        reset(server);
        reset(client);
    }
}

/// Close with a reset (SO_LINGER 0) rather than a FIN.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

#[derive(PartialEq, Eq)]
enum Ended {
    /// One side closed; the other side's close follows.
    Closed,
    Reset,
}

async fn wait_passing(link: &mut watch::Receiver<Link>) {
    while *link.borrow_and_update() == Link::Hold {
        if link.changed().await.is_err() {
            return;
        }
    }
}

async fn pump<R, W>(from: &mut R, to: &mut W, control: &Control, way: Way) -> Ended
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut link = control.link.subscribe();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) => {
                let _ = to.shutdown().await;
                return Ended::Closed;
            }
            Ok(n) => n,
            Err(_) => return Ended::Reset,
        };
        wait_passing(&mut link).await;
        if *link.borrow() == Link::Blackhole {
            control.swallowed.fetch_add(n as u64, Ordering::Relaxed);
            continue;
        }
        let delay = match *link.borrow() {
            Link::Delay(d) => d,
            _ => Duration::ZERO,
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut pass = n;
        let mut cut = false;
        if way == Way::Down {
            let armed = control.cut_after.swap(0, Ordering::Relaxed);
            if armed > 0 {
                pass = n.min(armed as usize);
                cut = true;
            }
        }
        if to.write_all(&buf[..pass]).await.is_err() {
            return Ended::Reset;
        }
        let counter = if way == Way::Up { &control.up } else { &control.down };
        counter.fetch_add(pass as u64, Ordering::Relaxed);
        if cut {
            let _ = to.flush().await;
            return Ended::Reset;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{ErrorKind, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    use super::{FaultProxy, Link};

    /// An echo server on loopback: what it reads, it writes back.
    fn echo() -> std::net::SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = l.local_addr().unwrap_or_else(|e| panic!("{e}"));
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 || s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    fn connect(p: &FaultProxy) -> TcpStream {
        let s = TcpStream::connect(p.addr()).unwrap_or_else(|e| panic!("{e}"));
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap_or_else(|e| panic!("{e}"));
        s
    }

    fn round_trip(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
        s.write_all(msg)?;
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got)?;
        Ok(got)
    }

    #[test]
    fn a_black_hole_throws_bytes_away_and_keeps_new_connections_from_upstream() {
        let p = FaultProxy::start(echo());
        let mut s = connect(&p);
        assert_eq!(round_trip(&mut s, b"before").unwrap_or_else(|e| panic!("{e}")), b"before");
        p.set(Link::Blackhole);
        s.set_read_timeout(Some(Duration::from_millis(300))).unwrap_or_else(|e| panic!("{e}"));
        let lost = round_trip(&mut s, b"into the hole");
        assert!(lost.is_err(), "nothing comes back through a black hole");
        let mut fresh = connect(&p);
        fresh.set_read_timeout(Some(Duration::from_millis(300))).unwrap_or_else(|e| panic!("{e}"));
        assert!(round_trip(&mut fresh, b"new").is_err(), "a new connection reaches nothing");
        p.set(Link::Pass);
        // What the hole took never arrives; the old connection works again.
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(round_trip(&mut s, b"after").unwrap_or_else(|e| panic!("{e}")), b"after");
        assert!(p.swallowed() >= b"into the hole".len() as u64);
    }

    #[test]
    fn it_passes_delays_holds_then_releases_what_it_held() {
        let p = FaultProxy::start(echo());
        let mut s = connect(&p);
        assert_eq!(round_trip(&mut s, b"hello").unwrap_or_else(|e| panic!("{e}")), b"hello");
        p.set(Link::Delay(Duration::from_millis(150)));
        let t = Instant::now();
        assert_eq!(round_trip(&mut s, b"slow").unwrap_or_else(|e| panic!("{e}")), b"slow");
        assert!(t.elapsed() >= Duration::from_millis(300), "a delay each way: {:?}", t.elapsed());
        p.set(Link::Hold);
        s.set_read_timeout(Some(Duration::from_millis(500))).unwrap_or_else(|e| panic!("{e}"));
        s.write_all(b"held").unwrap_or_else(|e| panic!("{e}"));
        let mut buf = [0u8; 4];
        let e = s.read(&mut buf).expect_err("nothing passes a held link");
        assert!(matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{e}");
        p.set(Link::Pass);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap_or_else(|e| panic!("{e}"));
        s.read_exact(&mut buf).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&buf, b"held", "what was held passes, in order, when the link is back");
        // Counted after each write: the last may trail the read by a moment.
        let t = Instant::now();
        while p.bytes().1 < 13 && t.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(p.bytes(), (13, 13), "hello, slow and held, each way");
    }

    #[test]
    fn a_reset_breaks_open_connections_and_a_cut_passes_part_of_a_response() {
        let p = FaultProxy::start(echo());
        let mut a = connect(&p);
        assert!(round_trip(&mut a, b"x").is_ok());
        p.reset_all();
        std::thread::sleep(Duration::from_millis(200));
        let e = round_trip(&mut a, b"y").expect_err("reset");
        assert!(
            matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe | ErrorKind::UnexpectedEof),
            "{e}"
        );
        // New connections are served again.
        let mut b = connect(&p);
        assert_eq!(round_trip(&mut b, b"again").unwrap_or_else(|e| panic!("{e}")), b"again");
        p.cut_next_response_after(3);
        b.write_all(b"0123456789").unwrap_or_else(|e| panic!("{e}"));
        let mut got = Vec::new();
        let end = b.read_to_end(&mut got);
        assert_eq!(got, b"012", "three bytes, then the cut");
        assert!(end.is_err(), "and a reset, not a clean close: {end:?}");
        assert_eq!(p.connections(), 2);
    }
}
