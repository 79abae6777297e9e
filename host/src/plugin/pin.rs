//! A plugin pinned by digest (`[[plugins]] digest = "blake3:…"` or
//! `"sha256:…"`): a file that is not the one the config was written for
//! stops the start, instead of running under a trusted name. The path says
//! where the plugin is; the digest says what it must be.

use std::fmt;
use std::str::FromStr;

use sha2::Digest as _;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    Blake3([u8; 32]),
    Sha256([u8; 32]),
}

impl FromStr for Pin {
    type Err = String;
    fn from_str(s: &str) -> Result<Pin, String> {
        let (algo, hex) = s.split_once(':').ok_or_else(|| {
            format!("{s:?} is not a digest: \"blake3:<64 hex digits>\" or \"sha256:<64 hex digits>\"")
        })?;
        if !["blake3", "sha256"].contains(&algo) {
            return Err(format!("{s:?}: {algo:?} is not a digest sluice knows: blake3 or sha256"));
        }
        let bytes = hex_32(hex).ok_or_else(|| format!("{s:?}: the digest must be 64 hex digits"))?;
        Ok(if algo == "blake3" { Pin::Blake3(bytes) } else { Pin::Sha256(bytes) })
    }
}

fn hex_32(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl fmt::Display for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pin::Blake3(d) => write!(f, "blake3:{}", hex(d)),
            Pin::Sha256(d) => write!(f, "sha256:{}", hex(d)),
        }
    }
}

impl Pin {
    /// The same kind of digest of `bytes`.
    pub(crate) fn of(&self, bytes: &[u8]) -> Pin {
        match self {
            Pin::Blake3(_) => Pin::Blake3(*blake3::hash(bytes).as_bytes()),
            Pin::Sha256(_) => Pin::Sha256(sha2::Sha256::digest(bytes).into()),
        }
    }

    /// `Err(found)` when `bytes` are not what is pinned.
    pub(crate) fn check(&self, bytes: &[u8]) -> Result<(), Pin> {
        let found = self.of(bytes);
        if found == *self { Ok(()) } else { Err(found) }
    }
}

/// Why a pinned load did not give a plugin.
#[derive(Debug)]
pub(crate) enum Refused<E> {
    /// The bytes are not the pinned ones.
    Mismatch { pinned: Pin, found: Pin },
    /// The load itself failed.
    Load(E),
}

/// Load a plugin that may be pinned, the one way every pinned plugin
/// (a chain's stage, a sink's classifier) is loaded. The file is checked
/// before it is compiled, so bytes that are not the pinned ones never run
/// (not even `init`); a blake3 pin is checked again against the digest of
/// what was compiled (`digest`), as the file may have been replaced in
/// between. A file that cannot be read is left to `load` to report.
pub(crate) fn verify<T, E>(
    pin: Option<&Pin>,
    path: &std::path::Path,
    load: impl FnOnce() -> Result<T, E>,
    digest: impl FnOnce(&T) -> blake3::Hash,
) -> Result<T, Refused<E>> {
    let mismatch = |pinned: &Pin, found: Pin| Refused::Mismatch { pinned: pinned.clone(), found };
    if let Some(pin) = pin
        && let Ok(bytes) = std::fs::read(path)
    {
        pin.check(&bytes).map_err(|found| mismatch(pin, found))?;
    }
    let loaded = load().map_err(Refused::Load)?;
    if let Some(pin @ Pin::Blake3(want)) = pin {
        let compiled = digest(&loaded);
        if compiled.as_bytes() != want {
            return Err(mismatch(pin, Pin::Blake3(*compiled.as_bytes())));
        }
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_kinds_and_checks_bytes() {
        let b3 = format!("blake3:{}", blake3::hash(b"wasm").to_hex());
        let pin: Pin = b3.parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pin.to_string(), b3);
        assert_eq!(pin.check(b"wasm"), Ok(()));
        assert_eq!(
            pin.check(b"other").map_err(|f| f.to_string()),
            Err(format!("blake3:{}", blake3::hash(b"other").to_hex()))
        );
        // sha256 of "abc", FIPS 180-2's example.
        let sha: Pin = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sha.check(b"abc"), Ok(()));
        assert!("md5:00".parse::<Pin>().is_err_and(|e| e.contains("blake3 or sha256") || e.contains("64 hex")));
        assert!("blake3:xyz".parse::<Pin>().is_err_and(|e| e.contains("64 hex digits")));
        assert!("deadbeef".parse::<Pin>().is_err_and(|e| e.contains("not a digest")));
    }

    #[test]
    fn a_pinned_load_checks_the_file_before_and_the_compiled_digest_after() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("p.wasm");
        std::fs::write(&path, b"wasm").unwrap_or_else(|e| panic!("{e}"));
        let pin: Pin = format!("blake3:{}", blake3::hash(b"wasm").to_hex()).parse().unwrap_or_else(|e| panic!("{e}"));
        let digest = |bytes: &&[u8]| blake3::hash(bytes);
        let load = |bytes: &'static [u8]| move || Ok::<_, String>(bytes);
        assert!(verify(Some(&pin), &path, load(b"wasm"), digest).is_ok());
        // What was compiled is not what was checked: the file changed in between.
        assert!(matches!(
            verify(Some(&pin), &path, load(b"other"), digest),
            Err(Refused::Mismatch { found: Pin::Blake3(f), .. }) if f == *blake3::hash(b"other").as_bytes()
        ));
        // Bytes that are not the pinned ones are never loaded.
        std::fs::write(&path, b"swapped").unwrap_or_else(|e| panic!("{e}"));
        let mut loaded = false;
        let refused = verify(
            Some(&pin),
            &path,
            || {
                loaded = true;
                Ok::<_, String>(&b"swapped"[..])
            },
            digest,
        );
        assert!(matches!(refused, Err(Refused::Mismatch { .. })) && !loaded);
        // Unpinned: whatever loads.
        assert!(verify(None, &path, load(b"anything"), digest).is_ok());
        assert!(matches!(verify(None, &path, || Err::<&[u8], _>("gone".to_string()), digest), Err(Refused::Load(_))));
    }
}
