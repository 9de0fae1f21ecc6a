//! The `exec` tool's operation (and `sudo_exec`'s ground, see `tools/sudo_exec.rs`): the
//! caller's text as a program on the session's host, under the request's limits, with
//! complete copies of its streams when asked for, handed off to a command handle when it runs
//! long (see `handoff`).

pub mod handoff;

use sshmcp_proto::DaemonError;
use sshmcp_proto::exec::{ByteRange, ExecRequest, ExecResult, StreamOutput, encode_bytes};

use crate::audit::{Answer, Exit};
use crate::config::Settings;
use crate::remote::{Output, Program, RunError, RunResult};
use crate::session::Session;

/// Checks the request before any session is looked at.
pub fn check(req: &ExecRequest) -> Result<std::time::Duration, DaemonError> {
    crate::request::check_command(&req.command)?;
    crate::request::check_cwd(req.cwd.as_deref())?;
    crate::request::check_handoff(&req.handoff)?;
    crate::request::check_limit(req.timeout, req.handoff.after.is_some())
}

/// A run's result as `exec` and `sudo_exec` answer it: each stream as text, or as base64 where
/// its bytes are not UTF-8. The wire form is made here, at the tools' edge, never below.
pub fn answer(result: RunResult) -> ExecResult {
    ExecResult {
        exit_code: result.exit_code,
        signal: result.signal,
        duration: result.duration,
        timed_out: result.timed_out,
        stdout: stream(result.stdout),
        stderr: stream(result.stderr),
        handed_off: None,
        handle_id: None,
        pid: None,
        stopped_by: None,
    }
}

fn stream(output: Output) -> StreamOutput {
    let captured_bytes = output.bytes.len() as u64;
    let (data, encoding) = encode_bytes(output.bytes);
    StreamOutput {
        data,
        encoding,
        captured_bytes,
        total_bytes: output.total_bytes,
        truncated: output.omitted.is_some(),
        omitted: output.omitted.map(|range| ByteRange {
            start: range.start,
            end: range.end,
        }),
        spool_truncated: output.spooled.as_ref().is_some_and(|s| s.truncated),
        spool_path: output.spooled.map(|s| s.path),
        next_offset: None,
    }
}

/// How an `exec` or `sudo_exec` run that failed answers: a command its master's death cut
/// says what it printed until then, beside the fact that it had started.
pub(crate) fn failure(e: RunError) -> DaemonError {
    match e {
        RunError::LostAfterStart(printed) => {
            let (stdout, stderr) = *printed;
            let mut lost = crate::remote::lost_after_start();
            lost.details.stdout = Some(stream(stdout));
            lost.details.stderr = Some(stream(stderr));
            lost
        }
        e => e.into(),
    }
}

/// Runs the command and answers with its streams and exit status.
pub async fn exec(
    session: &Session,
    settings: &Settings,
    req: ExecRequest,
) -> Result<ExecResult, DaemonError> {
    let timeout = check(&req)?;
    let mut program = Program::new(req.command.clone(), timeout, settings.max_output_bytes);
    program.command = true;
    program.cwd = req.cwd;
    let caller = handoff::Caller {
        tool: "exec",
        command: &req.command,
    };
    handoff::run(
        session,
        settings,
        caller,
        program,
        req.handoff,
        req.local_root,
        req.spool_output,
    )
    .await
    .map_err(failure)
}

/// A command's answer gives its trail line the exit status, and whether its timeout ended it
/// (exec's and sudo_exec's).
impl Answer for ExecResult {
    fn exit(&self) -> Exit {
        Exit {
            code: self.exit_code,
            signal: self.signal.clone(),
            timed_out: self.timed_out,
            said: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use sshmcp_proto::ErrorCode;
    use sshmcp_proto::exec::Encoding;

    use super::*;
    use crate::remote::spool::Spooled;

    fn output(bytes: &[u8], total_bytes: u64, omitted: Option<std::ops::Range<u64>>) -> Output {
        Output {
            bytes: bytes.to_vec(),
            total_bytes,
            omitted,
            spooled: None,
        }
    }

    /// A stream is its text when UTF-8, else base64; what was kept, what was left out and
    /// where the whole copy lies are said as the run kept them; a hand-off's fields are none.
    #[test]
    fn a_run_answers_with_each_stream_as_kept() {
        let mut stderr = output(b"\xff\x00", 2, None);
        stderr.spooled = Some(Spooled {
            path: "/root/.sshmcp/spool/e".into(),
            truncated: true,
        });
        let result = RunResult {
            exit_code: Some(3),
            signal: None,
            duration: 0.5,
            timed_out: false,
            stdout: output("héad tail".as_bytes(), 100, Some(5..95)),
            stderr,
        };
        let answer = answer(result);
        assert_eq!((answer.exit_code, answer.handed_off), (Some(3), None));
        let out = &answer.stdout;
        assert_eq!(
            (out.data.as_str(), out.encoding),
            ("héad tail", Encoding::Utf8)
        );
        assert_eq!(
            (out.captured_bytes, out.total_bytes, out.truncated),
            (10, 100, true)
        );
        assert_eq!(out.omitted.map(|r| (r.start, r.end)), Some((5, 95)));
        assert_eq!(out.spool_path, None);
        let err = &answer.stderr;
        assert_eq!(
            (err.data.as_str(), err.encoding),
            ("/wA=", Encoding::Base64)
        );
        assert!(!err.truncated && err.omitted.is_none());
        assert_eq!(err.spool_path.as_deref(), Some("/root/.sshmcp/spool/e"));
        assert!(err.spool_truncated);
    }

    /// A command its master's death cut answers with what it printed until then beside the
    /// fact that it had started; any other failure is its code alone.
    #[test]
    fn a_run_cut_after_its_start_keeps_what_it_printed() {
        let printed = Box::new((output(b"so far\n", 7, None), output(b"", 0, None)));
        let lost = failure(RunError::LostAfterStart(printed));
        assert_eq!(lost.code, ErrorCode::ConnectionLost);
        assert_eq!(lost.details.started, Some(true));
        assert_eq!(lost.details.stdout.as_ref().unwrap().data, "so far\n");
        assert_eq!(lost.details.stderr.as_ref().unwrap().total_bytes, 0);
        let gone = failure(RunError::NoCwd);
        assert_eq!(gone.code, ErrorCode::RemotePathNotFound);
        assert!(gone.details.stdout.is_none());
    }
}
