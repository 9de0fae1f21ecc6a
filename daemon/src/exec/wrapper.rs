//! The remote side of `exec`: the fixed shell text the master runs, what we feed it on stdin,
//! and the one header line it writes before the command starts.
//!
//! The command text cannot travel as an argument (Linux caps one argument at 128 KiB and the
//! login shell would parse it), so the login shell only ever sees a short, fixed line that
//! execs `/bin/sh`. That shell moves the session's stdin to fd 3, points stdin at `/dev/null`,
//! and sources fd 3: a prelude we generate (report the pid, which is the remote process group
//! since sshd starts every session in a new session; enter the working directory), then the
//! command unchanged. Sourcing costs no extra process, where `$(cat)` cost a millisecond.

/// What the login shell runs. One line, single-quoted, with no `!` or backslash, so bash,
/// dash, zsh, csh and fish all hand it to `/bin/sh` unchanged. `/proc/self/fd` stands in for
/// `/dev/fd` on systems without it.
pub const REMOTE_COMMAND: &str = "exec /bin/sh -c 'exec 3<&0 </dev/null; \
if [ -e /dev/fd/3 ]; then . /dev/fd/3; else . /proc/self/fd/3; fi'";

/// The bytes written to the wrapper's stdin: the prelude line, then the command.
pub fn stdin_payload(cwd: Option<&str>, command: &str) -> Vec<u8> {
    let enter = match cwd {
        Some(dir) => format!(
            "cd -- {} 2>/dev/null || {{ echo nocwd >&2; exit 125; }}; ",
            sh_quote(dir)
        ),
        None => String::new(),
    };
    // fd 3 is closed first so the command cannot read its own source.
    let prelude = format!("exec 3<&-; printf 'sshmcp %s ' $$ >&2; {enter}echo run >&2\n");
    let mut payload = Vec::with_capacity(prelude.len() + command.len());
    payload.extend_from_slice(prelude.as_bytes());
    payload.extend_from_slice(command.as_bytes());
    payload
}

/// One sh word holding exactly `s`: single quotes, with each `'` written as `'\''`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A shell line that terminates the process group `pgid`: TERM, up to a second for it to go,
/// then KILL. It prints which signal ended it. A group counts as gone when only zombies are
/// left in it (where /proc exists): in containers whose init does not reap, a killed process
/// lingers as a zombie and `kill -0` still finds it. (dash's `kill` takes no `--`, so the
/// negative pid directly follows the signal.)
pub fn kill_command(pgid: u32) -> String {
    format!(
        "exec /bin/sh -c 'g={pgid}; alive() {{ kill -0 -$g 2>/dev/null || return 1; \
         [ -r /proc/self/stat ] || return 0; for f in /proc/[0-9]*/stat; do \
         read -r s < $f 2>/dev/null || continue; set -- ${{s##*)}}; \
         [ \"$3\" = $g ] && case $1 in Z) ;; *) return 0;; esac; done; return 1; }}; \
         kill -TERM -$g 2>/dev/null || exit 0; i=0; while [ $i -lt 20 ]; do \
         alive || {{ echo TERM; exit 0; }}; sleep 0.05; i=$((i+1)); done; \
         kill -KILL -$g 2>/dev/null; echo KILL'"
    )
}

/// What the header line said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// The command is running in process group `pgid`.
    Running { pgid: u32 },
    /// The working directory could not be entered; nothing ran.
    NoCwd,
}

/// Splits the wrapper's header line off the start of stderr.
#[derive(Default)]
pub struct HeaderParser {
    pending: Vec<u8>,
    header: Option<Header>,
    done: bool,
}

/// A header line is short; anything longer means the stream carries no header.
const MAX_HEADER: usize = 64;

impl HeaderParser {
    /// Feeds stderr bytes; returns the part that belongs to the command's own stderr.
    pub fn feed<'a>(&mut self, bytes: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        if self.done {
            return bytes.into();
        }
        self.pending.extend_from_slice(bytes);
        let Some(newline) = self.pending.iter().position(|b| *b == b'\n') else {
            if self.pending.len() > MAX_HEADER {
                return self.finish().into();
            }
            return Vec::new().into();
        };
        self.header = parse_header(&self.pending[..newline]);
        if self.header.is_none() {
            return self.finish().into();
        }
        self.done = true;
        self.pending.drain(..=newline);
        std::mem::take(&mut self.pending).into()
    }

    /// Stops looking for a header and returns the bytes held back: at the end of the
    /// stream, or when they turned out not to be a header, they are the command's output.
    pub fn finish(&mut self) -> Vec<u8> {
        self.done = true;
        std::mem::take(&mut self.pending)
    }

    pub fn header(&self) -> Option<Header> {
        self.header
    }
}

fn parse_header(line: &[u8]) -> Option<Header> {
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.strip_prefix("sshmcp ")?.split(' ');
    let pgid: u32 = words.next()?.parse().ok()?;
    match (words.next()?, words.next()) {
        ("run", None) => Some(Header::Running { pgid }),
        ("nocwd", None) => Some(Header::NoCwd),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_command_is_shell_neutral() {
        assert!(!REMOTE_COMMAND.contains('!'));
        assert!(!REMOTE_COMMAND.contains('\\'));
        assert!(!REMOTE_COMMAND.contains('\n'));
        assert_eq!(REMOTE_COMMAND.matches('\'').count(), 2);
    }

    #[test]
    fn kill_command_is_shell_neutral() {
        let k = kill_command(42);
        assert!(!k.contains('!') && !k.contains('\\') && !k.contains('\n'));
        assert_eq!(k.matches('\'').count(), 2);
        assert!(k.contains("g=42;"));
    }

    #[test]
    fn header_split_across_reads() {
        let mut p = HeaderParser::default();
        assert!(p.feed(b"sshmcp 12").is_empty());
        assert_eq!(&*p.feed(b"3 run\nerr"), b"err");
        assert_eq!(p.header(), Some(Header::Running { pgid: 123 }));
        assert_eq!(&*p.feed(b"more"), b"more");
    }

    #[test]
    fn missing_cwd_header() {
        let mut p = HeaderParser::default();
        p.feed(b"sshmcp 9 nocwd\n");
        assert_eq!(p.header(), Some(Header::NoCwd));
    }

    #[test]
    fn stream_without_header_is_kept_whole() {
        let mut p = HeaderParser::default();
        assert_eq!(&*p.feed(b"sh: 1: oops\n"), b"sh: 1: oops\n");
        assert_eq!(p.header(), None);
        let mut q = HeaderParser::default();
        assert!(q.feed(b"partial").is_empty());
        assert_eq!(q.finish(), b"partial");
    }

    #[test]
    fn payload_is_prelude_then_command() {
        let p = String::from_utf8(stdin_payload(Some("/a b/it's\nx"), "ls\n")).unwrap();
        assert!(p.starts_with("exec 3<&-; printf 'sshmcp %s ' $$ >&2; cd -- '/a b/it'\\''s\nx' "));
        assert!(p.ends_with("echo run >&2\nls\n"), "{p}");
        let p = String::from_utf8(stdin_payload(None, "ls")).unwrap();
        assert_eq!(p, "exec 3<&-; printf 'sshmcp %s ' $$ >&2; echo run >&2\nls");
    }

    #[test]
    fn quoting_round_trips_through_sh() {
        let tricky = "a b'c\"d$e`f\\g\nh";
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("printf %s {}", sh_quote(tricky)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), tricky);
    }
}
