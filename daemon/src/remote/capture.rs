//! Bounded capture of one output stream: keeps the first and last halves of the byte budget
//! and counts everything, so memory stays fixed whatever a command prints.

use std::collections::VecDeque;

use super::Output;
use super::spool::Spooled;

/// Head and tail of a stream under a byte budget, with its exact total.
pub struct Capture {
    head_limit: usize,
    tail_limit: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capture {
    /// A capture keeping at most `limit` bytes: the first `limit / 2` (rounded up) and the last
    /// `limit / 2`.
    pub fn new(limit: u64) -> Self {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let head_limit = limit.div_ceil(2);
        Self {
            head_limit,
            tail_limit: limit - head_limit,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_limit - self.head.len();
        if room > 0 {
            let take = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.tail_limit {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_limit..]);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_limit);
            self.tail.drain(..overflow);
            self.tail.extend(bytes);
        }
    }

    /// The byte budget this capture was made with.
    pub fn limit(&self) -> u64 {
        (self.head_limit + self.tail_limit) as u64
    }

    /// What was kept of this stream. When bytes were dropped, the head is cut back and the
    /// tail cut forward to character boundaries, so text never turns into base64 because of
    /// a cut.
    pub fn finish(self, spooled: Option<Spooled>) -> Output {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let mut head = self.head;
        let mut tail: Vec<u8> = self.tail.into();
        let omitted = (kept < self.total).then(|| {
            head.truncate(utf8_head_boundary(&head));
            let skip = utf8_tail_boundary(&tail);
            tail.drain(..skip);
            head.len() as u64..self.total - tail.len() as u64
        });
        head.extend_from_slice(&tail);
        Output {
            bytes: head,
            total_bytes: self.total,
            omitted,
            spooled,
        }
    }
}

/// The length of `head` without a trailing incomplete UTF-8 sequence (only such a cut is
/// undone: bytes that are invalid anyway stay).
pub(crate) fn utf8_head_boundary(head: &[u8]) -> usize {
    // A cut character has at most three of its bytes here, the first a lead byte: the last
    // byte that is no continuation byte, among the last three, is where it would start.
    let lead = (head.len().saturating_sub(3)..head.len())
        .rev()
        .find(|&i| (head[i] & 0xC0) != 0x80);
    match lead.map(|start| (start, std::str::from_utf8(&head[start..]))) {
        Some((start, Err(e))) if e.error_len().is_none() => start + e.valid_up_to(),
        _ => head.len(),
    }
}

/// How many leading bytes of `tail` are continuation bytes of a character cut in half.
pub(crate) fn utf8_tail_boundary(tail: &[u8]) -> usize {
    tail.iter()
        .take(3)
        .take_while(|b| (**b & 0xC0) == 0x80)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(limit: u64, chunks: &[&[u8]]) -> Output {
        let mut c = Capture::new(limit);
        for chunk in chunks {
            c.push(chunk);
        }
        c.finish(None)
    }

    #[test]
    fn exactly_at_limit_is_whole() {
        let out = capture(10, &[b"01234", b"56789"]);
        assert_eq!(out.bytes, b"0123456789");
        assert_eq!(out.total_bytes, 10);
        assert_eq!(out.omitted, None);
    }

    #[test]
    fn one_past_limit_keeps_head_and_tail() {
        let out = capture(10, &[b"0123456789", b"A"]);
        assert_eq!(out.bytes, b"012346789A");
        assert_eq!(out.omitted, Some(5..6));
        assert_eq!(out.total_bytes, 11);
    }

    #[test]
    fn many_small_pushes_match_one_big_push() {
        let data: Vec<u8> = (0..10_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let whole = capture(100, &[&data]);
        let pieces: Vec<&[u8]> = data.chunks(7).collect();
        let pieces = capture(100, &pieces);
        assert_eq!(
            (pieces.bytes, pieces.omitted),
            (whole.bytes.clone(), whole.omitted.clone())
        );
        assert_eq!(whole.total_bytes, 10_000);
        assert_eq!(whole.bytes.len(), 100);
    }

    #[test]
    fn cuts_never_split_characters() {
        // "é" is two bytes: a limit of 6 splits characters on both sides.
        let text = "éééééééééé".as_bytes();
        let out = capture(6, &[text]);
        assert_eq!(out.bytes, "éé".as_bytes());
        let omitted = out.omitted.unwrap();
        assert_eq!(
            omitted.end - omitted.start + out.bytes.len() as u64,
            out.total_bytes
        );
    }

    /// Every cut of text made of 1- to 4-byte characters keeps the whole characters before
    /// it and nothing more; invalid bytes at the end stay.
    #[test]
    fn a_head_cut_keeps_exactly_the_whole_characters() {
        for text in [
            "a\u{e9}\u{20ac}\u{1f600}",
            "\u{2501}\u{2501}\u{2501}\u{2501}",
        ] {
            let text = text.repeat(3);
            for cut in 0..=text.len() {
                let whole = (0..=cut).rev().find(|&i| text.is_char_boundary(i)).unwrap();
                assert_eq!(utf8_head_boundary(&text.as_bytes()[..cut]), whole, "{cut}");
            }
        }
        assert_eq!(utf8_head_boundary(b"ab\x80\x80"), 4);
        assert_eq!(utf8_head_boundary(b"ab\xff"), 3);
    }

    #[test]
    fn binary_is_kept_as_it_came() {
        let out = capture(16, &[&[0xff, 0xfe, 0x00]]);
        assert_eq!(out.bytes, [0xff, 0xfe, 0x00]);
        assert_eq!(out.omitted, None);
    }

    #[test]
    fn zero_limit_keeps_nothing_but_counts() {
        let out = capture(0, &[b"abc"]);
        assert_eq!((out.bytes.len(), out.total_bytes), (0, 3));
        assert_eq!(out.omitted, Some(0..3));
    }
}
