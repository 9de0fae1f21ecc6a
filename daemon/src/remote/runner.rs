//! The shell a command channel keeps running, so one channel serves command after command:
//! its setup, its loop (each program in a process session of its own, its end reported on
//! both streams, the next program's shell started at once), and the check that retires it
//! once the login files changed.
//!
//! Opening a channel and starting the login shell is most of what a short command costs
//! (sshd forks a session, the login shell reads its startup files, then `/bin/sh` starts). So
//! a channel's `/bin/sh` (the runner) keeps one `setsid /bin/sh` (a new process group: a kill
//! ends it and not the channel) waiting on the channel's stdin, which reads its next program
//! from there and runs it straight onto the channel's streams. Where the host has bash, the
//! runner hands over to bash, whose job control starts each program's shell in a group of its
//! own without the exec of `setsid` (see [`hand_over`]). The guarantees of a fresh channel
//! hold:
//! - Every program has its own `/bin/sh`, started from the login environment: nothing one
//!   program does to its shell reaches the next.
//! - A program runs on a channel only when every process of the one before it is gone (its
//!   group is empty): a background child still running keeps its channel to itself, which
//!   then closes as a fresh channel's would.
//! - A program on a channel that waited sees what the programs before it left in the login
//!   files: its shell first checks that none of them changed since the channel's login shell
//!   read them, and otherwise ends without running anything (the run then opens a fresh
//!   channel).
//! - The streams stay exact: a per-run end marker closes each one, and the next program's
//!   start markers drop anything written between the two.
//! - Nothing but a waiting program's shell reads the channel's stdin, and nothing is written
//!   there until the program before has ended, so no shell reads another's program.
//!
//! Where neither `setsid` nor bash can start a program's shell in a group of its own, the login
//! files cannot be dated, or a startup file merged the streams, each channel runs one
//! program, as a fresh channel would.

use std::borrow::Cow;

/// What the channel's shell runs once: a copy of its stdout for the programs (inside `$( )`
/// fd 1 is the capture pipe); on fd 4 a here-document of one line, whose file (a pipe, or a
/// deleted temporary file, both made now) bears the time the channel started; its stderr on
/// fd 7 for the programs and the end marker, and its own stderr sent to `/dev/null` (dash
/// reports a program shell killed by a signal there: "Terminated"). `_sshmcp_d` is where the
/// shell's descriptors can be opened by name. `_sshmcp_t` is left empty when the channel serves
/// one program only (stderr merged into stdout ends only when the channel closes);
/// `_sshmcp_j` says whether the runner may hand over to bash (see [`hand_over`]);
/// `_sshmcp_rg` is the runner's own process group. `_sshmcp_k` is what `kill` needs before a
/// process group (see `kill::GROUP_OPTION`, which the setup ends with).
const SETUP: &str = "exec 6>&1 4<<'_sshmcp_started'\nstarted\n_sshmcp_started\n\
if [ -e /dev/fd/4 ]; then _sshmcp_d=/dev/fd; elif [ -e /proc/self/fd/4 ]; then _sshmcp_d=/proc/self/fd; \
else _sshmcp_d=; fi; _sshmcp_t=${_sshmcp_d:+1}\n\
if [ /dev/fd/1 -ef /dev/fd/2 ]; then _sshmcp_t=; fi\n\
exec 7>&2 2>/dev/null\n\
if command -v setsid >/dev/null 2>&1; then _sshmcp_ss=setsid; else _sshmcp_ss=; fi; _sshmcp_rg=$$\n\
if [ -n \"$_sshmcp_t\" ] && [ -n \"${SHLVL+x}\" ] && [ -z \"${SHELLOPTS+x}${BASHOPTS+x}\" ] \
&& command -v bash >/dev/null 2>&1; then _sshmcp_j=1; else _sshmcp_j=; fi\n";

/// The channel's watcher, which ties every program that runs on the channel to its caller.
/// Nothing is written on a channel's stdin while a program runs, and its end comes only when
/// the daemon stops the run, when the daemon dies (its descriptors close, so the master closes
/// the channel), or when the connection drops: then nobody can answer for the program any
/// more, and it must not run on unseen, holding its channel. So the channel's stdin does not
/// reach the shells directly: a relay (`cat`, in the runner's group, not a program's) passes
/// it on through a fifo, and at its end sends the program running then TERM (and CONT), and
/// KILL a second later. Each program's prelude notes its group in the channel's log (on fd 9),
/// and the loop notes `-` after it (see `LOOP`), so the relay knows which group runs, if any.
///
/// The fifo and the log live in a directory of the channel's own, made 0700 (in `$TMPDIR`,
/// else `/tmp`; named after the runner's PID and `{NAME}`, a nonce of the channel's text), so
/// no other user can plant or write either. A program whose text came just before the stdin
/// ended must not slip between the relay's last look at the log and its own note: the relay
/// removes the fifo's name before it reads the log, and a program checks, after its note,
/// that the name is still there (it is told the directory as its shell's first argument), and
/// runs nothing otherwise. The relay ignores TERM once it kills, so a program in the runner's
/// own group (no `setsid`, no bash) still gets its KILL. A program with root processes
/// (`sudo_exec`, noted `r<group>`) is also killed through sudo, as a living daemon kills it:
/// the user's KILL cannot reach root's processes.
///
/// A shell reads commands from its input a part at a time, so the runner switches to the fifo
/// before the relay reads anything (the relay's open of the fifo waits for the runner's), and
/// reads the rest of its own text through it. Where no directory or fifo can be made, the
/// channel has no relay, and its programs outlive a dead daemon as they did before.
const RELAY: &str = "_sshmcp_w=; for _sshmcp_x in \"${TMPDIR:-/tmp}\" /tmp; do \
if command mkdir -m 700 \"$_sshmcp_x/.sshmcp-$$-{NAME}\"; then \
_sshmcp_w=$_sshmcp_x/.sshmcp-$$-{NAME}; break; fi; done; \
if [ -n \"$_sshmcp_w\" ] && command mkfifo \"$_sshmcp_w/in\" && command : >\"$_sshmcp_w/g\"; then \
exec 9<&0; { command cat; exec >/dev/null; command rm -f \"$_sshmcp_w/in\"; command trap '' TERM; \
_sshmcp_g=; while command read -r _sshmcp_x; do _sshmcp_g=$_sshmcp_x; done <\"$_sshmcp_w/g\"; \
_sshmcp_r=; case $_sshmcp_g in r*) _sshmcp_g=${_sshmcp_g#r}; _sshmcp_r=1 ;; esac; \
case $_sshmcp_g in ''|*[!0-9]*|0|1) ;; *) if [ -n \"$_sshmcp_r\" ]; then \
command printf 'kill -TERM -%s; kill -CONT -%s; sleep 1; kill -KILL -%s\\n' \"$_sshmcp_g\" \
\"$_sshmcp_g\" \"$_sshmcp_g\" | command {AS_ROOT} & fi; command kill -TERM $_sshmcp_k -\"$_sshmcp_g\"; \
command kill -CONT $_sshmcp_k -\"$_sshmcp_g\"; command sleep 1; \
command kill -KILL $_sshmcp_k -\"$_sshmcp_g\" ;; esac; \
command rm -rf \"$_sshmcp_w\"; } <&9 >\"$_sshmcp_w/in\" 4<&- 6>&- 7>&- 9<&- & \
exec <\"$_sshmcp_w/in\" 9>>\"$_sshmcp_w/g\"; \
else if [ -n \"$_sshmcp_w\" ]; then command rm -rf \"$_sshmcp_w\"; fi; _sshmcp_w=; fi\n";

/// The runner's setup ([`SETUP`], `kill`'s option for a group, then the [`RELAY`]), its
/// paths named after `name`.
fn setup(name: &str) -> String {
    let relay = RELAY
        .replace("{NAME}", name)
        .replace("{AS_ROOT}", super::kill::AS_ROOT);
    let option = super::kill::GROUP_OPTION;
    format!("{SETUP}{option}\n{relay}")
}

/// How a program's shell gets the channel's streams: stdout from the runner's copy, stderr
/// from fd 7, and fd 5 as the capture pipe, where the program's prelude reports its group, its
/// end nonces, and whether it may share the channel.
const PROGRAM_FDS: &str = "5>&1 1>&6 6>&- 2>&7 7>&-";

/// After each program: the end markers (with the status, whether the channel goes on, and the
/// host's name of the signal when the status says one ended the program's shell), then the
/// next program's shell, or the end of the channel. A program whose shell reported
/// nothing never started (its stdin ended, or its channel was stale); one whose group is the
/// runner's own (its shell got no group of its own) ends the channel.
const LOOP: &str = "while :; do command printf \"%s\\n\" - >&9; set -- $_sshmcp_p; \
if [ $# -lt 3 ]; then exit \"$_sshmcp_s\"; fi\n\
case $1 in *[!0-9]*|0|1|\"$_sshmcp_rg\") _sshmcp_r=last ;; \
*) if command kill -0 $_sshmcp_k -\"$1\" 2>/dev/null; then _sshmcp_r=left; \
elif [ -z \"$_sshmcp_t\" ] || [ -z \"$_sshmcp_ss\" ] || [ \"$4\" = last ]; then _sshmcp_r=last; \
else _sshmcp_r=idle; fi ;; esac\n\
_sshmcp_n=-; if [ \"$_sshmcp_s\" -gt 128 ]; then _sshmcp_n=$(command kill -l \"$_sshmcp_s\") || _sshmcp_n=-; fi\n\
command printf \"%s %s %s %s\\n\" \"$2\" \"$_sshmcp_s\" \"$_sshmcp_r\" \"$_sshmcp_n\"; \
command printf \"%s %s %s %s\\n\" \"$3\" \"$_sshmcp_s\" \"$_sshmcp_r\" \"$_sshmcp_n\" >&7\n\
if [ \"$_sshmcp_r\" != idle ]; then exit \"$_sshmcp_s\"; fi\n";

/// Starts the next program's shell, which reads its program from the channel's stdin (its
/// first argument is the relay's directory: see [`RELAY`]).
fn spawn() -> String {
    format!("_sshmcp_p=$($_sshmcp_ss /bin/sh -s \"$_sshmcp_w\" {PROGRAM_FDS}); _sshmcp_s=$?\n")
}

/// Where the host has bash, the runner hands its loop over to it before its next program's
/// shell: bash's job control gives each program's shell a process group of its own for a
/// fork, where `setsid` costs the exec of one more program (with the dynamic loader, most of
/// what a command costs the host). Only where the login environment has `SHLVL` (bash would
/// add it) and no bash options for bash to take up (where `/bin/sh` is bash they are always
/// set, and the runner keeps `setsid`); `_sshmcp_j` is cleared first, so it is tried once.
///
/// The programs' reports come back through a pipe opened for reading and writing on fd 3 (an
/// empty here-document's pipe opened again by name, Linux's way: nothing on the file system,
/// no program run; where that open or a first line through it fails, nothing is handed
/// over, and a write to a pipe that only reads, as on FreeBSD, fails without killing the
/// runner), as `$( )` turns job control off. bash gets its loop as `-c` text, read from memory
/// (a script on a pipe it would read a byte at a time), with `--norc` (bash sources
/// `~/.bashrc` when sshd seems to have started it). It starts with the stop signals of a
/// terminal ignored, and its programs with it: under `setsid` a program's group is orphaned
/// and the kernel drops them, while in bash's session a program would stop and wait out its
/// timeout (a program can then not catch them either, as it could under `setsid`).
///
/// dash waits for bash as its child. bash says `ran` on fd 3 as it exits. When bash ended by
/// itself having read nothing from fd 3 and said nothing (a `bash` in `PATH` that is not
/// bash, one that could not start, one without job control), dash goes on with its own loop,
/// as if nothing had been tried. Otherwise (bash ran, or a signal ended it, perhaps in the
/// middle of a program) dash ends the channel: a second shell waiting on stdin, or the rest of
/// a program's report, must never be taken for the next program's. `first` is what bash runs
/// before its loop.
fn hand_over(first: &str) -> String {
    format!(
        "if [ -n \"$_sshmcp_j\" ]; then _sshmcp_j=; exec 8<<'_sshmcp_pipe'\n_sshmcp_pipe\n\
         trap '' PIPE; if command exec 3<>\"$_sshmcp_d/8\" && command printf \".\\n\" >&3 \
         && command read -r _sshmcp_x <&3 && [ \"$_sshmcp_x\" = . ]; then _sshmcp_j=1; fi; \
         trap - PIPE; exec 8<&-; if [ -n \"$_sshmcp_j\" ]; then _sshmcp_j=; \
         trap '' TSTP TTIN TTOU; bash --posix --norc -c 'command set -m 2>/dev/null || exit 1; \
         set +m; _sshmcp_t=1 _sshmcp_ss=jobs _sshmcp_rg=$PPID _sshmcp_w=$1 _sshmcp_k=--; \
         trap \"command echo ran >&3\" EXIT\n{{ {first}{JOB_SPAWN}{LOOP}{JOB_SPAWN}done; }}' bash \"$_sshmcp_w\"; \
         _sshmcp_s=$?; command printf \".\\n\" >&3; command read -r _sshmcp_x <&3; \
         if [ \"$_sshmcp_x\" != . ] || [ \"$_sshmcp_s\" -gt 128 ]; then exit \"$_sshmcp_s\"; fi; \
         trap - TSTP TTIN TTOU; fi; exec 3<&-; fi\n"
    )
}

/// bash's way to start the next program's shell: a background job (its own process group)
/// with the channel's stdin, waited for with job control off again (with it on, `wait` would
/// also return when the program is stopped). The report is read back through fd 3 up to a
/// line of the runner's own, so a shell that reported nothing leaves nothing to wait for.
/// No single quote: it travels in one.
const JOB_SPAWN: &str = "set -m; /bin/sh -s \"$_sshmcp_w\" 0<&0 5>&3 3>&- 6>&- 2>&7 7>&- & set +m; \
command wait \"$!\"; _sshmcp_s=$?\n\
command echo . >&3; command read -r _sshmcp_p <&3; \
if [ \"$_sshmcp_p\" = . ]; then _sshmcp_p=; else command read -r _sshmcp_x <&3; fi\n";

/// Files that shape a login environment (the startup files of bash, zsh, csh-likes, ksh and
/// fish, what they commonly source, and what sshd reads for each session); one ending in `/*`
/// stands for each file in that directory. A channel whose login shell read them before one
/// of them changed is stale. A file written in the same clock tick as the channel started
/// counts as changed: a needless new channel beats a missed change. A file given an older
/// time than its change (`cp -p`, `touch -r`) goes unseen: the shell compares times of last
/// modification only.
const LOGIN_FILES: &[&str] = &[
    // A startup file deleted, renamed over or added changes its directory.
    "$HOME",
    "/etc",
    "$HOME/.bashrc",
    "$HOME/.bashrc.d",
    "$HOME/.bashrc.d/*",
    "$HOME/.bash_aliases",
    "$HOME/.bash_profile",
    "$HOME/.bash_login",
    "$HOME/.profile",
    "${ZDOTDIR:-$HOME}/.zshenv",
    "${ZDOTDIR:-$HOME}/.zprofile",
    "${ZDOTDIR:-$HOME}/.zshrc",
    "${ZDOTDIR:-$HOME}/.zlogin",
    "$HOME/.cshrc",
    "$HOME/.tcshrc",
    "$HOME/.login",
    "$HOME/.kshrc",
    "$HOME/.mkshrc",
    "$HOME/.config/fish/config.fish",
    "$HOME/.config/fish/conf.d",
    "$HOME/.config/fish/conf.d/*",
    // What nvm's startup script reads for the default node (`nvm alias default`).
    "$HOME/.nvm/alias/default",
    "$HOME/.ssh/environment",
    "$HOME/.ssh/rc",
    "$HOME/.pam_environment",
    "/etc/environment",
    "/etc/default/locale",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/profile.d/*",
    "/etc/bash.bashrc",
    "/etc/bashrc",
    "/etc/zsh/zshenv",
    "/etc/zshenv",
    "/etc/csh.cshrc",
    "/etc/ssh/sshrc",
];

/// The text of a channel whose program waits for it to be ready (the kill channel, a
/// handle's program): its setup and loop, with a program's shell already waiting on stdin.
/// The runner prints `ready` on stdout once it has read its whole text (a group is read whole
/// before it runs): until then, a program written to stdin could be read by the runner along
/// with its text, and never reach the program's shell.
pub fn ready_text(ready: &str) -> String {
    let (spawn, said) = (spawn(), ready_line(ready));
    let hand_over = hand_over(&said);
    let setup = setup(ready);
    format!("{setup}{{ {hand_over}{said}{spawn}{LOOP}{spawn}done; }}\n")
}

/// What says a standby channel's runner has read its whole text: `ready` on stdout, from
/// whichever shell runs the loop. No single quote: bash gets it inside one.
fn ready_line(ready: &str) -> String {
    format!("command printf \"%s\\n\" {ready}; ")
}

/// The text of a channel opened for `payload`: its setup and loop, the first program
/// arriving in a here-document delimited by `feed_nonce` (everything on stdin is the
/// runner's until its loop runs). One `{ }` group, so a text cut short runs nothing.
pub fn fresh_text(payload: &[u8], feed_nonce: &str) -> Vec<u8> {
    let mut text = format!(
        "{}{{ _sshmcp_p=$($_sshmcp_ss /bin/sh -c '{}' /bin/sh \"$_sshmcp_w\" {PROGRAM_FDS} <<'{feed_nonce}'\n",
        setup(feed_nonce),
        super::framing::INNER_BOOTSTRAP
    )
    .into_bytes();
    text.extend_from_slice(payload);
    let tail = format!(
        "{feed_nonce}\n); _sshmcp_s=$?\n{LOOP}{}{}done; }}\n",
        hand_over(""),
        spawn()
    );
    text.extend_from_slice(tail.as_bytes());
    text
}

/// The check a program on a channel that waited runs first, up to the stale marker's nonce:
/// its shell inherited the channel's start date on fd 4; a login file not older than that
/// makes the channel stale.
static WARM_CHECK: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let files: String = LOGIN_FILES
        .iter()
        .map(|f| match f.strip_suffix("/*") {
            Some(dir) => format!(" \"{dir}\"/*"),
            None => format!(" \"{f}\""),
        })
        .collect();
    format!(
        "if [ -e /dev/fd/4 ]; then _sshmcp_t=/dev/fd/4; elif [ -e /proc/self/fd/4 ]; then \
         _sshmcp_t=/proc/self/fd/4; else _sshmcp_t=; fi; _sshmcp_x=${{_sshmcp_t:+fresh}}; \
         for _sshmcp_f in{files}; do if [ -z \"$_sshmcp_x\" ]; then break; fi; \
         if [ -e \"$_sshmcp_f\" ] && ! [ \"$_sshmcp_t\" -nt \"$_sshmcp_f\" ]; then \
         _sshmcp_x=; fi; done; if [ -z \"$_sshmcp_x\" ]; then command printf '%s stale\\n' "
    )
});

/// The text for a channel that waited: when `check_login_files`, the check of its login
/// files (when one changed, the stale marker on stdout, and nothing runs), then `payload` in a
/// here-document delimited by `feed_nonce`, sourced once whole. The shell reads it to the
/// here-document's end, so a syntax error ends it at once instead of leaving it waiting for
/// more on the channel's stdin, and nothing runs until the last line (which the `if` makes
/// one command) is whole.
pub fn warm_text(
    payload: &[u8],
    out_nonce: &str,
    feed_nonce: &str,
    check_login_files: bool,
) -> Vec<u8> {
    let mut text = Vec::new();
    if check_login_files {
        text.extend_from_slice(WARM_CHECK.as_bytes());
        text.extend_from_slice(out_nonce.as_bytes());
        text.extend_from_slice(b"; exit 0; fi; unset _sshmcp_t _sshmcp_x _sshmcp_f\n");
    }
    text.extend_from_slice(format!("exec 3<<'{feed_nonce}'\n").as_bytes());
    text.extend_from_slice(payload);
    let source = super::framing::SOURCE_FD3;
    text.extend_from_slice(format!("{feed_nonce}\nexec </dev/null; {source}\n").as_bytes());
    text
}

/// How one program's run left the channel, as its end marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// The program's group is empty and the channel waits for the next program.
    Idle,
    /// Processes of the program's group still run: the channel's shell has exited, and the
    /// channel stays theirs until they end or are killed.
    Left,
    /// The channel's shell has exited (it serves one program: no `setsid`, no start time,
    /// merged streams, or a program that must not share its channel).
    Last,
}

/// A program's end, from its end marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    /// The status of the program's shell (128 + n for a signal n).
    pub status: u32,
    pub after: After,
    /// The host's name for signal `status - 128`, when the status is above 128.
    pub signal: Option<String>,
}

/// Finds a marker line in a stream: passes the bytes before it, reads the line, and then
/// either drops what follows (an end marker: what the program's background children print
/// later, or the other stream's marker when a startup file merged them, is not part of the
/// answer) or passes it on (a line that only needs taking out, such as the exit report).
pub struct LineScan {
    finder: memchr::memmem::Finder<'static>,
    /// Whether bytes after the line still belong to the stream.
    keep_after: bool,
    /// Bytes held back: a possible start of the marker, or the marker line being read.
    pending: Vec<u8>,
    state: LineState,
}

enum LineState {
    Searching,
    InLine,
    /// What the line said after its nonce.
    Seen(String),
}

/// The longest marker line after its nonce.
const MAX_LINE_REST: usize = 64;

impl LineScan {
    /// A scan for a stream's end marker: nothing after it is the program's.
    pub fn end_marker(nonce: &str) -> Self {
        Self::new(nonce, false)
    }

    /// A scan that takes one line out of a stream and passes the rest.
    pub fn one_line(nonce: &str) -> Self {
        Self::new(nonce, true)
    }

    fn new(nonce: &str, keep_after: bool) -> Self {
        Self {
            finder: memchr::memmem::Finder::new(nonce.as_bytes()).into_owned(),
            keep_after,
            pending: Vec::new(),
            state: LineState::Searching,
        }
    }

    /// What the line said after its nonce, once it was read.
    pub fn rest(&self) -> Option<&str> {
        match &self.state {
            LineState::Seen(rest) => Some(rest),
            _ => None,
        }
    }

    /// The program's end, when this scans for an end marker that was read.
    pub fn end(&self) -> Option<End> {
        self.rest().map(parse_end)
    }

    /// Feeds stream bytes; returns those that belong to the program.
    pub fn feed<'a>(&mut self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        match self.state {
            LineState::Seen(_) if self.keep_after => return Cow::Borrowed(bytes),
            LineState::Seen(_) => return Cow::Borrowed(&[]),
            LineState::InLine => {
                self.pending.extend_from_slice(bytes);
                return self.read_line().into();
            }
            LineState::Searching => {}
        }
        let joined: Cow<'a, [u8]> = if self.pending.is_empty() {
            Cow::Borrowed(bytes)
        } else {
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(bytes);
            Cow::Owned(joined)
        };
        let nonce_len = self.finder.needle().len();
        let (own_len, after) = match self.finder.find(&joined) {
            Some(at) => {
                self.pending = joined[at + nonce_len..].to_vec();
                self.state = LineState::InLine;
                (at, self.read_line())
            }
            None => {
                let keep = possible_start(&joined, self.finder.needle());
                self.pending = joined[joined.len() - keep..].to_vec();
                (joined.len() - keep, Vec::new())
            }
        };
        match joined {
            Cow::Borrowed(b) if after.is_empty() => Cow::Borrowed(&b[..own_len]),
            joined => {
                let mut own = joined.into_owned();
                own.truncate(own_len);
                own.extend(after);
                Cow::Owned(own)
            }
        }
    }

    /// Reads the marker line once it is whole; returns what followed it that belongs to the
    /// stream.
    fn read_line(&mut self) -> Vec<u8> {
        let line_end = match self.pending.iter().position(|b| *b == b'\n') {
            Some(newline) => newline,
            None if self.pending.len() > MAX_LINE_REST => self.pending.len(),
            None => return Vec::new(),
        };
        let rest = String::from_utf8_lossy(&self.pending[..line_end])
            .trim()
            .to_string();
        self.state = LineState::Seen(rest);
        let after = self
            .pending
            .split_off((line_end + 1).min(self.pending.len()));
        self.pending = Vec::new();
        if self.keep_after { after } else { Vec::new() }
    }

    /// What is still held back, for an answer given before the stream ended: all of it is
    /// the program's when no marker is being read.
    pub fn take_held(&mut self) -> Vec<u8> {
        match self.state {
            LineState::Searching => std::mem::take(&mut self.pending),
            _ => Vec::new(),
        }
    }
}

/// How many bytes at the end of `bytes` could start `needle`.
fn possible_start(bytes: &[u8], needle: &[u8]) -> usize {
    (1..needle.len().min(bytes.len() + 1))
        .rev()
        .find(|&k| bytes.ends_with(&needle[..k]))
        .unwrap_or(0)
}

/// Reads `<status> <idle|left|last> <signal name or ->`; anything else is a channel that
/// serves no more.
fn parse_end(rest: &str) -> End {
    let mut words = rest.split_whitespace();
    let status = words.next().and_then(|w| w.parse().ok()).unwrap_or(255);
    let after = match words.next() {
        Some("idle") => After::Idle,
        Some("left") => After::Left,
        _ => After::Last,
    };
    let signal = words
        .next()
        .filter(|w| *w != "-" && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+'))
        .map(str::to_string);
    End {
        status,
        after,
        signal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: &str = "_sshmcp_end0123";

    fn feed_all(scan: &mut LineScan, chunks: &[&[u8]]) -> Vec<u8> {
        chunks
            .iter()
            .flat_map(|c| scan.feed(c).into_owned())
            .collect()
    }

    #[test]
    fn the_marker_ends_the_program_output_even_split_across_reads() {
        let mut scan = LineScan::end_marker(NONCE);
        let own = feed_all(
            &mut scan,
            &[
                b"no newline at the end _sshm",
                b"cp_end01",
                b"23 7 id",
                b"le\nlater",
            ],
        );
        assert_eq!(own, b"no newline at the end ");
        assert_eq!(
            scan.end(),
            Some(End {
                status: 7,
                after: After::Idle,
                signal: None
            })
        );
    }

    #[test]
    fn a_near_miss_is_output_and_nothing_is_held_for_ever() {
        let mut scan = LineScan::end_marker(NONCE);
        let own = feed_all(&mut scan, &[b"_sshmcp_end012", b"x and _ssh"]);
        assert_eq!(own, b"_sshmcp_end012x and ");
        assert_eq!(scan.take_held(), b"_ssh");
        assert_eq!(scan.end(), None);
    }

    #[test]
    fn nothing_after_the_marker_is_output() {
        let mut scan = LineScan::end_marker(NONCE);
        let own = feed_all(&mut scan, &[b"a_sshmcp_end0123 0 left\nb", b"c"]);
        assert_eq!(own, b"a");
        assert_eq!(scan.end().unwrap().after, After::Left);
        let mut scan = LineScan::end_marker(NONCE);
        assert_eq!(feed_all(&mut scan, &[b"x_sshmcp_end0123 1 garbage"]), b"x");
        assert_eq!(scan.end(), None, "the line is not whole yet");
        assert_eq!(feed_all(&mut scan, &[b"\ny"]), b"");
        assert_eq!(scan.end().unwrap().after, After::Last);
    }

    #[test]
    fn a_one_line_scan_takes_out_its_line_and_passes_the_rest() {
        let mut scan = LineScan::one_line(NONCE);
        let own = feed_all(&mut scan, &[b"err_sshmcp_end0", b"123 3\nafter", b" more"]);
        assert_eq!(own, b"errafter more");
        assert_eq!(scan.rest(), Some("3"));
    }

    #[test]
    fn an_end_names_its_signal_only_when_the_host_did() {
        assert_eq!(parse_end("138 idle USR1").signal.as_deref(), Some("USR1"));
        assert_eq!(parse_end("138 idle -").signal, None);
        assert_eq!(parse_end("0 idle").signal, None);
        assert_eq!(
            parse_end("130 idle two words").signal.as_deref(),
            Some("two")
        );
        assert_eq!(parse_end("130 idle $(x)").signal, None);
    }

    /// bash gets its loop inside single quotes: no part of it may hold one.
    #[test]
    fn the_loop_bash_runs_holds_no_single_quote() {
        let ready = crate::random::nonce("_sshmcp_").unwrap();
        let first = ready_line(&ready);
        for part in [LOOP, JOB_SPAWN, first.as_str()] {
            assert!(!part.contains('\''), "{part}");
        }
        let text = ready_text(&ready);
        let quoted = text.split("bash --posix --norc -c '").nth(1).unwrap();
        let (loop_text, _) = quoted.split_once('\'').unwrap();
        assert!(loop_text.ends_with("done; }"), "{loop_text}");
    }

    #[test]
    fn the_possible_start_is_the_longest_nonce_prefix_at_the_end() {
        assert_eq!(possible_start(b"abc_ss", b"_sshmcp"), 3);
        assert_eq!(possible_start(b"abc", b"_sshmcp"), 0);
        assert_eq!(possible_start(b"_", b"_sshmcp"), 1);
        assert_eq!(possible_start(b"", b"_sshmcp"), 0);
    }
}
