//! How a program reaches the remote `/bin/sh` and how its own output is told apart from
//! whatever the login shell prints first: the fixed bootstrap line, the payload fed on stdin,
//! and the per-run markers that open each stream.
//!
//! sshd runs every channel through the user's login shell, whose startup files may print
//! anything on stdout or stderr (conda, nvm, motd scripts; tcsh reads `.cshrc` with no
//! interactive guard at all). So the login shell only ever sees a short fixed line that execs
//! `/bin/sh`, which then reads programs from the channel's stdin (see `runner`); each program
//! is a payload its own `/bin/sh` sources. The payload first prints a marker carrying a random
//! nonce on each stream: everything before it is the login shell's noise (or what an earlier
//! program's escaped processes wrote) and is dropped; everything after it is the program's own
//! output, untouched, up to the end marker. The nonces are fresh per run, so no noise can
//! contain them, and the program's own output comes after the markers, so it may print
//! anything at all, the nonces included.
//!
//! The stderr marker carries the process group, read from the kernel (`/proc`, else `ps`)
//! before anything else can block, so a stop can kill from then on. The stdout marker says
//! whether the working directory was entered. The program itself is one `{ ... }` group: the
//! shell parses a group whole before running any of it, so a payload cut short by a stop runs
//! nothing.

use std::fmt::Write as _;

use base64::Engine as _;

use super::runner;

/// What the login shell runs: one word pair with no quote, `!` or backslash, so bash, dash,
/// zsh, csh and fish all hand it to `/bin/sh` unchanged. That shell reads programs from the
/// channel's stdin (see `runner`).
pub const BOOTSTRAP: &str = "exec /bin/sh";

/// What a program's own `/bin/sh` runs: its payload arrives on stdin (a here-document of the
/// channel's shell), moved to fd 3, which the payload closes first so the program cannot read
/// its own source; the program's stdin is `/dev/null`. `/proc/self/fd` stands in for
/// `/dev/fd` on systems without it. No single quote: it travels single-quoted.
pub const INNER_BOOTSTRAP: &str = "exec 3<&0 </dev/null; \
if [ -e /dev/fd/3 ]; then . /dev/fd/3; else . /proc/self/fd/3; fi";

/// The end of [`INNER_BOOTSTRAP`]: sources the payload on fd 3.
pub const SOURCE_FD3: &str = "if [ -e /dev/fd/3 ]; then . /dev/fd/3; else . /proc/self/fd/3; fi";

/// The payload's prelude, up to the working directory. `{E}` is the stderr nonce. Builtins
/// go through `command`, so functions a login environment exports (bash as `/bin/sh` imports
/// them) cannot stand in for them. It asks the kernel
/// for the process group: `kill -0 -$$` (with `--` before the group where the shell takes
/// it, `{K}`: see `kill::GROUP_OPTION`) succeeds when group `$$` exists, which (a group's id
/// being its creator's pid) means this shell leads it, as it does under sshd, for one system
/// call; otherwise field 5 of `/proc/$$/stat` (after the parenthesised name; dash reads it a
/// byte at a time, 0.2 ms), else `ps`. It reports the group on stderr and leaves no variable
/// or positional parameter behind. It also tells the channel's shell on fd 5 the group, the
/// end nonces and whether the channel may serve another program (`{R}`), and closes that
/// descriptor and the channel's start date (fd 4) so nothing the program starts holds them.
/// Last, it keeps stderr on fd 8 for the exit report ([`EXIT_TRAP`]): a shell that exits says
/// so, so one without a report was ended by a signal (dash runs no exit trap then), even when
/// its status looks like 128 + n.
const PRELUDE: &str = "_sshmcp_wf=${1-}; set --; exec 3<&-; {K}; \
if command kill -0 $_sshmcp_k -$$ 2>/dev/null; then _sshmcp_g=$$; \
elif command read -r _sshmcp_g </proc/$$/stat 2>/dev/null; then _sshmcp_g=${_sshmcp_g##*) }; \
set -- $_sshmcp_g; _sshmcp_g=$3; set --; \
else set -- $(ps -o pgid= -p $$ </dev/null 2>/dev/null); _sshmcp_g=$1; set --; fi; \
unset _sshmcp_k; _sshmcp_g=${_sshmcp_g:-$$}; command printf '%s %s\\n' {E} \"$_sshmcp_g\" >&2; \
command printf '%s %s %s %s\\n' \"$_sshmcp_g\" {R} >&5 2>/dev/null; exec 4<&- 5>&- 8>&2; ";

/// Ties a program to its caller: its group is noted in the channel's log on fd 9, so the
/// channel's relay ends it once the channel's stdin ends; then, should the relay have taken
/// its last look already (its fifo's name is gone), nothing runs (see `runner::RELAY`). The
/// note is a write to a file already open; the log is closed for the program either way.
const TETHER: &str = "{ command printf '{ROOT}%s\\n' \"$_sshmcp_g\" >&9; } 2>/dev/null; exec 9>&-; \
if [ -n \"$_sshmcp_wf\" ] && ! [ -p \"$_sshmcp_wf/in\" ]; then exit 0; fi; unset _sshmcp_wf; ";

/// A program that must finish whatever becomes of its caller (a kill) is not noted.
const UNTETHERED: &str = "exec 9>&-; unset _sshmcp_wf; ";

/// Whether a program ends with its caller (see [`TETHER`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tether {
    /// The program's group is killed when the channel's stdin closes.
    ToCaller,
    /// The same for a program with root processes (`sudo_exec`): noted `r<group>`, so the
    /// relay kills the group through sudo too (the user's KILL cannot reach root's processes).
    ToCallerAsRoot,
    /// The program runs to its end whatever becomes of the channel (a kill).
    None,
}

/// The exit report: the status of the shell it is set in, on fd 8 (see [`PRELUDE`]), after
/// its nonce given in two halves `{X1}` `{X2}` (so the trap's own text, which `trap` lists,
/// never holds it). Silent and harmless where fd 8 is closed (bash runs it inside the
/// program's group, where the group closed fd 8; a failing redirection must not trip
/// `set -e`).
const EXIT_TRAP: &str =
    "trap '{ command printf \"%s%s %s\\\\n\" {X1} {X2} \"$?\" >&8; } 2>/dev/null || :' EXIT";

/// The exit status of a run whose working directory could not be entered.
pub const NO_CWD_STATUS: u32 = 125;

/// One run's framing: a nonce per stream, and the payload built around them. Each stream
/// has its own, so a login shell that merges or swaps them (`exec 2>&1` in an rc file) cannot
/// make one stream's marker pass for the other's.
pub struct Framing {
    out_nonce: String,
    err_nonce: String,
    /// The delimiter of the here-document the payload travels in.
    feed_nonce: String,
    /// The end markers (see `runner`).
    end_out: String,
    end_err: String,
    /// The program shell's exit report (see `PRELUDE`).
    exit_nonce: String,
}

impl Framing {
    /// A framing with fresh random nonces.
    pub fn new() -> std::io::Result<Self> {
        let next = || crate::random::nonce("_sshmcp_");
        Ok(Self::with_nonces([
            next()?,
            next()?,
            next()?,
            next()?,
            next()?,
            next()?,
        ]))
    }

    fn with_nonces(
        [
            out_nonce,
            err_nonce,
            feed_nonce,
            end_out,
            end_err,
            exit_nonce,
        ]: [String; 6],
    ) -> Self {
        Self {
            out_nonce,
            err_nonce,
            feed_nonce,
            end_out,
            end_err,
            exit_nonce,
        }
    }

    /// What a channel opened for this program reads: the runner, with `payload` as its
    /// first program (see `runner`).
    pub fn fresh_text(&self, payload: &[u8]) -> Vec<u8> {
        runner::fresh_text(payload, &self.feed_nonce)
    }

    /// What the waiting program shell of a channel that waited reads (see `runner`), with
    /// the check of the login files first when `check_login_files`.
    pub fn warm_text(&self, payload: &[u8], check_login_files: bool) -> Vec<u8> {
        runner::warm_text(
            payload,
            &self.out_nonce,
            &self.feed_nonce,
            check_login_files,
        )
    }

    /// A scanner for stdout's end marker.
    pub fn stdout_end(&self) -> runner::LineScan {
        runner::LineScan::end_marker(&self.end_out)
    }

    /// A scanner for stderr's end marker.
    pub fn stderr_end(&self) -> runner::LineScan {
        runner::LineScan::end_marker(&self.end_err)
    }

    /// A scan that takes the program shell's exit report out of a stream (it is written on
    /// stderr, which a startup file may have merged into stdout).
    pub fn exit_report(&self) -> runner::LineScan {
        runner::LineScan::one_line(&self.exit_nonce)
    }

    /// The program its own `/bin/sh` reads: the prelude (the stderr marker with the process
    /// group), the working directory, the stdout marker (`run` or `nocwd`, and the group
    /// again), then `script` as one group, with `stdin` (when given) as the group's input.
    /// The group starts with `:`, so that a script of comments alone is no empty group (a
    /// syntax error).
    /// `reusable`: the channel may serve another program after this one.
    pub fn payload(
        &self,
        script: &str,
        cwd: Option<&str>,
        stdin: Option<&[u8]>,
        reusable: bool,
        tether: Tether,
    ) -> Vec<u8> {
        let (o, n) = (&self.out_nonce, &self.err_nonce);
        let report = format!(
            "{} {} {}",
            self.end_out,
            self.end_err,
            if reusable { "more" } else { "last" }
        );
        let mut out = PRELUDE
            .replace("{K}", super::kill::GROUP_OPTION)
            .replace("{E}", n)
            .replace("{R}", &report);
        match tether {
            Tether::ToCaller => out.push_str(&TETHER.replace("{ROOT}", "")),
            Tether::ToCallerAsRoot => out.push_str(&TETHER.replace("{ROOT}", "r")),
            Tether::None => out.push_str(UNTETHERED),
        }
        // The nonce in two halves: `trap` with no arguments lists the trap's text, which must
        // not read as a report.
        let (x1, x2) = self.exit_nonce.split_at(self.exit_nonce.len() / 2);
        let exit_trap = EXIT_TRAP.replace("{X1}", x1).replace("{X2}", x2);
        if let Some(dir) = cwd {
            // An exported CDPATH would turn a relative cwd into another directory, and `cd -`
            // goes to $OLDPWD: a relative one is entered as `./dir`.
            let dir = match dir.starts_with('/') {
                true => sh_quote(dir),
                false => format!("./{}", sh_quote(dir)),
            };
            let _ = write!(
                out,
                "CDPATH= command cd -- {dir} >/dev/null 2>&1 || {{ command printf '%s nocwd %s\\n' \
                 {o} \"$_sshmcp_g\"; exit {NO_CWD_STATUS}; }}; "
            );
        }
        let _ = writeln!(
            out,
            "command printf '%s run %s\\n' {o} \"$_sshmcp_g\"; unset _sshmcp_g"
        );
        match stdin {
            // The input travels as base64 in a here-document (shell text cannot hold a NUL),
            // decoded into the group's stdin. The delimiter is the nonce: no base64 line can
            // equal it. The group is then a pipeline's subshell: it reports its own exit, and
            // the shell's stderr (where dash describes a job a signal ended) is /dev/null
            // while the group keeps the real one. All on the pipeline's first line, so the
            // shell parses the group before any of it runs. The shell outlives every signal a
            // kill tool sends the group ([`ending_signals`]).
            Some(bytes) => {
                let _ = writeln!(
                    out,
                    "{} exec 9>&2 2>/dev/null; base64 -d <<'{o}' 2>&9 | {{ {} {exit_trap}; {{ :",
                    ending_signals(":"),
                    ending_signals("-"),
                );
                let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
                for line in encoded.as_bytes().chunks(76) {
                    out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
                    out.push('\n');
                }
                let _ = writeln!(out, "{o}");
            }
            None => {
                let _ = writeln!(out, "{exit_trap}; {{ :");
            }
        }
        let mut payload = out.into_bytes();
        payload.extend_from_slice(script.as_bytes());
        // The group's stdin is /dev/null unless given (the shell reads its program from the
        // channel's stdin), and the shell exits right after it: it must not wait for more.
        payload.extend_from_slice(b"\n}");
        payload.extend_from_slice(match stdin {
            Some(_) => AFTER_GROUP_WITH_STDIN.as_bytes(),
            None => AFTER_GROUP.as_bytes(),
        });
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
    /// The channel's shell found its login files changed and ran nothing (see `runner`).
    pub stale: bool,
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
            stale: state == Some("stale"),
        }
    }
}

/// The traps of every signal whose default ends a process (the kill tools send any of 1..64),
/// each set to `action`: POSIX's names, then Linux's own and BSD's `EMT`, then the real-time
/// signals by number, quietly, as a shell that knows a name or a number not stops there.
///
/// Where a program's group is a pipeline's subshell (it reads given stdin), the shell
/// leading its process group only waits for it: it catches them (`:`) and goes on waiting, so
/// the group's end is the program's, never this shell's. A root command (`sudo_exec`) that
/// outlives a kill thus stays `running` where it did, as root, and the run ends with sudo's
/// own status. A trap with an action, unlike an ignored signal, is not inherited, and the
/// group resets them (`-`) where a shell runs a pipeline's last part itself (ksh93, bash's
/// `lastpipe`): the program gets every signal as it would have.
fn ending_signals(action: &str) -> String {
    let real_time: Vec<String> = (34..=64).map(|n| n.to_string()).collect();
    format!(
        "trap {action} HUP INT QUIT ILL TRAP ABRT BUS FPE USR1 SEGV USR2 PIPE ALRM TERM XCPU \
         XFSZ VTALRM PROF SYS; {{ trap {action} STKFLT IO PWR; trap {action} EMT; \
         trap {action} {}; }} 2>/dev/null;",
        real_time.join(" ")
    )
}

/// What follows a program's group: its stdin (the shell reads its program from the channel's
/// stdin), and the shell's end, right after the group, so it never waits for more.
const AFTER_GROUP: &str = " </dev/null 8>&-; exit\n";
/// The same when the group reads the given stdin from a pipe (and reports its own exit).
const AFTER_GROUP_WITH_STDIN: &str = " 8>&-; } 2>&9 9>&-; exit\n";

/// How many bytes at the end of a channel text may be missing while its program may still run:
/// the shell runs a text's last line (the runner's group, or the line sourcing the program)
/// only once it is whole, and the end of input ends a line as a newline would.
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

    /// Logs the noise dropped (at debug level): dropped from answers, kept for debugging.
    pub fn log_noise(&self, stream: &str) {
        let (bytes, sample) = self.noise();
        if bytes > 0 {
            tracing::debug!(
                stream,
                bytes,
                sample = %String::from_utf8_lossy(sample).escape_debug(),
                "dropped what the login shell printed"
            );
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framing() -> Framing {
        Framing::with_nonces(
            ["0123abcd", "4567ef01", "feed", "endout", "enderr", "exit"]
                .map(|n| format!("_sshmcp_{n}")),
        )
    }

    #[test]
    fn bootstraps_are_shell_neutral() {
        for text in [BOOTSTRAP, INNER_BOOTSTRAP] {
            assert!(!text.contains(['!', '\\', '\n', '\'']), "{text}");
        }
        assert!(INNER_BOOTSTRAP.ends_with(SOURCE_FD3));
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

    /// Programs on a channel's shell, run here as a host runs them: each channel needs a
    /// mount namespace of its own (`unshare`, as root), which only Linux has.
    #[cfg(target_os = "linux")]
    mod on_a_local_channel {
        use super::super::super::runner;
        use super::*;

        /// The `/bin/sh` of a local channel's host, and what its runner runs on.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Sh {
            /// dash, whose runner hands over to bash (the login environment has `SHLVL`).
            Dash,
            /// dash with no `SHLVL` in the login environment: the runner keeps its own loop and
            /// `setsid`.
            DashAlone,
            /// dash whose `PATH` finds a `bash` that is not bash (`false`): the hand-over fails and
            /// the runner goes on with its own loop.
            DashFalseBash,
            /// bash as `/bin/sh`: the runner is bash in POSIX mode, with `setsid`.
            Bash,
        }

        const EVERY_SH: [Sh; 4] = [Sh::Dash, Sh::DashAlone, Sh::DashFalseBash, Sh::Bash];

        /// A channel's shell run locally: `/bin/sh -c BOOTSTRAP` after a login shell's noise, fed
        /// texts on its stdin as the daemon feeds them (the next only after the last one's end),
        /// its streams kept whole.
        struct LocalChannel {
            child: std::process::Child,
            streams: std::sync::Arc<(std::sync::Mutex<[Vec<u8>; 2]>, std::sync::Condvar)>,
            readers: Vec<std::thread::JoinHandle<()>>,
        }

        impl LocalChannel {
            fn start(configure: impl FnOnce(&mut std::process::Command)) -> Self {
                Self::start_as(Sh::Dash, configure)
            }

            /// A channel on a host whose `/bin/sh` is `sh` (bash is bind-mounted over it), in a
            /// private mount namespace with an empty `/etc` of its own (root only, as the test
            /// suite runs), dated an hour ago: the runner dates the login files, and a test
            /// elsewhere that changes `/etc` (a user added) would make this channel stale, as it
            /// should on a real host.
            fn start_as(sh: Sh, configure: impl FnOnce(&mut std::process::Command)) -> Self {
                assert!(
                    nix::unistd::geteuid().is_root(),
                    "a channel of its own /etc needs root"
                );
                let login = format!("echo noise; echo noise >&2; {BOOTSTRAP}");
                // What the namespace gets first, and what runs its `/bin/sh`. bash's `exec`
                // exports SHLVL whatever it was, so `env` runs the shell without it; the false
                // bash lives on the namespace's own tmpfs.
                let (prepare, env) = match sh {
                    Sh::Dash => ("", ""),
                    Sh::DashAlone => ("", "env -u SHLVL "),
                    Sh::DashFalseBash => (
                        "mount -t tmpfs tmpfs /run && mkdir /run/sshmcp-false-bash && \
                     ln -s /bin/false /run/sshmcp-false-bash/bash && ",
                        "env PATH=/run/sshmcp-false-bash:/usr/bin:/bin ",
                    ),
                    Sh::Bash => ("mount --bind /bin/bash /bin/sh && ", ""),
                };
                let mut command = std::process::Command::new("unshare");
                command
                    .args(["--mount", "--propagation", "private", "/bin/bash", "-c"])
                    .arg(format!(
                        "{prepare}mount -t tmpfs tmpfs /etc && \
                     touch -d '1 hour ago' /etc && exec {env}/bin/sh -c '{login}'"
                    ));
                configure(&mut command);
                let mut child = command
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let streams =
                    std::sync::Arc::new((std::sync::Mutex::default(), Default::default()));
                let pipes: [Box<dyn std::io::Read + Send>; 2] = [
                    Box::new(child.stdout.take().unwrap()),
                    Box::new(child.stderr.take().unwrap()),
                ];
                let readers = pipes
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut pipe)| {
                        let streams = streams.clone();
                        std::thread::spawn(move || {
                            let mut buf = [0u8; 65536];
                            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                                let (lock, changed): &(
                                    std::sync::Mutex<[Vec<u8>; 2]>,
                                    std::sync::Condvar,
                                ) = &streams;
                                lock.lock().unwrap()[i].extend_from_slice(&buf[..n]);
                                changed.notify_all();
                            }
                        })
                    })
                    .collect();
                Self {
                    child,
                    streams,
                    readers,
                }
            }

            fn feed(&mut self, text: &[u8]) {
                use std::io::Write;
                self.child.stdin.as_mut().unwrap().write_all(text).unwrap();
            }

            /// Whether the channel's shell exits by itself, its stdin still open, within
            /// `limit`. A thread waits for the exit without reaping the shell (`finish`, or the
            /// drop, still does), so its answer comes the moment the shell ends.
            fn exits_within(&self, limit: std::time::Duration) -> bool {
                use nix::sys::wait::{Id, WaitPidFlag, waitid};
                let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
                let (exited, seen) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    let ended = waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT);
                    let _ = exited.send(ended.is_ok());
                });
                seen.recv_timeout(limit).unwrap_or(false)
            }

            /// A channel with `home` as HOME that ran one program already: the next one it is
            /// fed is a program on a channel that waited.
            fn after_one_program(sh: Sh, home: &std::path::Path) -> Self {
                let mut channel = Self::start_as(sh, |c| {
                    c.env("HOME", home);
                });
                let first = Framing::new().unwrap();
                channel.feed(&first.fresh_text(&first.payload(
                    "true",
                    None,
                    None,
                    true,
                    Tether::ToCaller,
                )));
                channel.wait_for(&first.end_out);
                channel
            }

            /// Waits until stdout holds `needle` (a program's end marker).
            fn wait_for(&self, needle: &str) {
                self.wait_for_on(0, needle);
            }

            /// Waits until stream `i` (0 stdout, 1 stderr) holds `needle`.
            fn wait_for_on(&self, i: usize, needle: &str) {
                let (lock, changed) = &*self.streams;
                let held =
                    |s: &[Vec<u8>; 2]| !s[i].windows(needle.len()).any(|w| w == needle.as_bytes());
                let timeout = std::time::Duration::from_secs(10);
                let (streams, waited) = changed
                    .wait_timeout_while(lock.lock().unwrap(), timeout, |s| held(s))
                    .unwrap();
                assert!(
                    !waited.timed_out(),
                    "no {needle} on stream {i}: {:?}",
                    streams.each_ref().map(|s| String::from_utf8_lossy(s))
                );
            }

            /// Waits until the program of `f` ended (its end marker on stdout), or the channel's
            /// shell ended without one (a stale channel runs nothing), then [`Self::finish`]:
            /// a stdin closed under a running program would stop it, as the daemon's stop does.
            fn finish_after(self, f: &Framing) -> [Vec<u8>; 2] {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                loop {
                    let (lock, changed) = &*self.streams;
                    let end = f.end_out.as_bytes();
                    let ended = |s: &[Vec<u8>; 2]| s[0].windows(end.len()).any(|w| w == end);
                    let (streams, _) = changed
                        .wait_timeout_while(
                            lock.lock().unwrap(),
                            std::time::Duration::from_millis(50),
                            |s| !ended(s),
                        )
                        .unwrap();
                    let ended = ended(&streams);
                    drop(streams);
                    if ended || self.exits_within(std::time::Duration::from_millis(50)) {
                        break;
                    }
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the program never ended"
                    );
                }
                self.finish()
            }

            /// Closes stdin and waits: the shell reads to its end and exits. Returns both streams.
            /// (A test that fails first leaves the runner to `Drop`.)
            fn finish(mut self) -> [Vec<u8>; 2] {
                drop(self.child.stdin.take());
                self.child.wait().unwrap();
                for reader in self.readers.drain(..) {
                    reader.join().unwrap();
                }
                std::mem::take(&mut *self.streams.0.lock().unwrap())
            }
        }

        impl Drop for LocalChannel {
            /// Ends the runner of a test that failed before `finish`.
            fn drop(&mut self) {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }

        /// A home directory whose own date is an hour old: a channel started in the same clock
        /// tick as its creation would count it as a changed login file.
        fn old_home() -> tempfile::TempDir {
            let home = tempfile::tempdir().unwrap();
            let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
            std::fs::File::open(home.path())
                .and_then(|dir| dir.set_modified(hour_ago))
                .unwrap();
            home
        }

        /// One program's share of a channel's streams, split by its own markers.
        #[derive(Debug)]
        struct LocalRun {
            markers: Markers,
            out_marker: Option<String>,
            out: Vec<u8>,
            err_marker: Option<String>,
            err: Vec<u8>,
            end: Option<runner::End>,
            /// The status the program's shell reported as it exited.
            exited: Option<u32>,
        }

        impl LocalRun {
            fn split(f: &Framing, [stdout, stderr]: &[Vec<u8>; 2]) -> Self {
                let (mut so, mut se) = (f.stdout_scanner(), f.stderr_scanner());
                let (mut eo, mut ee) = (f.stdout_end(), f.stderr_end());
                let (mut xo, mut xe) = (f.exit_report(), f.exit_report());
                let out = eo.feed(&xo.feed(&so.feed(stdout))).into_owned();
                let err = ee.feed(&xe.feed(&se.feed(stderr))).into_owned();
                assert_eq!(eo.end(), ee.end(), "both streams end alike");
                assert_eq!(xo.rest(), None, "the exit report goes to stderr");
                Self {
                    markers: Markers::read(&so, &se),
                    out_marker: so.marker().map(str::to_string),
                    out,
                    err_marker: se.marker().map(str::to_string),
                    err,
                    end: eo.end(),
                    exited: xe.rest().map(|r| r.parse().unwrap()),
                }
            }

            fn status(&self) -> Option<u32> {
                self.end.as_ref().map(|e| e.status)
            }
        }

        /// Runs one payload on a fresh local channel.
        fn run_local(
            f: &Framing,
            script: &str,
            cwd: Option<&str>,
            stdin: Option<&[u8]>,
        ) -> LocalRun {
            let mut channel = LocalChannel::start(|_| {});
            channel.feed(&f.fresh_text(&f.payload(script, cwd, stdin, true, Tether::ToCaller)));
            LocalRun::split(f, &channel.finish_after(f))
        }

        #[test]
        fn payload_runs_exactly_the_script() {
            let f = framing();
            let script = "printf '%s|' \"$#\" \"$0\" \"${_sshmcp_g-unset}\"; echo out; echo err >&2; \
                      cat <<EOF\nheredoc $((1+1))\nEOF\ncase x in x) echo ')';; esac\nexit 3";
            let run = run_local(&f, script, None, None);
            assert!(run.markers.started && !run.markers.no_cwd);
            assert_eq!(
                String::from_utf8_lossy(&run.out),
                "0|/bin/sh|unset|out\nheredoc 2\n)\n"
            );
            assert_eq!(run.err, b"err\n");
            assert_eq!((run.status(), run.exited), (Some(3), Some(3)));
            assert_eq!(run.end.unwrap().after, runner::After::Idle);
        }

        #[test]
        fn a_program_runs_in_a_group_of_its_own() {
            let f = framing();
            let run = run_local(&f, "ps -o pgid= -p $$", None, None);
            let group: u32 = run.err_marker.unwrap().parse().unwrap();
            assert_ne!(group, nix::unistd::getpgrp().as_raw() as u32);
            assert_eq!(run.markers.group, Some(group));
            assert_eq!(run.out_marker, Some(format!("run {group}")));
            assert_eq!(
                String::from_utf8(run.out).unwrap().trim(),
                group.to_string()
            );
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
            assert_eq!(run.status(), Some(NO_CWD_STATUS));
        }

        #[test]
        fn stdin_reaches_the_group_byte_for_byte() {
            let f = framing();
            let data: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
            let run = run_local(&f, "cat", None, Some(&data));
            assert_eq!(run.status(), Some(0));
            assert_eq!(run.out, data);
        }

        #[test]
        fn a_text_cut_before_its_closing_brace_runs_nothing() {
            let f = framing();
            let home = old_home();
            let payload =
                |f: &Framing| f.payload("echo ran-anyway", None, None, true, Tether::ToCaller);
            // The first program, cut in its channel's text.
            let text = f.fresh_text(&payload(&f));
            let mut channel = LocalChannel::start(|_| {});
            channel.feed(&text[..text.len() - PAYLOAD_TAIL_AFTER_GROUP - 1]);
            let [out, _] = channel.finish();
            assert!(!String::from_utf8_lossy(&out).contains("ran-anyway"));
            // A later program, cut in its own text.
            let mut channel = LocalChannel::after_one_program(Sh::Dash, home.path());
            let later = Framing::new().unwrap();
            let text = later.warm_text(&payload(&later), true);
            let cut = &text[..text.len() - PAYLOAD_TAIL_AFTER_GROUP - 1];
            assert!(cut.ends_with(b"; f"), "the sourcing line is cut");
            channel.feed(cut);
            let [out, _] = channel.finish();
            assert!(!String::from_utf8_lossy(&out).contains("ran-anyway"));
            // Cut inside its here-document, right after the program's group.
            let mut channel = LocalChannel::after_one_program(Sh::Dash, home.path());
            let text = later.warm_text(&payload(&later), true);
            let group_end = text.windows(2).rposition(|w| w == b"\n}").unwrap() + 2;
            channel.feed(&text[..group_end]);
            let [out, _] = channel.finish();
            assert!(!String::from_utf8_lossy(&out).contains("ran-anyway"));
        }

        /// Programs one after another on one channel: each is exact, each starts from the login
        /// environment, and interrupts reach them (no signal is ignored).
        #[test]
        fn one_channel_runs_program_after_program() {
            program_after_program(Sh::Dash);
        }

        #[test]
        fn one_channel_runs_program_after_program_where_sh_is_bash() {
            program_after_program(Sh::Bash);
        }

        #[test]
        fn one_channel_runs_program_after_program_where_the_runner_keeps_dash() {
            program_after_program(Sh::DashAlone);
            program_after_program(Sh::DashFalseBash);
        }

        fn program_after_program(sh: Sh) {
            let home = old_home();
            let mut channel = LocalChannel::start_as(sh, |c| {
                c.env("HOME", home.path());
            });
            let runs: Vec<(Framing, &str)> = vec![
                (Framing::new().unwrap(), "export LEAK=1; cd /; printf one"),
                (
                    Framing::new().unwrap(),
                    "printf '%s|%s' \"${LEAK-none}\" \"$PWD\" >&2; exit 4",
                ),
                (Framing::new().unwrap(), "grep SigIgn /proc/self/status"),
                (Framing::new().unwrap(), "cat"),
                // A syntax error ends its program at once, on a channel that waited too.
                (Framing::new().unwrap(), "echo \"unterminated"),
                (Framing::new().unwrap(), "echo after"),
                (Framing::new().unwrap(), "cat /proc/$PPID/comm"),
                (
                    Framing::new().unwrap(),
                    "for fd in 3 4 5 6 7 8 9; do [ -e /proc/$$/fd/$fd ] && echo $fd; done; true",
                ),
            ];
            for (i, (f, script)) in runs.iter().enumerate() {
                let stdin = (i == 3).then_some(&b"given\n"[..]);
                let payload = f.payload(script, None, stdin, true, Tether::ToCaller);
                channel.feed(&match i {
                    0 => f.fresh_text(&payload),
                    _ => f.warm_text(&payload, true),
                });
                channel.wait_for(&f.end_out);
            }
            let output = channel.finish();
            let split: Vec<LocalRun> = runs
                .iter()
                .map(|(f, _)| LocalRun::split(f, &output))
                .collect();
            assert_eq!(split[0].out, b"one");
            let here = std::env::current_dir().unwrap();
            assert_eq!(split[1].err, format!("none|{}", here.display()).as_bytes());
            assert_eq!(split[1].status(), Some(4));
            // SIGINT and SIGQUIT are not ignored by the commands, as in a background job; under
            // bash the stop signals of a terminal are (TSTP, TTIN, TTOU: bits 19 to 21).
            let out = String::from_utf8_lossy(&split[2].out);
            let mask = u64::from_str_radix(out.trim().trim_start_matches("SigIgn:").trim(), 16);
            let stops = match sh {
                Sh::Dash => 0x38_0000,
                Sh::DashAlone | Sh::DashFalseBash | Sh::Bash => 0,
            };
            assert_eq!(mask.unwrap() & (0x38_0000 | 0b110), stops, "{sh:?} {out}");
            assert_eq!(split[3].out, b"given\n");
            assert_eq!(split[4].status(), Some(2));
            assert!(!split[4].err.is_empty());
            assert_eq!(split[5].out, b"after\n");
            let runner = match sh {
                Sh::Dash => "bash\n",
                Sh::DashAlone | Sh::DashFalseBash | Sh::Bash => "sh\n",
            };
            assert_eq!(String::from_utf8_lossy(&split[6].out), runner, "{sh:?}");
            assert_eq!(
                String::from_utf8_lossy(&split[7].out),
                "",
                "{sh:?}: no descriptor leaks"
            );
            assert!(
                split
                    .iter()
                    .all(|r| r.end.as_ref().unwrap().after == runner::After::Idle)
            );
        }

        /// How each program ended, as the answer says it (`exit_code`, `signal`), under dash and
        /// under bash as /bin/sh, with and without given stdin: a shell a signal ended is named
        /// and says nothing about it on stderr; an exit is an exit, above 128 too, under `set -e`
        /// and from a function too; the trap's own listing is no report; a terminal's stop signal
        /// stops nothing; a signal to the shell that only waits for a group reading given stdin
        /// ends nothing. Every program leaves its channel idle for the next, whichever runner.
        #[test]
        fn signals_are_told_apart_from_exits() {
            type Case = (
                &'static str,
                Option<&'static [u8]>,
                Option<i32>,
                Option<&'static str>,
            );
            let cases: [Case; 12] = [
                ("echo started; kill -USR1 $$", None, None, Some("USR1")),
                ("kill -TERM $$; echo not-reached", None, None, Some("TERM")),
                ("exit 138", None, Some(138), None),
                ("set -e; f() { exit 3; }; f", None, Some(3), None),
                ("trap; exit 5", None, Some(5), None),
                ("exec sh -c 'kill -SEGV $$'", None, None, Some("SEGV")),
                ("cat; exit 7", Some(b"in\n"), Some(7), None),
                // A terminal's stop signal stops nothing: no terminal, as under `setsid`, where
                // the group is orphaned.
                ("kill -TSTP $$; exit 6", None, Some(6), None),
                // No report (the command's own exit trap replaced it, or an `exec`), and a status
                // no signal gives.
                ("trap 'true' EXIT; exit 255", None, Some(255), None),
                ("exec sh -c 'exit 200'", None, Some(200), None),
                // The group is a pipeline's subshell: a signal ending it ends the run, one sent
                // to the shell that waits for it (`$$` there) ends nothing.
                (
                    "cat; exec sh -c 'kill -USR1 $$'",
                    Some(b"in\n"),
                    None,
                    Some("USR1"),
                ),
                (
                    "cat; kill -USR1 $$; kill -XCPU $$; kill -40 $$; exit 4",
                    Some(b"in\n"),
                    Some(4),
                    None,
                ),
            ];
            for sh in EVERY_SH {
                let home = old_home();
                let mut channel = LocalChannel::after_one_program(sh, home.path());
                let framings: Vec<Framing> =
                    cases.iter().map(|_| Framing::new().unwrap()).collect();
                for (f, (script, stdin, _, _)) in framings.iter().zip(&cases) {
                    channel.feed(&f.warm_text(
                        &f.payload(script, None, *stdin, true, Tether::ToCaller),
                        true,
                    ));
                    channel.wait_for(&f.end_out);
                }
                let output = channel.finish();
                for (f, (script, _, exit_code, signal)) in framings.iter().zip(&cases) {
                    let run = LocalRun::split(f, &output);
                    let end = run.end.clone().expect("an end");
                    let (got_exit, got_signal) =
                        crate::remote::job::exit_or_signal(&end, run.exited);
                    assert_eq!(
                        (got_exit, got_signal.as_deref()),
                        (*exit_code, *signal),
                        "{sh:?} {script}: {run:?}"
                    );
                    assert_eq!(end.after, runner::After::Idle, "{sh:?} {script}");
                    let err = String::from_utf8_lossy(&run.err);
                    assert!(!err.contains("_sshmcp"), "{sh:?} {script}: {err}");
                    if signal.is_some() {
                        assert_eq!(err, "", "{sh:?} {script}");
                    }
                }
                let listed = LocalRun::split(&framings[4], &output);
                assert!(
                    String::from_utf8_lossy(&listed.out).contains("trap"),
                    "{sh:?}"
                );
            }
        }

        /// A fresh channel of `sh` fed `script` (with `stdin` for it), tied to its caller.
        fn fed(sh: Sh, script: &str, stdin: Option<&[u8]>) -> (Framing, LocalChannel) {
            let f = framing();
            let mut channel = LocalChannel::start_as(sh, |_| {});
            channel.feed(&f.fresh_text(&f.payload(script, None, stdin, true, Tether::ToCaller)));
            (f, channel)
        }

        /// A program's group is gone soon after its channel's stdin closed (its caller stopped it,
        /// or died), whichever shell runs the channel, with or without stdin for the program.
        #[test]
        fn a_program_ends_when_its_channel_closes() {
            for sh in EVERY_SH {
                for stdin in [None, Some(&b"input"[..])] {
                    // TERM ignored (and so by `sleep` too): only the relay's KILL ends it.
                    let script = "echo \"group $$\"; trap '' INT HUP TERM; sleep 300";
                    let (_, mut channel) = fed(sh, script, stdin);
                    channel.wait_for("\ngroup ");
                    let out = channel.streams.0.lock().unwrap()[0].clone();
                    let text = String::from_utf8_lossy(&out);
                    let group: i32 = text
                        .split("\ngroup ")
                        .nth(1)
                        .and_then(|rest| rest.split_whitespace().next())
                        .and_then(|g| g.parse().ok())
                        .unwrap_or_else(|| panic!("{sh:?}: no group in {text}"));
                    drop(channel.child.stdin.take());
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    while live_members(group) > 0 {
                        assert!(
                            std::time::Instant::now() < deadline,
                            "{sh:?}: group {group} still runs 10 s after its channel closed"
                        );
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                }
            }
        }

        /// The relay is no job of a program's shell: a bare `wait` waits for the script's own
        /// children, and the channel goes on to the next program.
        #[test]
        fn a_scripts_wait_waits_for_its_own_children_only() {
            for sh in EVERY_SH {
                for stdin in [None, Some(&b"input"[..])] {
                    let script = "sleep 0.1 & wait; echo waited; exit 4";
                    let (f, channel) = fed(sh, script, stdin);
                    channel.wait_for(&f.end_out);
                    let run = LocalRun::split(&f, &channel.finish());
                    assert_eq!(run.out, b"waited\n", "{sh:?}");
                    assert_eq!(run.status(), Some(4), "{sh:?}");
                    assert_eq!(run.end.unwrap().after, runner::After::Idle, "{sh:?}");
                }
            }
        }

        /// A program that is not tied to its caller (a kill) runs to its end after its channel's
        /// stdin closed.
        #[test]
        fn an_untethered_program_outlives_its_channel() {
            let dir = tempfile::tempdir().unwrap();
            let done = dir.path().join("done");
            let f = framing();
            let mut channel = LocalChannel::start(|_| {});
            let script = format!("echo started; sleep 1; echo done > '{}'", done.display());
            channel.feed(&f.fresh_text(&f.payload(&script, None, None, true, Tether::None)));
            channel.wait_for("started");
            channel.finish();
            assert!(done.exists(), "the program was ended with its channel");
        }

        /// A program whose text came just before its channel's stdin ended (the daemon died
        /// right after sending it) either never runs or is ended: it never slips past the relay's
        /// last look at the log. Tried many times, as the race is short.
        #[test]
        fn a_program_sent_just_before_the_end_never_runs_unseen() {
            for sh in EVERY_SH {
                let marker = format!("300.{}", std::process::id() % 10_000);
                for round in 0..10 {
                    let f = Framing::new().unwrap();
                    let mut channel = LocalChannel::start_as(sh, |_| {});
                    let script = format!("sleep {marker}{round}");
                    channel.feed(&f.fresh_text(&f.payload(
                        &script,
                        None,
                        None,
                        true,
                        Tether::ToCaller,
                    )));
                    drop(channel.child.stdin.take());
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    while running(&format!("sleep {marker}{round}")) {
                        assert!(
                            std::time::Instant::now() < deadline,
                            "{sh:?} round {round}: the program runs on unseen"
                        );
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                }
            }
        }

        /// The relay's fifo and log are in a directory only the user can enter, gone once the
        /// channel ends.
        #[test]
        fn the_relays_files_are_private_and_go_with_the_channel() {
            let f = framing();
            let mut channel = LocalChannel::start(|_| {});
            let script = "echo \"relay $1 ${_sshmcp_wf-none}\"; ls -ld /tmp/.sshmcp-*-_sshmcp_feed";
            channel.feed(&f.fresh_text(&f.payload(script, None, None, true, Tether::ToCaller)));
            channel.wait_for(&f.end_out);
            let out = String::from_utf8_lossy(&channel.streams.0.lock().unwrap()[0]).into_owned();
            assert!(
                out.contains("relay  none"),
                "no argument or variable is left: {out}"
            );
            let line = out
                .lines()
                .find(|l| l.contains(".sshmcp-"))
                .unwrap_or_else(|| panic!("{out}"));
            assert!(line.starts_with("drwx------"), "{line}");
            let dir = line.split_whitespace().last().unwrap().to_string();
            channel.finish();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::path::Path::new(&dir).exists() {
                assert!(std::time::Instant::now() < deadline, "{dir} stays");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }

        /// Whether a live process has `needle` in its command line.
        fn running(needle: &str) -> bool {
            std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
                let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                let zombie = stat
                    .rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('Z'));
                !zombie
                    && std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                        String::from_utf8_lossy(&c)
                            .replace('\0', " ")
                            .contains(needle)
                    })
            })
        }

        /// How many processes of `group` live: a member that ended stays in its group until its
        /// parent reaps it, which for an orphan is whenever the host's init gets to it.
        fn live_members(group: i32) -> usize {
            let Ok(procs) = std::fs::read_dir("/proc") else {
                return 0;
            };
            procs
                .flatten()
                .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
                .filter(|stat| {
                    let after_name = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
                    let mut fields = after_name.split(' ');
                    let state = fields.next();
                    let pgrp = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
                    state != Some("Z") && pgrp == Some(group)
                })
                .count()
        }

        /// When a signal ends the runner's bash in the middle of a program, the channel ends with
        /// it, its stdin still open: dash does not go on with a shell of its own that would read
        /// the next program while the last one runs without its end marker.
        #[test]
        fn a_channel_whose_bash_is_killed_ends() {
            let home = old_home();
            let mut channel = LocalChannel::after_one_program(Sh::Dash, home.path());
            let killer = framing();
            let payload = killer.payload(
                "kill -TERM $PPID; echo after",
                None,
                None,
                true,
                Tether::ToCaller,
            );
            channel.feed(&killer.warm_text(&payload, true));
            channel.wait_for("after");
            assert!(
                channel.exits_within(std::time::Duration::from_secs(10)),
                "the channel's shell went on after its bash was killed"
            );
        }

        /// A program whose background child outlives it keeps the channel: the channel's shell
        /// ends after it, and says so.
        #[test]
        fn a_background_child_keeps_its_channel() {
            let f = framing();
            let run = run_local(&f, "sleep 5 >/dev/null 2>&1 & echo started", None, None);
            assert_eq!(run.out, b"started\n");
            assert_eq!(run.end.unwrap().after, runner::After::Left);
        }

        /// A waiting channel whose login files changed since it started runs nothing and says it
        /// is stale.
        #[test]
        fn a_changed_login_file_makes_a_waiting_channel_stale() {
            for sh in EVERY_SH {
                for edit in [
                    "echo x >> ~/.bashrc",
                    "rm ~/.bashrc",
                    "echo x >> ~/.bashrc.d/env.sh",
                    "echo x >> ~/.bash_aliases",
                ] {
                    let (second, output) = after_a_login_file_changed(sh, edit, true);
                    assert!(
                        second.markers.stale && !second.markers.started,
                        "{sh:?} {edit}"
                    );
                    assert!(!String::from_utf8_lossy(&output).contains("ran-anyway"));
                }
            }
        }

        /// A kill's program skips that check: it runs on a channel whose login files changed.
        #[test]
        fn a_program_without_the_check_runs_after_a_login_file_changed() {
            for sh in EVERY_SH {
                let (second, output) = after_a_login_file_changed(sh, "echo x >> ~/.bashrc", false);
                assert!(second.markers.started && !second.markers.stale, "{sh:?}");
                assert!(String::from_utf8_lossy(&output).contains("ran-anyway"));
            }
        }

        /// `edit` changes a login file that is an hour old (`~/.bashrc`, `~/.bash_aliases`, or
        /// `~/.bashrc.d/env.sh`), in directories an hour old; then a second program
        /// (`check_login_files` as given) prints `ran-anyway`. Returns the second run and the
        /// channel's stdout.
        fn after_a_login_file_changed(
            sh: Sh,
            edit: &str,
            check_login_files: bool,
        ) -> (LocalRun, Vec<u8>) {
            let home = old_home();
            let (rc, rc_d) = (home.path().join(".bashrc"), home.path().join(".bashrc.d"));
            std::fs::create_dir(&rc_d).unwrap();
            let (aliases, in_rc_d) = (home.path().join(".bash_aliases"), rc_d.join("env.sh"));
            for file in [&rc, &aliases, &in_rc_d] {
                std::fs::write(file, "").unwrap();
            }
            let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
            for path in [&rc, &aliases, &in_rc_d, &rc_d, home.path()] {
                std::fs::File::open(path)
                    .and_then(|f| f.set_modified(hour_ago))
                    .unwrap();
            }
            let mut channel = LocalChannel::after_one_program(sh, home.path());
            let (same, second) = (Framing::new().unwrap(), Framing::new().unwrap());
            // Nothing changed yet: the channel serves the next program.
            channel.feed(&same.warm_text(
                &same.payload(edit, None, None, true, Tether::ToCaller),
                true,
            ));
            channel.wait_for(&same.end_out);
            let payload = second.payload("echo ran-anyway", None, None, true, Tether::ToCaller);
            channel.feed(&second.warm_text(&payload, check_login_files));
            let output = channel.finish_after(&second);
            let same = LocalRun::split(&same, &output);
            assert!(same.markers.started, "{sh:?} {edit}");
            assert_eq!(same.end.unwrap().after, runner::After::Idle);
            (LocalRun::split(&second, &output), output[0].clone())
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
            let mut channel = LocalChannel::start(|c| {
                c.current_dir(base.path().join("home"))
                    .env("CDPATH", base.path().join("decoy"));
            });
            channel.feed(&f.fresh_text(&f.payload(
                "pwd",
                Some("sub"),
                None,
                true,
                Tether::ToCaller,
            )));
            let run = LocalRun::split(&f, &channel.finish_after(&f));
            assert!(String::from_utf8(run.out).unwrap().ends_with("/home/sub\n"));
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
}
