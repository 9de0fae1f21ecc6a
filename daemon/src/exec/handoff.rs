//! What `exec` and `sudo_exec` share around the run: a progress key to follow it by, complete
//! copies of its streams (`spool_output`), and `handoff_after`: a command still running after
//! that many seconds becomes a command handle, neither restarted nor missing a byte, since its
//! output went to the handle's files from the start. With `spool_output` those files are the
//! spool: they stay after the handle.

use std::sync::Arc;
use std::time::Instant;

use sshmcp_proto::exec::{ExecResult, Handoff};

use crate::commands::under_way::Shown;
use crate::commands::{Handle, Prepared};
use crate::config::Settings;
use crate::remote::observer::{Observer, STDERR, STDOUT};
use crate::remote::{self, Program, RunError, spool};
use crate::session::Session;

/// Runs `program` for an `exec`-like call. `given_root` is the caller's local root, for the
/// files of `spool_output` and of a hand-off.
/// Which call runs a command, and the command as the agent gave it (a sudo_exec's program is
/// its wrapper), for `sshmcp watch`.
pub struct Caller<'a> {
    pub tool: &'static str,
    pub command: &'a str,
}

pub async fn run(
    session: &Session,
    settings: &Settings,
    caller: Caller<'_>,
    mut program: Program,
    handoff: Handoff,
    given_root: Option<String>,
    spool_output: bool,
) -> Result<ExecResult, RunError> {
    // The observer keeps each stream's last bytes: no file holds this output unless it is
    // handed off, and the person may read it (`sshmcp output`).
    let observer = program
        .observer
        .get_or_insert_with(|| Arc::new(Observer::keeping_tails()))
        .clone();
    // Shown under way (`sshmcp watch`) until this call answers or hands the command off.
    let shown = crate::commands::Commands::of(session)
        .under_way
        .begin(
            caller.tool,
            caller.command,
            observer.clone(),
            program.kill_as_root,
        )
        .map_err(|e| RunError::Failed(e.message))?;
    let _following = handoff
        .progress_key
        .clone()
        .map(|key| crate::commands::Commands::of(session).follow(key, observer));
    let run = run_shown(
        session,
        settings,
        &shown,
        program,
        handoff,
        given_root,
        spool_output,
    );
    // The person's stop before a process group was known drops the run: its channel's relay
    // ends whatever started.
    let mut result = tokio::select! {
        result = run => result,
        () = shown.cancelled() => Err(RunError::StoppedByPerson),
    };
    // A command the person's kill ended says so, whatever its status (it may catch the
    // signal and exit 0): the agent must not run it again unasked.
    if let Ok(answer) = result.as_mut()
        && answer.handed_off.is_none()
        && shown.stopped_by_person()
    {
        answer.stopped_by = Some(sshmcp_proto::service::STOPPED_BY_PERSON.into());
    }
    shown.finish(&result);
    result
}

/// [`run`], for the call `shown` under way.
async fn run_shown(
    session: &Session,
    settings: &Settings,
    shown: &Shown,
    mut program: Program,
    handoff: Handoff,
    given_root: Option<String>,
    spool_output: bool,
) -> Result<ExecResult, RunError> {
    let local_files = |e: sshmcp_proto::DaemonError| RunError::LocalFiles(e.message);
    // A timeout at or below `handoff_after` ends the command first: no hand-off (the timer
    // would otherwise race the kill, which may outlast it).
    let hands_off = |after: &f64| program.timeout > std::time::Duration::from_secs_f64(*after);
    let Some(after) = handoff.after.filter(hands_off) else {
        if spool_output {
            let root = crate::request::local_root(given_root, settings).map_err(local_files)?;
            let spools =
                spool::create_pair(&root, &session.id, settings.max_spool_bytes).map_err(|e| {
                    RunError::LocalFiles(format!(
                        "cannot create spool files under the local root: {e}"
                    ))
                })?;
            if let Some(dir) = spools.0.path().parent() {
                crate::commands::Commands::of(session).spooling_in(dir);
            }
            program.spool = Some(spools);
        }
        return remote::run(&session.host, program).await.map(super::answer);
    };
    let root = crate::request::local_root(given_root, settings).map_err(local_files)?;
    let mut prepared =
        Prepared::attach(&mut program, &root, session, settings).map_err(local_files)?;
    // Until an answer or a handle names the files, the record does: a daemon killed before
    // the hand-off (minutes, maybe) leaves the next one what to remove. Every other end
    // removes them with `prepared`: they are kept (`spool_output`) only once named.
    let unnamed = crate::commands::Commands::of(session)
        .unnamed(prepared.output_paths())
        .await;
    program.queue_timeout = Some(crate::request::HANDLE_QUEUE_LIMIT);
    program.ready_first = true;
    let as_root = program.kill_as_root;
    let mut seen = prepared.observer().subscribe();
    let started = Instant::now();
    let mut running = remote::start(&session.host, program);
    // Only a command that started is handed off: one still queued for a channel, or whose
    // login shell is slow, is not running yet (it starts within `HANDLE_QUEUE_LIMIT` or not
    // at all), and a failure to start (a missing cwd, sudo's refusal) is this call's error.
    // A result that is there wins over the timer.
    let handoff_due = async {
        tokio::time::sleep(std::time::Duration::from_secs_f64(after)).await;
        let _ = seen.wait_for(|s| s.started).await;
        // A closing session takes no new handle (its record is no longer written): its run,
        // being killed, answers instead.
        if session.host.closing.is_cancelled() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        biased;
        mut result = running.result() => {
            // What it printed, with the files that hold it: in the answer, or in the error
            // of a command its master's death cut.
            let printed = match &mut result {
                Ok(run) => Some((&mut run.stdout, &mut run.stderr)),
                Err(RunError::LostAfterStart(printed)) => Some((&mut printed.0, &mut printed.1)),
                Err(_) => None,
            };
            // The answer names the files (`spool_output`) once the record no longer names them
            // as unnamed: a call dropped while it waits answers nothing, and its files go. A
            // session closing meanwhile writes no more records (and its disconnect drops its
            // runs' output): its files go too.
            let named = spool_output
                && printed.is_some()
                && {
                    unnamed.named().await;
                    !session.host.closing.is_cancelled()
                };
            match printed {
                Some(_) if named => prepared.keep_files(),
                // No spool the caller asked for, or kept: they go with `prepared`.
                Some((stdout, stderr)) => {
                    stdout.spooled = None;
                    stderr.spooled = None;
                }
                None => {}
            }
            Ok(super::answer(result?))
        }
        _ = handoff_due => {
            if spool_output {
                prepared.keep_files();
            }
            let handle = prepared
                .into_handle(session, shown.id().to_string(), shown.preview().to_string(), running.detach(), as_root)
                .map_err(|e| RunError::Failed(e.message))?;
            shown.handed_off();
            // As command_start's: the handle the answer names survives a crash right after.
            unnamed.named().await;
            handed_off(&handle, started, settings.max_output_bytes)
        }
    }
}

/// The answer of a handed-off command: the output so far (up to the output cap per stream)
/// and where `command_status` goes on.
fn handed_off(
    handle: &Arc<Handle>,
    started: Instant,
    max_bytes: u64,
) -> Result<ExecResult, RunError> {
    let so_far = |stream| {
        handle
            .so_far(stream, max_bytes)
            .map_err(|e| RunError::Failed(e.message))
    };
    Ok(ExecResult {
        exit_code: None,
        signal: None,
        duration: started.elapsed().as_secs_f64(),
        timed_out: false,
        stdout: so_far(STDOUT)?,
        stderr: so_far(STDERR)?,
        handed_off: Some(true),
        handle_id: Some(handle.id.clone()),
        pid: handle.pid(),
        stopped_by: None,
    })
}
