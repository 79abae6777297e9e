//! Byte comparison for the hot paths of a component.

/// Byte equality that does not call `memcmp`. The `memcmp` a component
/// links (wasi-libc's, built without SIMD) compares one byte per loop
/// turn, each with the engine's epoch check: the SDK's kept-body test ran
/// it over every payload and it was 18% of the samples of the whole
/// `ledger` bench. Eight bytes per turn here.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.as_ptr() == b.as_ptr() {
        return true;
    }
    let (a_words, a_tail) = a.as_chunks::<8>();
    let (b_words, b_tail) = b.as_chunks::<8>();
    a_words.iter().zip(b_words).all(|(x, y)| u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y))
        && a_tail.iter().zip(b_tail).all(|(x, y)| x == y)
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn agrees_with_slice_equality_in_the_words_and_the_tail() {
        for len in 0..=19usize {
            let a: Vec<u8> = (0..len as u8).collect();
            assert!(same(&a, &a.clone()), "len {len}");
            assert!(same(&a, &a), "len {len}, the same slice");
            for at in 0..len {
                let mut b = a.clone();
                b[at] ^= 0x80;
                assert!(!same(&a, &b), "len {len}, differs at {at}");
            }
            assert!(!same(&a, &[a.as_slice(), b"x"].concat()), "len {len} against {}", len + 1);
        }
    }
}
