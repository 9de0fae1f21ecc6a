//! What a run has done so far, for whoever follows it while it goes (progress notifications,
//! command handles, a hand-off): its process group, the bytes of each stream, and the last
//! line of output; for an `exec` under way, the last bytes of each stream too (no file holds
//! its output, and the person may read it: `sshmcp output`). Only runs that someone follows
//! carry one.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::watch;

/// Bytes of a line kept for progress messages.
pub const LINE_BYTES: usize = 200;

/// The two output streams, as indexes into [`Seen::bytes`].
pub const STDOUT: usize = 0;
pub const STDERR: usize = 1;

/// Bytes of each stream an observer that keeps tails holds: what `sshmcp output` can show of
/// an `exec` under way, bounded whatever the command prints.
pub const TAIL_BYTES: usize = 64 * 1024;

/// A run's progress, shared between the run and its followers.
pub struct Observer {
    seen: watch::Sender<Seen>,
    /// The last [`TAIL_BYTES`] of each stream, while kept.
    tails: Mutex<Option<[Tail; 2]>>,
}

/// The end of one stream: its last bytes and the offset of the first of them.
#[derive(Default)]
struct Tail {
    start: u64,
    bytes: VecDeque<u8>,
}

impl Tail {
    /// Keeps the last [`TAIL_BYTES`] of what was and `bytes`: the buffer never grows past it.
    fn push(&mut self, bytes: &[u8]) {
        let kept = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
        let over = (self.bytes.len() + kept.len()).saturating_sub(TAIL_BYTES);
        self.bytes.drain(..over);
        self.bytes.extend(kept);
        self.start += (over + bytes.len() - kept.len()) as u64;
    }

    /// Bytes `[from, to)`, or from the first one kept when `from` went; and the offset of the
    /// first returned.
    fn range(&self, from: u64, to: u64) -> (u64, Vec<u8>) {
        let first = from.max(self.start);
        let skip = usize::try_from(first - self.start).unwrap_or(usize::MAX);
        let take = usize::try_from(to.saturating_sub(first)).unwrap_or(usize::MAX);
        let end = skip.saturating_add(take).min(self.bytes.len());
        let skip = skip.min(end);
        let (front, back) = self.bytes.as_slices();
        let mut out = Vec::with_capacity(end - skip);
        if skip < front.len() {
            out.extend_from_slice(&front[skip..end.min(front.len())]);
        }
        if end > front.len() {
            out.extend_from_slice(&back[skip.saturating_sub(front.len())..end - front.len()]);
        }
        (first, out)
    }
}

/// A snapshot of a run's progress.
#[derive(Clone, Default)]
pub struct Seen {
    /// The program's process group, once its shell reported it.
    pub pid: Option<u32>,
    /// The program itself started: its working directory was entered (and, under sudo, root's
    /// shell began). Before that a failure is the call's, not the command's.
    pub started: bool,
    /// When this daemon saw it start: a run that waited for a channel started after it was
    /// asked for.
    pub started_at: Option<std::time::SystemTime>,
    /// Once the program ended: whether processes of its group outlived it.
    pub group_left: Option<bool>,
    /// Bytes of each stream so far (`STDOUT`, `STDERR`): what reached the run's spool when it
    /// has one.
    pub bytes: [u64; 2],
    /// Whether bytes of each stream were dropped at the spool's cap.
    pub dropped: [bool; 2],
    lines: [LineTail; 2],
    /// The stream that printed last.
    latest: usize,
}

/// The end of one stream: the line being printed and the last whole one, each cut to
/// [`LINE_BYTES`].
#[derive(Clone, Default)]
struct LineTail {
    current: Vec<u8>,
    complete: Vec<u8>,
}

impl LineTail {
    fn push(&mut self, bytes: &[u8]) {
        let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
            append(&mut self.current, bytes);
            return;
        };
        // The whole lines this chunk ends: the first finishes the one being printed. The
        // last of them that holds anything is kept (blank lines at the end of the output
        // say nothing).
        let before = &bytes[..end];
        let first_end = before.iter().position(|b| *b == b'\n');
        let later = first_end.and_then(|at| {
            before[at + 1..]
                .rsplit(|b| *b == b'\n')
                .find(|line| !blank(line))
        });
        let line = match later {
            Some(line) => line.to_vec(),
            None => {
                append(
                    &mut self.current,
                    &before[..first_end.unwrap_or(before.len())],
                );
                std::mem::take(&mut self.current)
            }
        };
        if !blank(&line) {
            self.complete = line;
            self.complete.truncate(LINE_BYTES + 1);
        }
        self.current.clear();
        append(&mut self.current, &bytes[end + 1..]);
    }

    fn last(&self) -> &[u8] {
        match self.current.is_empty() {
            true => &self.complete,
            false => &self.current,
        }
    }
}

/// Whether a line says nothing: only spaces, tabs or a `\r` (CRLF output).
fn blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Keeps a line's first [`LINE_BYTES`], and one byte more to tell where the cut fell.
fn append(line: &mut Vec<u8>, bytes: &[u8]) {
    let room = (LINE_BYTES + 1).saturating_sub(line.len());
    line.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

impl Seen {
    /// Bytes of both streams.
    pub fn total(&self) -> u64 {
        self.bytes[STDOUT] + self.bytes[STDERR]
    }

    /// The last line of output (of the stream that printed last), lossy UTF-8, cut to
    /// [`LINE_BYTES`]: a person is shown it, so never ending in the start of a session key
    /// the cut would hide from the redaction (the byte kept past the limit tells).
    pub fn last_line(&self) -> String {
        let line = String::from_utf8_lossy(self.lines[self.latest].last());
        sshmcp_proto::text::cut_clear(&line, LINE_BYTES).to_string()
    }
}

impl Observer {
    pub fn new() -> Self {
        Self {
            seen: watch::channel(Seen::default()).0,
            tails: Mutex::new(None),
        }
    }

    /// An observer that also keeps the last bytes of each stream.
    pub fn keeping_tails() -> Self {
        Self {
            tails: Mutex::new(Some(Default::default())),
            ..Self::new()
        }
    }

    fn tails(&self) -> std::sync::MutexGuard<'_, Option<[Tail; 2]>> {
        self.tails
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Bytes `[from, to)` of `stream` as far as its tail still holds them (from its first
    /// byte kept when `from` went), and the offset of the first; none when no tail is kept.
    pub fn tail(&self, stream: usize, from: u64, to: u64) -> Option<(u64, Vec<u8>)> {
        self.tails()
            .as_ref()
            .map(|tails| tails[stream].range(from, to))
    }

    /// Stops keeping tails: the run's output has files that hold all of it.
    pub fn drop_tails(&self) {
        self.tails().take();
    }

    /// The end of a run another daemon followed: its group, whether that group outlived it,
    /// and the bytes its files hold.
    pub fn finished(pid: Option<u32>, group_left: Option<bool>, bytes: [u64; 2]) -> Self {
        Self {
            seen: watch::channel(Seen {
                pid,
                started: true,
                group_left,
                bytes,
                ..Seen::default()
            })
            .0,
            tails: Mutex::new(None),
        }
    }

    pub fn seen(&self) -> Seen {
        self.seen.borrow().clone()
    }

    /// When the program started, once it did (see [`Seen::started_at`]).
    pub fn started_at(&self) -> Option<std::time::SystemTime> {
        self.seen.borrow().started_at
    }

    pub fn pid(&self) -> Option<u32> {
        self.seen.borrow().pid
    }

    /// What is known of the run's markers so far: the group, the start, and the group's fate
    /// at the end (without copying the rest).
    pub(super) fn marks(&self) -> (bool, bool, bool) {
        let seen = self.seen.borrow();
        (seen.pid.is_some(), seen.started, seen.group_left.is_some())
    }

    /// Wakes on every change.
    pub fn subscribe(&self) -> watch::Receiver<Seen> {
        self.seen.subscribe()
    }

    pub(super) fn set_pid(&self, pid: u32) {
        self.seen.send_modify(|s| s.pid = Some(pid));
    }

    pub(super) fn set_started(&self) {
        self.seen.send_modify(|s| {
            s.started = true;
            s.started_at.get_or_insert_with(std::time::SystemTime::now);
        });
    }

    pub(super) fn set_group_left(&self, left: bool) {
        self.seen.send_modify(|s| s.group_left = Some(left));
    }

    /// Counts `bytes` of `stream` (after they reached the run's spool, so a follower that
    /// reads the spool up to this count finds them there); `dropped` says bytes after them
    /// were not kept.
    pub(crate) fn push(&self, stream: usize, bytes: &[u8], dropped: bool) {
        if bytes.is_empty() && !dropped {
            return;
        }
        // The tail first: a follower that sees the count finds the bytes.
        if let Some(tails) = self.tails().as_mut() {
            tails[stream].push(bytes);
        }
        self.seen.send_modify(|s| {
            s.bytes[stream] += bytes.len() as u64;
            s.dropped[stream] |= dropped;
            if !bytes.is_empty() {
                s.lines[stream].push(bytes);
            }
            // The stream that printed something last speaks; blank lines say nothing.
            if !blank(bytes) {
                s.latest = stream;
            }
        });
    }
}

impl Default for Observer {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_after(chunks: &[&[u8]]) -> String {
        let o = Observer::new();
        for c in chunks {
            o.push(STDOUT, c, false);
        }
        o.seen().last_line()
    }

    #[test]
    fn the_last_line_is_the_one_being_printed_else_the_last_whole_one() {
        assert_eq!(last_after(&[b"a\nbb\n"]), "bb");
        assert_eq!(last_after(&[b"a\nbb\ncc"]), "cc");
        assert_eq!(last_after(&[b"par", b"tial\n"]), "partial");
        assert_eq!(last_after(&[b"one\n", b"\n\n"]), "one");
        assert_eq!(last_after(&[b"a\nb\n\n\n"]), "b");
        assert_eq!(last_after(&[b"a\nb", b"\n\n"]), "b");
        assert_eq!(last_after(&[b"x\n\n\ny\n"]), "y");
        assert_eq!(last_after(&[b"crlf\r\n\r\n  \r\n"]), "crlf\r");
        assert_eq!(last_after(&[b""]), "");
    }

    #[test]
    fn a_line_is_cut_at_its_limit_exactly() {
        let at = vec![b'x'; LINE_BYTES];
        let past = vec![b'.'; LINE_BYTES + 1];
        assert_eq!(last_after(&[&at, b"\n"]).len(), LINE_BYTES);
        assert_eq!(last_after(&[&past[..100], &past[100..]]).len(), LINE_BYTES);
        // A word of key characters the cut falls in may be a session key's start: its last
        // 42 characters go, as the redaction would not know them.
        let key_at_cut = format!("{} {}", ".".repeat(LINE_BYTES - 10), "k".repeat(43));
        let shown = last_after(&[key_at_cut.as_bytes(), b"\n"]);
        assert_eq!(shown, format!("{} ", ".".repeat(LINE_BYTES - 10)));
    }

    #[test]
    fn bytes_count_per_stream_and_the_latest_stream_speaks() {
        let o = Observer::new();
        o.push(STDOUT, b"out\n", false);
        o.push(STDERR, b"err line\n", false);
        let seen = o.seen();
        assert_eq!((seen.bytes, seen.total()), ([4, 9], 13));
        assert_eq!(seen.last_line(), "err line");
        // Blank lines after it do not make the other stream speak.
        o.push(STDOUT, b"\n", false);
        assert_eq!(o.seen().last_line(), "err line");
    }

    #[test]
    fn a_tail_keeps_the_last_bytes_with_their_offsets() {
        let o = Observer::keeping_tails();
        o.push(STDOUT, b"abc", false);
        assert_eq!(o.tail(STDOUT, 1, 3), Some((1, b"bc".to_vec())));
        let past = vec![b'x'; TAIL_BYTES];
        o.push(STDOUT, &past, false);
        let (first, bytes) = o.tail(STDOUT, 0, u64::MAX).unwrap();
        assert_eq!(
            (first, bytes.len()),
            (3, TAIL_BYTES),
            "exactly the limit kept"
        );
        assert_eq!(o.tail(STDERR, 0, 10), Some((0, Vec::new())));
        // A chunk larger than the tail, and a range across the ring's two slices.
        let mut big = vec![b'a'; TAIL_BYTES + 10];
        big.extend_from_slice(b"end");
        o.push(STDOUT, &big, false);
        let total = 3 + TAIL_BYTES as u64 + big.len() as u64;
        let (first, bytes) = o.tail(STDOUT, 0, u64::MAX).unwrap();
        assert_eq!(
            (first, bytes.len()),
            (total - TAIL_BYTES as u64, TAIL_BYTES)
        );
        assert!(bytes.ends_with(b"aend"));
        o.push(STDOUT, b"xyz", false);
        assert_eq!(o.tail(STDOUT, total - 2, total + 3).unwrap().1, b"ndxyz");
        assert_eq!(o.tail(STDOUT, total + 1, total + 2).unwrap().1, b"y");
        o.drop_tails();
        assert_eq!(o.tail(STDOUT, 0, 10), None);
        assert_eq!(Observer::new().tail(STDOUT, 0, 10), None);
    }
}
