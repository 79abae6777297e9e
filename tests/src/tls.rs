//! TLS in front of a plain broker, for the suites. tansu 0.6 cannot serve
//! TLS itself: its `--cert` and `--key` flags are one clap group, which
//! admits only one of them, and its TLS config needs both (tansu-cli
//! `cli/broker.rs`). So this front speaks TLS to the clients, with a
//! certificate made for 127.0.0.1 on the spot, and plain TCP to the
//! broker on loopback. What sluice's TLS settings meet is a real
//! handshake, verified against the CA the test gives it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use openssl::asn1::Asn1Time;
use openssl::bn::BigNum;
use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::rsa::Rsa;
use openssl::x509::extension::{BasicConstraints, SubjectAlternativeName};
use openssl::x509::{X509Builder, X509NameBuilder};
use tokio::net::{TcpListener, TcpStream};

/// A self-signed certificate for 127.0.0.1 (its own CA) and its key, PEM.
pub fn self_signed() -> (Vec<u8>, Vec<u8>) {
    let made = || -> Result<(Vec<u8>, Vec<u8>), openssl::error::ErrorStack> {
        let key = PKey::from_rsa(Rsa::generate(2048)?)?;
        let mut name = X509NameBuilder::new()?;
        name.append_entry_by_text("CN", "127.0.0.1")?;
        let name = name.build();
        let mut b = X509Builder::new()?;
        b.set_version(2)?;
        b.set_serial_number(&*BigNum::from_u32(rand_serial())?.to_asn1_integer()?)?;
        b.set_subject_name(&name)?;
        b.set_issuer_name(&name)?;
        b.set_pubkey(&key)?;
        b.set_not_before(&*Asn1Time::days_from_now(0)?)?;
        b.set_not_after(&*Asn1Time::days_from_now(2)?)?;
        let san = SubjectAlternativeName::new().ip("127.0.0.1").build(&b.x509v3_context(None, None))?;
        b.append_extension(san)?;
        b.append_extension(BasicConstraints::new().critical().ca().build()?)?;
        b.sign(&key, MessageDigest::sha256())?;
        Ok((b.build().to_pem()?, key.private_key_to_pem_pkcs8()?))
    };
    made().unwrap_or_else(|e| panic!("a self-signed certificate: {e}"))
}

/// Distinct serials for the certificates of one run.
fn rand_serial() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(1) | 1
}

pub struct TlsFront {
    ca: PathBuf,
    _dir: tempfile::TempDir,
    /// Dropping it stops the listener and every connection.
    _runtime: tokio::runtime::Runtime,
}

impl TlsFront {
    /// TLS on loopback port `port`, relayed in plain TCP to `upstream`.
    pub fn start_on(port: u16, upstream: SocketAddr) -> TlsFront {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (cert, key) = self_signed();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, &cert).unwrap_or_else(|e| panic!("{e}"));
        let identity = native_tls::Identity::from_pkcs8(&cert, &key).unwrap_or_else(|e| panic!("TLS identity: {e}"));
        let acceptor = native_tls::TlsAcceptor::new(identity).unwrap_or_else(|e| panic!("TLS acceptor: {e}"));
        let acceptor = tokio_native_tls::TlsAcceptor::from(acceptor);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tls-front")
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let listener = runtime
            .block_on(TcpListener::bind(("127.0.0.1", port)))
            .unwrap_or_else(|e| panic!("the TLS front cannot listen on 127.0.0.1:{port}: {e}"));
        runtime.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that fails the handshake (a wrong CA on its
                    // side) is simply closed: its own error says why.
                    let Ok(mut tls) = acceptor.accept(client).await else { return };
                    let Ok(mut plain) = TcpStream::connect(upstream).await else { return };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront { ca, _dir: dir, _runtime: runtime }
    }

    /// The CA (PEM) a client verifies this front with.
    pub fn ca(&self) -> &Path {
        &self.ca
    }
}
