//! Line framing: LF, CRLF and a bare CR all end a line (the Loghub Apache
//! sample has all three), and a last line without an end still counts.
//! Offsets are byte positions of each line's first byte, so a line can be
//! found again in its file.

use std::io::BufRead;

/// One framed line: where it starts and its bytes without the line end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The line's first byte in the stream.
    pub offset: u64,
    /// The line, without its end.
    pub bytes: Vec<u8>,
}

/// Reads lines from any `BufRead`, tracking byte offsets.
pub struct LineReader<R> {
    inner: R,
    offset: u64,
    /// A CR ended the previous line: an LF right after it belongs to it.
    after_cr: bool,
    /// Bytes of a line whose end has not been read yet (follow mode: the
    /// writer may be in the middle of it), and where that line starts.
    partial: Vec<u8>,
    partial_start: u64,
}

impl<R: BufRead> LineReader<R> {
    /// A reader from the stream's first byte.
    pub fn new(inner: R) -> Self {
        Self::starting_at(inner, 0)
    }

    /// A reader whose input begins at byte `offset` of its file.
    pub(crate) fn starting_at(inner: R, offset: u64) -> Self {
        LineReader { inner, offset, after_cr: false, partial: Vec::new(), partial_start: offset }
    }

    /// The next line, or none at the end of input. A last line without a
    /// line end is a line: the input is complete.
    pub fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        let mut bytes = Vec::new();
        Ok(self.next_line_into(&mut bytes)?.map(|offset| Line { offset, bytes }))
    }

    /// [`LineReader::next_line`], the line's bytes appended to `out`; returns
    /// where the line starts in the input. A batch frames all its lines into
    /// one buffer this way: one allocation per batch, not per line.
    pub(crate) fn next_line_into(&mut self, out: &mut Vec<u8>) -> std::io::Result<Option<u64>> {
        match self.next_complete_line_into(out)? {
            Some(offset) => Ok(Some(offset)),
            None => Ok(self.take_partial_into(out)),
        }
    }

    /// The next line that has its line end, its bytes appended to `out`;
    /// returns where the line starts in the input, or none. Bytes after the
    /// last line end are kept, not returned (nothing is left in `out`): a
    /// file still being written may be in the middle of a line, and the
    /// rest of it comes with the next read.
    pub(crate) fn next_complete_line_into(&mut self, out: &mut Vec<u8>) -> std::io::Result<Option<u64>> {
        let begin = out.len();
        let start = if self.partial.is_empty() {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                return Ok(None);
            }
            // The LF of a CRLF whose CR ended the previous line.
            if std::mem::take(&mut self.after_cr) && buf[0] == b'\n' {
                self.inner.consume(1);
                self.offset += 1;
            }
            self.offset
        } else {
            out.extend_from_slice(&self.partial);
            self.partial.clear();
            self.partial_start
        };
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                // No line end yet: the bytes wait in `partial`, not in `out`.
                self.partial.extend_from_slice(&out[begin..]);
                out.truncate(begin);
                self.partial_start = start;
                return Ok(None);
            }
            // memchr2 scans 32 bytes per step; a byte loop here was 6% of the
            // front thread's samples in `pipeline_file`.
            match memchr::memchr2(b'\n', b'\r', buf) {
                Some(i) => {
                    out.extend_from_slice(&buf[..i]);
                    let ended_by_cr = buf[i] == b'\r';
                    // A CRLF split across two reads is handled by `after_cr`.
                    let crlf_here = ended_by_cr && buf.get(i + 1) == Some(&b'\n');
                    let used = i + 1 + usize::from(crlf_here);
                    self.inner.consume(used);
                    self.offset += used as u64;
                    self.after_cr = ended_by_cr && !crlf_here;
                    return Ok(Some(start));
                }
                None => {
                    let n = buf.len();
                    out.extend_from_slice(buf);
                    self.inner.consume(n);
                    self.offset += n as u64;
                }
            }
        }
    }

    /// The bytes after the last line end, as a final line appended to `out`
    /// (the input is finished: a rotated file, or the end of a file not
    /// followed); returns where it starts.
    pub(crate) fn take_partial_into(&mut self, out: &mut Vec<u8>) -> Option<u64> {
        if self.partial.is_empty() {
            return None;
        }
        out.extend_from_slice(&self.partial);
        self.partial.clear();
        Some(self.partial_start)
    }

    /// The byte position after everything returned so far (bytes of a
    /// partial line kept back are not included).
    pub(crate) fn position(&self) -> u64 {
        if self.partial.is_empty() { self.offset } else { self.partial_start }
    }

    /// The byte position after everything read from the input, a partial
    /// line kept back included: what is left beyond it is unread.
    pub(crate) fn consumed(&self) -> u64 {
        self.offset
    }

    pub(crate) fn get_ref(&self) -> &R {
        &self.inner
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
    fn a_line_being_written_is_not_returned_until_its_end_arrives() {
        // A reader over a file that grows: simulate with a shared buffer.
        use std::io::Read;
        struct Growing(std::rc::Rc<std::cell::RefCell<Vec<u8>>>, usize);
        impl Read for Growing {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                let data = self.0.borrow();
                let n = out.len().min(data.len() - self.1);
                out[..n].copy_from_slice(&data[self.1..self.1 + n]);
                self.1 += n;
                Ok(n)
            }
        }
        let complete = |r: &mut LineReader<_>| {
            let mut bytes = Vec::new();
            r.next_complete_line_into(&mut bytes).ok().flatten().map(|offset| (offset, bytes))
        };
        let file = std::rc::Rc::new(std::cell::RefCell::new(b"one\ntw".to_vec()));
        let mut r = LineReader::new(std::io::BufReader::with_capacity(4, Growing(file.clone(), 0)));
        let first = complete(&mut r);
        assert_eq!(first, Some((0, b"one".to_vec())));
        assert_eq!(complete(&mut r), None, "\"tw\" has no line end yet");
        assert_eq!(r.position(), 4, "a partial line is not past the position");
        file.borrow_mut().extend_from_slice(b"o\nthree");
        let second = complete(&mut r);
        assert_eq!(second, Some((4, b"two".to_vec())));
        assert_eq!(complete(&mut r), None);
        // The input is finished: its tail is its last line.
        let mut tail = Vec::new();
        assert_eq!(r.take_partial_into(&mut tail).map(|offset| (offset, tail)), Some((8, b"three".to_vec())));
    }

    #[test]
    fn a_batch_of_lines_is_framed_into_one_buffer_and_a_partial_line_leaves_nothing_in_it() {
        let input = b"one\r\ntwo\rthree";
        for buffer in 1..=input.len() + 1 {
            let mut r = LineReader::new(std::io::BufReader::with_capacity(buffer, &input[..]));
            let mut data = b"before".to_vec();
            let mut lines = Vec::new();
            loop {
                let begin = data.len();
                match r.next_complete_line_into(&mut data) {
                    Ok(Some(offset)) => lines.push((offset, begin..data.len())),
                    _ => break,
                }
            }
            assert_eq!(data, b"beforeonetwo", "buffer {buffer}: \"three\" has no line end and is not in the batch");
            assert_eq!(lines, [(0, 6..9), (5, 9..12)], "buffer {buffer}");
            // The input is finished: the tail is the last line, appended.
            assert_eq!(r.take_partial_into(&mut data), Some(9));
            assert_eq!(&data[12..], b"three");
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
