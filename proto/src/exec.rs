//! Wire types of `exec`: the request, and each captured stream with its bounds.

use serde::{Deserialize, Serialize};

use crate::session::SessionAuth;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecRequest {
    pub auth: SessionAuth,
    pub command: String,
    pub cwd: Option<String>,
    /// Seconds; the contract's default when absent.
    pub timeout: Option<f64>,
    pub spool_output: bool,
    /// The caller's local root (absolute), when its person configured one.
    pub local_root: Option<String>,
    pub handoff: Handoff,
}
crate::session::authed!(ExecRequest);

/// What `exec` and `sudo_exec` take beyond the command: when to hand a slow command over to a
/// command handle, and the key a caller follows its progress by.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Handoff {
    /// Seconds (1..=86400) after which a command still running becomes a command handle.
    pub after: Option<f64>,
    /// A caller-chosen key for `progress` while the call runs.
    pub progress_key: Option<String>,
}

/// `sudo_exec`: a command run by root through `sudo -n -k /bin/bash --noprofile --norc -s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SudoExecRequest {
    pub auth: SessionAuth,
    pub command: String,
    pub cwd: Option<String>,
    /// Seconds; the contract's default when absent.
    pub timeout: Option<f64>,
    /// The caller's local root (absolute), when its person configured one: a handed-off
    /// command's output is kept there.
    pub local_root: Option<String>,
    pub handoff: Handoff,
}
crate::session::authed!(SudoExecRequest);

/// `exec` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    pub session_id: String,
    pub session_key: String,
    /// Shell text for /bin/sh, at most 1 MiB; a syntax error anywhere runs nothing.
    pub command: String,
    /// Remote working directory; default: home.
    pub cwd: Option<String>,
    /// Seconds until the process group is killed (also after a hand-off); default 60, none
    /// with `handoff_after`.
    #[schemars(range(min = 0.1, max = 86400.0))]
    pub timeout: Option<f64>,
    /// Also save whole streams as files in the local root (`spool_path`); no tool deletes them.
    pub spool_output: Option<bool>,
    /// Seconds (e.g. 30, under your client's call limit) until a running command is handed
    /// off; none if `timeout` <= it.
    #[schemars(range(min = 1.0, max = 86400.0))]
    pub handoff_after: Option<f64>,
}

/// A call asked for its progress tells the client the output so far, each second.
#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::Exec {
    type Args = ExecArgs;
    const TITLE: &'static str = "Run a shell command";
    const DESCRIPTION: &'static str = "Run one /bin/sh command as the login user and wait (no \
        TTY, empty stdin; root: sudo_exec). Maybe slow? Pass `handoff_after`: still running \
        then, it answers `handed_off: true` (`exit_code` null: no exit yet), `handle_id`, output \
        so far, each stream's `next_offset`: go on with command_status. `exit_code` is null if \
        a signal ended the shell (`signal` names it; `timed_out: true` after `timeout`). \
        `stdout`, `stderr`: a string, or if cut, not UTF-8 or spooled, an object: `data` (head \
        and tail if cut), `encoding`, `total_bytes`, `truncated` (over the 64 KiB cap; all of \
        it: `spool_output`, if a rerun is safe), `omitted` (`start`, `end` of bytes left out), \
        `spool_path`. Timeout or cancel kills the whole process group, background jobs too (to \
        keep one: task_launch). Errors: `remote_path_not_found` (no such `cwd`), \
        `invalid_command` (too long or NUL: upload_start a script, run it), \
        `invalid_local_path` (local root unusable: tell the user).";
    const HINTS: crate::described::Hints = crate::described::Hints::MAY_DESTROY;
    const DEADLINE: std::time::Duration = EXEC_DEADLINE_MARGIN;

    fn deadline(args: &ExecArgs) -> std::time::Duration {
        command_deadline(args.timeout, args.handoff_after)
    }

    fn progress(req: &ExecRequest) -> Option<crate::described::Followed> {
        followed(&req.auth, &req.handoff)
    }

    fn shape(answer: &mut serde_json::Map<String, serde_json::Value>) {
        shape_exec_answer(answer, true);
    }

    fn request(
        args: ExecArgs,
        here: &crate::described::Here,
    ) -> Result<ExecRequest, crate::DaemonError> {
        Ok(ExecRequest {
            handoff: handoff(args.handoff_after, here)?,
            auth: crate::described::auth(args.session_id, args.session_key),
            command: args.command,
            cwd: args.cwd,
            timeout: args.timeout,
            spool_output: args.spool_output.unwrap_or(false),
            local_root: here.local_root.clone(),
        })
    }
}

/// `sudo_exec` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SudoExecArgs {
    pub session_id: String,
    pub session_key: String,
    /// Shell text for root's bash, at most 1 MiB.
    pub command: String,
    /// As in exec; entered before sudo.
    pub cwd: Option<String>,
    /// As in exec.
    #[schemars(range(min = 0.1, max = 86400.0))]
    pub timeout: Option<f64>,
    /// As in exec.
    #[schemars(range(min = 1.0, max = 86400.0))]
    pub handoff_after: Option<f64>,
}

/// As exec's, without `spool_output`.
#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::SudoExec {
    type Args = SudoExecArgs;
    const TITLE: &'static str = "Run a command as root";
    const DESCRIPTION: &'static str = "Run one command as root in bash via `sudo -n` (no login \
        shell: sudoers sets `PATH`, `HOME`), only where the host's sudoers needs no password \
        (none is ever sent). Answer, `timeout`, hand-off and kills as exec; no `spool_output` (big output: redirect to a file). No root needed: exec. Errors: `sudo_password_required` \
        (ask the user for a NOPASSWD rule; never pipe a password in), `sudo_not_allowed` \
        (no root bash; if exec `sudo -n -l` lists your command, exec `sudo -n` it), \
        `sudo_unavailable` (no \
        sudo), `host_tool_missing` (no /bin/bash: tell the user); others as exec.";
    const HINTS: crate::described::Hints = crate::described::Hints::MAY_DESTROY;
    const DEADLINE: std::time::Duration = EXEC_DEADLINE_MARGIN;
    const NOT_IN_PARTS: &'static [(&'static str, &'static [&'static str])] =
        &[("StreamOutput", SPOOL_FIELDS)];

    fn deadline(args: &SudoExecArgs) -> std::time::Duration {
        command_deadline(args.timeout, args.handoff_after)
    }

    fn progress(req: &SudoExecRequest) -> Option<crate::described::Followed> {
        followed(&req.auth, &req.handoff)
    }

    fn shape(answer: &mut serde_json::Map<String, serde_json::Value>) {
        shape_exec_answer(answer, false);
    }

    fn request(
        args: SudoExecArgs,
        here: &crate::described::Here,
    ) -> Result<SudoExecRequest, crate::DaemonError> {
        Ok(SudoExecRequest {
            handoff: handoff(args.handoff_after, here)?,
            auth: crate::described::auth(args.session_id, args.session_key),
            command: args.command,
            cwd: args.cwd,
            timeout: args.timeout,
            local_root: here.local_root.clone(),
        })
    }
}

/// How long a client waits for `exec` beyond the command's own timeout: queuing for a channel
/// and terminating the remote process group both happen inside the daemon after the timeout.
pub const EXEC_DEADLINE_MARGIN: std::time::Duration = std::time::Duration::from_secs(30);

/// An exec-like call's deadline: the command's own timeout (or its hand-off, when sooner)
/// plus room for queuing and the kill.
#[cfg(feature = "schema")]
fn command_deadline(timeout: Option<f64>, handoff_after: Option<f64>) -> std::time::Duration {
    let secs = match (timeout, handoff_after) {
        (Some(t), Some(h)) => t.min(h),
        (None, Some(h)) => h,
        (t, None) => t.unwrap_or(crate::limits::DEFAULT_TIMEOUT_SECS),
    };
    let command = std::time::Duration::try_from_secs_f64(secs).unwrap_or_default();
    command + EXEC_DEADLINE_MARGIN
}

/// An exec-like call's hand-off as asked, filed under the shim's progress key when the
/// client follows it.
#[cfg(feature = "schema")]
fn handoff(
    after: Option<f64>,
    here: &crate::described::Here,
) -> Result<Handoff, crate::DaemonError> {
    // A handed-off command is read with command_status: without it (`--tools`), its result
    // could never be read.
    if after.is_some() && !here.exposes(crate::tool::Tool::CommandStatus) {
        return Err(crate::DaemonError::invalid_arguments(
            "handoff_after needs command_status, which this server does not expose \
             (--tools); leave it out, or use a timeout",
        ));
    }
    Ok(Handoff {
        after,
        progress_key: here.progress_key.clone(),
    })
}

/// The run an exec-like call follows: the one its request files under its progress key.
#[cfg(feature = "schema")]
fn followed(auth: &SessionAuth, handoff: &Handoff) -> Option<crate::described::Followed> {
    Some(crate::described::Followed::Run {
        auth: auth.clone(),
        key: handoff.progress_key.clone()?,
    })
}

/// A stream's fields about `spool_output`, which sudo_exec does not take.
#[cfg(feature = "schema")]
const SPOOL_FIELDS: &[&str] = &["spool_path", "spool_truncated"];

/// An exec-like answer: the fields of a hand-off only when there was one, the spool's only
/// when the tool `spools`.
#[cfg(feature = "schema")]
fn shape_exec_answer(answer: &mut serde_json::Map<String, serde_json::Value>, spools: bool) {
    let handed_off = answer.get("handed_off").is_some_and(|h| !h.is_null());
    if !handed_off {
        for key in ["handed_off", "handle_id", "pid"] {
            answer.remove(key);
        }
    }
    for stream in ["stdout", "stderr"] {
        if let Some(stream) = answer.get_mut(stream).and_then(|s| s.as_object_mut()) {
            if !handed_off {
                stream.remove("next_offset");
            }
            if !spools {
                stream.retain(|name, _| !SPOOL_FIELDS.contains(&name.as_str()));
            }
        }
    }
}

// How a string carries bytes: `utf-8` (the string is the text itself) or `base64` (the bytes
// are not valid UTF-8). Not a doc comment: schemars would give it as the description of each
// `*_encoding` input field, which the instructions describe once for all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Encoding {
    #[serde(rename = "utf-8")]
    Utf8,
    #[serde(rename = "base64")]
    Base64,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Utf8 => "utf-8",
            Self::Base64 => "base64",
        }
    }
}

/// A half-open byte range `[start, end)` of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ByteRange {
    /// Offset of the first byte left out.
    pub start: u64,
    /// Offset one past the last byte left out.
    pub end: u64,
}

/// One output stream of a command, bounded: long output keeps its head and its tail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StreamOutput {
    /// The kept output: all of it, or its head followed by its tail when truncated.
    pub data: String,
    /// `utf-8`, or `base64` when the output holds bytes that are not UTF-8.
    pub encoding: Encoding,
    /// Bytes kept in `data` (before any base64).
    pub captured_bytes: u64,
    /// Bytes the command wrote to this stream in all.
    pub total_bytes: u64,
    /// True when bytes were left out between head and tail (see `omitted`).
    pub truncated: bool,
    /// The byte range `data` does not hold: between head and tail when truncated; after a
    /// hand-off, what was written beyond `next_offset`.
    pub omitted: Option<ByteRange>,
    /// Absolute local path of the complete stream, when `spool_output` was asked for.
    pub spool_path: Option<String>,
    /// True when the spool file stopped at the daemon's `max-spool-bytes` (1 GiB by
    /// default): it holds the stream's first bytes only.
    pub spool_truncated: bool,
    /// Only after a hand-off: `data` holds this stream from byte 0 up to here; pass it to
    /// `command_status` as the stream's offset.
    // Left out of JSON answers when absent (the shim drops them); bincode keeps every field.
    #[cfg_attr(feature = "schema", schemars(skip_serializing_if = "Option::is_none"))]
    pub next_offset: Option<u64>,
}

/// What a finished command left: its status and both streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ExecResult {
    /// Exit status of the command's shell; null when a signal ended that shell, the
    /// command timed out, or it was handed off (still running). A program the shell ran that a signal ended shows as 128 + n here
    /// (the shell's own status), with `signal` null.
    pub exit_code: Option<i32>,
    /// The signal that ended the command's shell (`TERM` or `KILL` from a timeout or
    /// cancellation; otherwise the host's name, such as `SEGV` or `USR1`, or `unknown`),
    /// else null.
    pub signal: Option<String>,
    /// Seconds from the call's start to its answer.
    pub duration: f64,
    /// True when the timeout ended the command (its whole process group was terminated).
    pub timed_out: bool,
    /// The command's standard output as kept.
    pub stdout: StreamOutput,
    /// The command's standard error as kept.
    pub stderr: StreamOutput,
    /// `true` when the command outlived `handoff_after` and became a command handle: it runs
    /// on, `exit_code` is null, and `command_status` follows it. Absent otherwise (never
    /// false).
    // Left out of JSON answers when absent (the shim drops them); bincode keeps every field.
    #[cfg_attr(feature = "schema", schemars(skip_serializing_if = "Option::is_none"))]
    pub handed_off: Option<bool>,
    /// Only after a hand-off: the command handle, for command_status and command_kill.
    // Left out of JSON answers when absent (the shim drops them); bincode keeps every field.
    #[cfg_attr(feature = "schema", schemars(skip_serializing_if = "Option::is_none"))]
    pub handle_id: Option<String>,
    /// Only after a hand-off: the remote process group of the command (its shell's PID);
    /// null until the shell reported it. Stop it with command_kill, not task_kill.
    // Left out of JSON answers when absent (the shim drops them); bincode keeps every field.
    #[cfg_attr(feature = "schema", schemars(skip_serializing_if = "Option::is_none"))]
    pub pid: Option<u32>,
    /// `person` when the person's kill ended the command (`sshmcp kill`); else null.
    pub stopped_by: Option<String>,
}

/// Bytes as the contract presents them: UTF-8 text when valid, base64 otherwise.
pub fn encode_bytes(bytes: Vec<u8>) -> (String, Encoding) {
    use base64::Engine as _;
    match String::from_utf8(bytes) {
        Ok(text) => (text, Encoding::Utf8),
        Err(e) => (
            base64::engine::general_purpose::STANDARD.encode(e.as_bytes()),
            Encoding::Base64,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_stays_text_and_binary_becomes_base64() {
        assert_eq!(
            encode_bytes(b"h\xc3\xa9".to_vec()),
            ("hé".into(), Encoding::Utf8)
        );
        assert_eq!(
            encode_bytes(vec![0xff, 0x00]),
            ("/wA=".into(), Encoding::Base64)
        );
    }
}
