//! Line framing: LF, CRLF and a bare CR all end a line (the Loghub Apache
//! sample has all three), and a last line without an end still counts.
//! Offsets are byte positions of each line's first byte, so a line can be
//! found again in its file.

use std::io::BufRead;

/// One framed line: where it starts and its bytes without the line end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// Reads lines from any `BufRead`, tracking byte offsets.
pub struct LineReader<R> {
    inner: R,
    offset: u64,
    /// A CR ended the previous line: an LF right after it belongs to it.
    after_cr: bool,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R) -> Self {
        Self::starting_at(inner, 0)
    }

    /// A reader whose input begins at byte `offset` of its file.
    pub fn starting_at(inner: R, offset: u64) -> Self {
        LineReader { inner, offset, after_cr: false }
    }

    /// The byte position after everything returned so far.
    pub fn position(&self) -> u64 {
        self.offset
    }

    /// The next line, or none at the end of input.
    pub fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        let mut bytes = Vec::new();
        let buf = self.inner.fill_buf()?;
        if buf.is_empty() {
            return Ok(None);
        }
        // The LF of a CRLF whose CR ended the previous line.
        if std::mem::take(&mut self.after_cr) && buf[0] == b'\n' {
            self.inner.consume(1);
            self.offset += 1;
        }
        let start = self.offset;
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                // Last line without a line end.
                return Ok(if bytes.is_empty() && self.offset == start {
                    None
                } else {
                    Some(Line { offset: start, bytes })
                });
            }
            match buf.iter().position(|b| *b == b'\n' || *b == b'\r') {
                Some(i) => {
                    bytes.extend_from_slice(&buf[..i]);
                    let ended_by_cr = buf[i] == b'\r';
                    // A CRLF split across two reads is handled by `after_cr`.
                    let crlf_here = ended_by_cr && buf.get(i + 1) == Some(&b'\n');
                    let used = i + 1 + usize::from(crlf_here);
                    self.inner.consume(used);
                    self.offset += used as u64;
                    self.after_cr = ended_by_cr && !crlf_here;
                    return Ok(Some(Line { offset: start, bytes }));
                }
                None => {
                    let n = buf.len();
                    bytes.extend_from_slice(buf);
                    self.inner.consume(n);
                    self.offset += n as u64;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(input: &[u8], buffer: usize) -> Vec<(u64, String)> {
        let mut r = LineReader::new(std::io::BufReader::with_capacity(buffer, input));
        let mut out = Vec::new();
        while let Ok(Some(l)) = r.next_line() {
            out.push((l.offset, String::from_utf8_lossy(&l.bytes).into_owned()));
        }
        out
    }

    #[test]
    fn lf_crlf_bare_cr_and_unterminated_last_line() {
        let input = b"a\nbb\r\nc\rdd\r\r\nlast";
        let want: Vec<(u64, String)> = vec![
            (0, "a".into()),
            (2, "bb".into()),
            (6, "c".into()),
            (8, "dd".into()),
            (11, "".into()),
            (13, "last".into()),
        ];
        // Every buffer size, so line ends split across reads are covered.
        for buffer in 1..=input.len() + 1 {
            assert_eq!(frame(input, buffer), want, "buffer {buffer}");
        }
    }

    #[test]
    fn offsets_point_at_each_line_in_the_input() {
        let input = b"one\r\ntwo\rthree\n";
        for (offset, text) in frame(input, 3) {
            assert!(input[offset as usize..].starts_with(text.as_bytes()));
        }
        assert_eq!(frame(b"", 8), vec![]);
        assert_eq!(frame(b"\n", 8), vec![(0, String::new())]);
    }
}
