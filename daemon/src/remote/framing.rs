//! How a program reaches the remote `/bin/sh` and how its own output is told apart from
//! whatever the login shell prints first: the fixed bootstrap line, the payload fed on stdin,
//! and the per-run markers that open each stream.
//!
//! sshd runs every channel through the user's login shell, whose startup files may print
//! anything on stdout or stderr (conda, nvm, motd scripts; tcsh reads `.cshrc` with no
//! interactive guard at all). So the login shell only ever sees a short fixed line that execs
//! `/bin/sh`, and that shell sources the payload from the channel's stdin. The payload first
//! prints a marker carrying a random nonce on each stream: everything before it is the login
//! shell's noise and is dropped; everything after it is the program's own output, untouched.
//! The nonce is fresh per run, so no noise can contain it, and the program's own output comes
//! after the markers, so it may print anything at all, the nonce included.
//!
//! The stderr marker carries the process group, read from the kernel (`/proc`, else `ps`)
//! before anything else can block, so a stop can kill from then on. The stdout marker says
//! whether the working directory was entered. The program itself is one `{ ... }` group: the
//! shell parses a group whole before running any of it, so a payload cut short by a stop runs
//! nothing.

use std::fmt::Write as _;

use base64::Engine as _;

/// What the login shell runs. One line, single-quoted, with no `!` or backslash, so bash,
/// dash, zsh, csh and fish all hand it to `/bin/sh` unchanged. `/proc/self/fd` stands in for
/// `/dev/fd` on systems without it. The command's stdin is `/dev/null`; the payload arrives on
/// fd 3, which the payload closes first so the program cannot read its own source.
pub const BOOTSTRAP: &str = "exec /bin/sh -c 'exec 3<&0 </dev/null; \
if [ -e /dev/fd/3 ]; then . /dev/fd/3; else . /proc/self/fd/3; fi'";

/// The payload's prelude, up to the working directory. `{E}` is the stderr nonce. Builtins
/// go through `command`, so functions a login environment exports (bash as `/bin/sh` imports
/// them) cannot stand in for them. It asks the kernel
/// for the process group: `kill -0 -$$` succeeds when group `$$` exists, which (a group's id
/// being its creator's pid) means this shell leads it, as it does under sshd, for one system
/// call; otherwise field 5 of `/proc/$$/stat` (after the parenthesised name; dash reads it a
/// byte at a time, 0.2 ms), else `ps`. It reports the group on stderr and leaves no variable
/// or positional parameter behind.
const PRELUDE: &str = "exec 3<&-; if command kill -0 -$$ 2>/dev/null; then _sshmcp_g=$$; \
elif command read -r _sshmcp_g </proc/$$/stat 2>/dev/null; then _sshmcp_g=${_sshmcp_g##*) }; \
set -- $_sshmcp_g; _sshmcp_g=$3; set --; \
else set -- $(ps -o pgid= -p $$ 2>/dev/null); _sshmcp_g=$1; set --; fi; \
_sshmcp_g=${_sshmcp_g:-$$}; command printf '%s %s\\n' {E} \"$_sshmcp_g\" >&2; ";

/// The exit status of a run whose working directory could not be entered.
pub const NO_CWD_STATUS: u32 = 125;

/// One run's framing: a nonce per stream, and the payload built around them. Each stream
/// has its own, so a login shell that merges or swaps them (`exec 2>&1` in an rc file) cannot
/// make one stream's marker pass for the other's.
pub struct Framing {
    out_nonce: String,
    err_nonce: String,
}

impl Framing {
    /// A framing with fresh random nonces.
    pub fn new() -> std::io::Result<Self> {
        let bytes: [u8; 32] = crate::session::key::random_bytes()?;
        let nonce = |half: &[u8]| format!("_sshmcp_{}", crate::session::key::hex(half));
        Ok(Self::with_nonces(nonce(&bytes[..16]), nonce(&bytes[16..])))
    }

    fn with_nonces(out_nonce: String, err_nonce: String) -> Self {
        Self {
            out_nonce,
            err_nonce,
        }
    }

    /// The bytes fed on the channel's stdin: the prelude (the stderr marker with the process
    /// group), the working directory, the stdout marker (`run` or `nocwd`, and the group
    /// again), then `script` as one group, with `stdin` (when given) as the group's input.
    pub fn payload(&self, script: &str, cwd: Option<&str>, stdin: Option<&[u8]>) -> Vec<u8> {
        let (o, n) = (&self.out_nonce, &self.err_nonce);
        let mut out = PRELUDE.replace("{E}", n);
        if let Some(dir) = cwd {
            // An exported CDPATH would turn a relative cwd into another directory.
            let _ = write!(
                out,
                "CDPATH= command cd -- {} >/dev/null 2>&1 || {{ command printf '%s nocwd %s\\n' \
                 {o} \"$_sshmcp_g\"; exit {NO_CWD_STATUS}; }}; ",
                sh_quote(dir)
            );
        }
        let _ = writeln!(
            out,
            "command printf '%s run %s\\n' {o} \"$_sshmcp_g\"; unset _sshmcp_g"
        );
        match stdin {
            // The input travels as base64 in a here-document (shell text cannot hold a NUL),
            // decoded into the group's stdin. The delimiter is the nonce: no base64 line can
            // equal it.
            Some(bytes) => {
                let _ = writeln!(out, "base64 -d <<'{o}' | {{");
                let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
                for line in encoded.as_bytes().chunks(76) {
                    out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
                    out.push('\n');
                }
                let _ = writeln!(out, "{o}");
            }
            None => out.push_str("{\n"),
        }
        let mut payload = out.into_bytes();
        payload.extend_from_slice(script.as_bytes());
        payload.extend_from_slice(b"\n}\n");
        payload
    }

    /// A scanner for stdout's marker.
    pub fn stdout_scanner(&self) -> MarkerScan {
        MarkerScan::new(self.out_nonce.as_bytes())
    }

    /// A scanner for stderr's marker.
    pub fn stderr_scanner(&self) -> MarkerScan {
        MarkerScan::new(self.err_nonce.as_bytes())
    }
}

/// What the markers say, once either has been seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Markers {
    /// The program's process group: from stderr's marker (written before the working
    /// directory is entered), else stdout's. Only a real group: 0 and 1 are never one (0 is
    /// what `/proc` shows for a leader outside the pid namespace, and `kill -1` means every
    /// process of the user).
    pub group: Option<u32>,
    /// Whether the working directory could not be entered (nothing ran).
    pub no_cwd: bool,
    /// Whether stdout's marker was seen: the program's group started.
    pub started: bool,
}

impl Markers {
    pub fn read(out: &MarkerScan, err: &MarkerScan) -> Self {
        let mut words = out.marker().unwrap_or("").split(' ');
        let state = words.next().filter(|w| !w.is_empty());
        let group = err
            .marker()
            .and_then(|m| m.parse().ok())
            .or_else(|| words.next().and_then(|w| w.parse().ok()))
            .filter(|g: &u32| *g > 1);
        Self {
            group,
            no_cwd: state == Some("nocwd"),
            started: state == Some("run"),
        }
    }
}

/// How many bytes at the end of a payload still matter after the group's closing brace: a
/// payload cut short by more than this ran none of its group.
pub const PAYLOAD_TAIL_AFTER_GROUP: usize = 1;

/// One sh word holding exactly `s`: single quotes, with each `'` written as `'\''`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Finds a stream's marker line and passes everything after it through untouched.
pub struct MarkerScan {
    nonce: Vec<u8>,
    /// Bytes not yet classified: a possible start of the nonce, or the marker line itself.
    pending: Vec<u8>,
    state: ScanState,
    /// Bytes of login-shell noise dropped before the marker.
    noise_bytes: u64,
    /// The start of that noise, for the debug log.
    noise_sample: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ScanState {
    Searching,
    /// The nonce was seen; the rest of its line is being read.
    InMarker,
    Found(String),
}

/// The longest marker line after its nonce (a process group id, or a short word).
const MAX_MARKER_REST: usize = 64;
/// How much noise the debug log shows.
const NOISE_SAMPLE: usize = 512;

impl MarkerScan {
    /// A scanner for the marker line that starts with `nonce`.
    pub fn new(nonce: &[u8]) -> Self {
        Self {
            nonce: nonce.to_vec(),
            pending: Vec::new(),
            state: ScanState::Searching,
            noise_bytes: 0,
            noise_sample: Vec::new(),
        }
    }

    /// Feeds stream bytes; returns those that belong to the program's own output.
    pub fn feed<'a>(&mut self, bytes: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        if matches!(self.state, ScanState::Found(_)) {
            return bytes.into();
        }
        self.pending.extend_from_slice(bytes);
        if self.state == ScanState::Searching {
            match find(&self.pending, &self.nonce) {
                Some(at) => {
                    self.drop_noise(at);
                    self.pending.drain(..self.nonce.len());
                    self.state = ScanState::InMarker;
                }
                None => {
                    // Keep only what could be the start of the nonce.
                    let keep = (self.nonce.len() - 1).min(self.pending.len());
                    self.drop_noise(self.pending.len() - keep);
                    return Vec::new().into();
                }
            }
        }
        match self.pending.iter().position(|b| *b == b'\n') {
            Some(newline) => {
                let rest = String::from_utf8_lossy(&self.pending[..newline])
                    .trim()
                    .to_string();
                self.state = ScanState::Found(rest);
                self.pending.drain(..=newline);
                std::mem::take(&mut self.pending).into()
            }
            None if self.pending.len() > MAX_MARKER_REST => {
                // Not a line we wrote; take what there is as the marker.
                let rest = String::from_utf8_lossy(&self.pending).trim().to_string();
                self.state = ScanState::Found(rest);
                self.pending.clear();
                Vec::new().into()
            }
            None => Vec::new().into(),
        }
    }

    fn drop_noise(&mut self, n: usize) {
        let room = NOISE_SAMPLE.saturating_sub(self.noise_sample.len());
        self.noise_sample
            .extend_from_slice(&self.pending[..n.min(room)]);
        self.noise_bytes += n as u64;
        self.pending.drain(..n);
    }

    /// What the marker line said after the nonce, once it has been seen.
    pub fn marker(&self) -> Option<&str> {
        match &self.state {
            ScanState::Found(rest) => Some(rest),
            _ => None,
        }
    }

    /// At the end of the stream: whatever was held back is noise too.
    pub fn finish(&mut self) {
        if self.marker().is_none() {
            self.drop_noise(self.pending.len());
        }
    }

    /// The noise dropped so far: its size and its start, for the debug log.
    pub fn noise(&self) -> (u64, &[u8]) {
        (self.noise_bytes, &self.noise_sample)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framing() -> Framing {
        Framing::with_nonces("_sshmcp_0123abcd".into(), "_sshmcp_4567ef01".into())
    }

    #[test]
    fn bootstrap_is_shell_neutral() {
        assert!(!BOOTSTRAP.contains('!'));
        assert!(!BOOTSTRAP.contains('\\'));
        assert!(!BOOTSTRAP.contains('\n'));
        assert_eq!(BOOTSTRAP.matches('\'').count(), 2);
    }

    #[test]
    fn noise_before_the_marker_is_dropped_even_split_across_reads() {
        let mut scan = framing().stdout_scanner();
        assert!(
            scan.feed(b"conda says hi\nno newline _sshmcp_01")
                .is_empty()
        );
        assert!(scan.feed(b"23abcd 4242").is_empty());
        assert_eq!(&*scan.feed(b"\nthe program's own"), b"the program's own");
        assert_eq!(scan.marker(), Some("4242"));
        assert_eq!(
            &*scan.feed(b" _sshmcp_0123abcd again"),
            b" _sshmcp_0123abcd again"
        );
        let (bytes, sample) = scan.noise();
        assert_eq!(bytes, 25);
        assert_eq!(sample, b"conda says hi\nno newline ");
    }

    #[test]
    fn a_stream_without_marker_is_all_noise() {
        let mut scan = framing().stdout_scanner();
        assert!(scan.feed(b"bash: line 1: /bin/sh: not found\n").is_empty());
        scan.finish();
        assert_eq!(scan.marker(), None);
        assert_eq!(scan.noise().0, 33);
    }

    #[test]
    fn noise_is_bounded_in_memory() {
        let mut scan = framing().stdout_scanner();
        for _ in 0..1000 {
            scan.feed(&[b'x'; 4096]);
        }
        assert!(scan.pending.len() < 32);
        assert_eq!(scan.noise().1.len(), NOISE_SAMPLE);
        assert_eq!(scan.feed(b"_sshmcp_0123abcd run\nok").as_ref(), b"ok");
        assert_eq!(scan.noise().0, 4096 * 1000);
    }

    /// What a local run of a payload gave: each stream's marker and own bytes, and the status.
    struct LocalRun {
        markers: Markers,
        out_marker: Option<String>,
        out: Vec<u8>,
        err_marker: Option<String>,
        err: Vec<u8>,
        status: Option<i32>,
        pid: u32,
    }

    /// Runs a payload through a real `/bin/sh -c BOOTSTRAP`, as sshd's login shell would after
    /// printing noise, and splits the streams with the scanners.
    fn run_local(f: &Framing, script: &str, cwd: Option<&str>, stdin: Option<&[u8]>) -> LocalRun {
        run_local_as(f, script, cwd, stdin, false)
    }

    /// `leader`: the shell leads its own process group, as under sshd.
    fn run_local_as(
        f: &Framing,
        script: &str,
        cwd: Option<&str>,
        stdin: Option<&[u8]>,
        leader: bool,
    ) -> LocalRun {
        use std::io::Write;
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new("/bin/sh");
        if leader {
            command.process_group(0);
        }
        let mut child = command
            .arg("-c")
            .arg(format!("echo noise; echo noise >&2; {BOOTSTRAP}"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(&f.payload(script, cwd, stdin))
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let (mut so, mut se) = (f.stdout_scanner(), f.stderr_scanner());
        let stdout = so.feed(&out.stdout).into_owned();
        let stderr = se.feed(&out.stderr).into_owned();
        let markers = Markers::read(&so, &se);
        LocalRun {
            markers,
            out_marker: so.marker().map(str::to_string),
            out: stdout,
            err_marker: se.marker().map(str::to_string),
            err: stderr,
            status: out.status.code(),
            pid,
        }
    }

    #[test]
    fn payload_runs_exactly_the_script() {
        let f = framing();
        let script = "printf '%s|' \"$#\" \"$0\" \"${_sshmcp_g-unset}\"; echo out; echo err >&2; \
                      cat <<EOF\nheredoc $((1+1))\nEOF\nexit 3";
        let run = run_local(&f, script, None, None);
        assert!(run.markers.started && !run.markers.no_cwd);
        assert_eq!(
            String::from_utf8(run.out).unwrap(),
            "0|/bin/sh|unset|out\nheredoc 2\n"
        );
        assert_eq!(run.err, b"err\n");
        assert_eq!(run.status, Some(3));
        // Not a group leader: the group is read from /proc, and it is ours.
        let ours = nix::unistd::getpgrp().as_raw() as u32;
        assert_eq!(run.err_marker.unwrap().parse::<u32>().unwrap(), ours);
        assert_eq!(run.markers.group, Some(ours));
        assert_eq!(run.out_marker, Some(format!("run {ours}")));
    }

    #[test]
    fn a_group_leader_reports_its_own_group() {
        let run = run_local_as(&framing(), "true", None, None, true);
        assert_eq!(run.err_marker.unwrap().parse::<u32>().unwrap(), run.pid);
    }

    #[test]
    fn cwd_is_entered_or_reported() {
        let f = framing();
        let run = run_local(&f, "pwd", Some("/tmp"), None);
        assert!(run.markers.started);
        assert_eq!(run.out, b"/tmp\n");
        let run = run_local(&f, "echo ran", Some("/no/such dir"), None);
        assert!(run.markers.no_cwd && !run.markers.started);
        assert!(run.out.is_empty() && run.err.is_empty());
        assert_eq!(run.status, Some(NO_CWD_STATUS as i32));
    }

    #[test]
    fn stdin_reaches_the_group_byte_for_byte() {
        let f = framing();
        let data: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let run = run_local(&f, "cat", None, Some(&data));
        assert_eq!(run.status, Some(0));
        assert_eq!(run.out, data);
    }

    #[test]
    fn a_payload_cut_before_its_closing_brace_runs_nothing() {
        let f = framing();
        let payload = f.payload("echo ran-anyway", None, None);
        let cut = &payload[..payload.len() - PAYLOAD_TAIL_AFTER_GROUP - 1];
        assert!(cut.ends_with(b"ran-anyway\n"));
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(BOOTSTRAP)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(cut)?;
                child.wait_with_output()
            })
            .unwrap();
        assert!(!String::from_utf8_lossy(&out.stdout).contains("ran-anyway"));
    }

    #[test]
    fn markers_survive_merged_streams_and_give_only_real_groups() {
        let f = framing();
        // An rc file that sends stderr to stdout: both markers arrive on stdout.
        let mut out = f.stdout_scanner();
        let err = f.stderr_scanner();
        let merged = b"_sshmcp_4567ef01 4242\n_sshmcp_0123abcd run 4242\nown";
        assert_eq!(out.feed(merged).as_ref(), b"own");
        let m = Markers::read(&out, &err);
        assert_eq!((m.group, m.started), (Some(4242), true));
        let (mut out, mut err) = (f.stdout_scanner(), f.stderr_scanner());
        out.feed(b"_sshmcp_0123abcd run 1\n");
        err.feed(b"_sshmcp_4567ef01 0\n");
        assert_eq!(Markers::read(&out, &err).group, None, "never 0 or 1");
    }

    #[test]
    fn an_exported_cdpath_does_not_move_a_relative_cwd() {
        let base = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(base.path().join("decoy/sub")).unwrap();
        std::fs::create_dir_all(base.path().join("home/sub")).unwrap();
        let f = framing();
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(BOOTSTRAP)
            .current_dir(base.path().join("home"))
            .env("CDPATH", base.path().join("decoy"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                let payload = f.payload("pwd", Some("sub"), None);
                child.stdin.take().unwrap().write_all(&payload)?;
                child.wait_with_output()
            })
            .unwrap();
        let mut scan = f.stdout_scanner();
        let pwd = scan.feed(&out.stdout).into_owned();
        assert!(String::from_utf8(pwd).unwrap().ends_with("/home/sub\n"));
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
