//! `command_kill`, exactly the seed's `ssh_cmd_kill`: a live check of the command's process
//! group before any signal, the signal to the whole group, SIGKILL after `wait_seconds` when
//! forced, and one of six results. One small remote program does all of it, so the check and
//! the signal are a few milliseconds apart on the host itself.

use std::time::Duration;

use sshmcp_proto::DaemonError;
use sshmcp_proto::command::{CommandKillRequest, CommandKilled, KillResult, MAX_KILL_WAIT_SECS};
use sshmcp_proto::time::now_rfc3339;

use crate::remote::kill::{GROUP_ALIVE, GROUP_OPTION, KILL_BUDGET, control_program};
use crate::remote::{self, Host};
use crate::session::Session;

/// The kill of group `$g`: a live check, `$_signal` to the group, `$_wait` seconds for it
/// to go, then (with `$_force`) SIGKILL and `$_after` seconds more.
const KILL: &str = include_str!("kill.sh");

/// How long the group may take to go after the SIGKILL fallback.
const AFTER_SIGKILL_SECS: u32 = 2;

/// What a kill asks for, checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KillOrder {
    pub signal: i32,
    pub force: bool,
    pub wait: f64,
}

impl KillOrder {
    /// The order in a request's fields: signal 1..=64 (15 when absent), wait 0..=60 s (1 when
    /// absent).
    pub fn check(
        signal: Option<i32>,
        force: Option<bool>,
        wait: Option<f64>,
    ) -> Result<Self, DaemonError> {
        let signal = signal.unwrap_or(15);
        if !(1..=64).contains(&signal) {
            return Err(DaemonError::invalid_arguments(
                "signal must be a signal number between 1 and 64 (15 is TERM, 9 is KILL)",
            ));
        }
        let wait = wait.unwrap_or(1.0);
        if !wait.is_finite() || !(0.0..=MAX_KILL_WAIT_SECS).contains(&wait) {
            return Err(DaemonError::invalid_arguments(format!(
                "wait_seconds must be between 0 and {MAX_KILL_WAIT_SECS}"
            )));
        }
        Ok(Self {
            signal,
            force: force.unwrap_or(false),
            wait,
        })
    }

    /// The remote program for group `pgid`, or with `look_only` one that only tells whether
    /// the group is empty (`not_running`) and signals nothing (`unconfirmed`); it prints one
    /// word (and `force` when the SIGKILL
    /// fallback was attempted). Waits are measured by a `sleep`, not by turns of the group
    /// check, which on a busy host takes a good part of a second.
    pub fn script(&self, pgid: u32, look_only: bool) -> String {
        format!(
            "g={pgid}\n_signal={}\n_wait={}\n_force={}\n_after={AFTER_SIGKILL_SECS}\n\
             _look={}\n{GROUP_OPTION}\n{GROUP_ALIVE}{KILL}",
            self.signal,
            self.wait,
            u8::from(self.force),
            u8::from(look_only),
        )
    }

    /// How long the program may take on the host.
    pub fn budget(&self) -> Duration {
        Duration::from_secs_f64(self.wait)
            + KILL_BUDGET
            + Duration::from_secs(2 * AFTER_SIGKILL_SECS as u64)
    }
}

/// The result and whether the SIGKILL fallback was attempted, from the program's answer.
pub fn parse(said: &str) -> (KillResult, bool) {
    match said.trim() {
        "not_running" => (KillResult::NotRunning, false),
        "already_exited" => (KillResult::AlreadyExited, false),
        "killed" => (KillResult::Killed, false),
        "killed force" => (KillResult::Killed, true),
        "failed_to_kill" => (KillResult::FailedToKill, false),
        "failed_to_kill force" => (KillResult::FailedToKill, true),
        // `unconfirmed`, or no word: whose processes the group holds is not known.
        _ => (KillResult::Error, false),
    }
}

/// Runs `script` (a kill order's, perhaps behind a check) on `host`: `error` when the program
/// gave no answer (the master is gone, the host does not answer).
pub async fn signal_group(
    host: &Host,
    script: String,
    order: KillOrder,
    as_root: bool,
) -> (KillResult, bool) {
    let program = control_program(script, as_root, order.budget());
    match remote::run(host, program).await {
        Ok(result) if result.exit_code == Some(0) => {
            parse(&String::from_utf8_lossy(&result.stdout.bytes))
        }
        Ok(_) | Err(_) => (KillResult::Error, false),
    }
}

/// `command_kill`.
pub async fn kill(
    session: &Session,
    req: CommandKillRequest,
) -> Result<CommandKilled, DaemonError> {
    let order = KillOrder::check(req.signal, req.force, req.wait_seconds)?;
    let handle = super::Commands::of(session).find(&req.handle_id)?;
    let _under_way = handle.kill_begins();
    // The end first: a group found empty is recorded before the end is (and the end is
    // known, to the record, before anyone sees it).
    let end = handle.ended().or_else(|| handle.ending.get().cloned());
    let ended = end.is_some();
    let seen = handle.observer.seen();
    let pid = seen.pid;
    // Lost: the run failed, or the daemon before died, so nobody saw how the group ended.
    // Its channel's relay ended it, and its number may be another group's by now (as root
    // for a sudo_exec handle): an empty group is told, a peopled one is never signalled.
    let lost = end.is_some_and(|end| end.state == sshmcp_proto::command::CommandState::Lost);
    let (result, force_kill_used) = match pid {
        // The program ended and took its whole group with it: the group's number may belong
        // to another group by now, so nothing is sent.
        _ if ended && seen.group_left == Some(false) => (KillResult::NotRunning, false),
        Some(pgid) => {
            let script = order.script(pgid, lost);
            signal_group(&session.host, script, order, handle.as_root).await
        }
        // The shell never reported a valid group: nothing can be addressed.
        None => (KillResult::InvalidPid, false),
    };
    if matches!(
        result,
        KillResult::Killed | KillResult::AlreadyExited | KillResult::NotRunning
    ) {
        handle.confirm_killed();
        // Recorded before the answer: a daemon that died right after it would otherwise
        // bring the handle back as its command ended, not `killed`.
        session.record.until_written().await;
    }
    if result == KillResult::Error && session.host.master_gone() {
        return Err(crate::remote::lost_error());
    }
    Ok(CommandKilled {
        handle_id: handle.id.clone(),
        pid,
        result,
        signal: order.signal,
        force_kill_used,
        timestamp: now_rfc3339(),
    })
}

/// The person's stop of an `exec` call under way (`sshmcp kill`): TERM to its process group,
/// KILL a second later if it is still there, as `command_kill` with `force`; the call then
/// answers how its command ended. A call with no group yet is cut (nothing of it runs). One
/// handed off meanwhile is stopped as the handle it became.
pub async fn stop_exec(session: &Session, id: &str) -> Result<Stop, DaemonError> {
    let under_way = &super::Commands::of(session).under_way;
    // The person needs no key (the service checked who asks); the request carries none.
    let as_handle = || CommandKillRequest {
        auth: sshmcp_proto::session::SessionAuth {
            session_id: session.id.clone(),
            session_key: String::new(),
        },
        handle_id: id.to_string(),
        signal: None,
        force: Some(true),
        wait_seconds: None,
    };
    let Some(target) = under_way.target(id) else {
        return kill_for_person(session, as_handle())
            .await
            .map(|k| Stop::Signalled(k.result));
    };
    if let Some(how) = target.ended {
        return Err(DaemonError::invalid_arguments(format!(
            "{id} already ended ({how}): nothing to stop"
        )));
    }
    let Some(pgid) = target.pid else {
        under_way.stopped(id, true);
        return Ok(Stop::Cut);
    };
    let order = KillOrder::check(None, Some(true), None)?;
    under_way.stopped(id, false);
    let (result, _) = signal_group(
        &session.host,
        order.script(pgid, false),
        order,
        target.as_root,
    )
    .await;
    // A stop that did not take is not the person's doing, whatever ends the call later.
    if matches!(
        result,
        KillResult::FailedToKill | KillResult::Error | KillResult::InvalidPid
    ) {
        under_way.stop_failed(id);
    }
    if result == KillResult::Error && session.host.master_gone() {
        return Err(crate::remote::lost_error());
    }
    // Handed off while the signal went: the handle is what the agent reads now.
    let gone = matches!(
        result,
        KillResult::Killed | KillResult::AlreadyExited | KillResult::NotRunning
    );
    if let (true, Ok(handle)) = (gone, super::Commands::of(session).find(id)) {
        handle.person_kills(result == KillResult::Killed);
        handle.confirm_killed();
        session.record.until_written().await;
    }
    Ok(Stop::Signalled(result))
}

/// The person's kill of a handle (`sshmcp kill`, also of an `exec` handed off meanwhile), as
/// `command_kill` with `force`: the handle says the person stopped it when it did.
pub async fn kill_for_person(
    session: &Session,
    req: CommandKillRequest,
) -> Result<CommandKilled, DaemonError> {
    let handle = super::Commands::of(session).find(&req.handle_id).ok();
    if let Some(handle) = &handle {
        handle.person_kills(true);
    }
    let killed = kill(session, req).await;
    if let Some(handle) = &handle
        && !killed
            .as_ref()
            .is_ok_and(|k| k.result == KillResult::Killed)
    {
        handle.person_kills(false);
    }
    killed
}

/// What the person's stop of an `exec` call did.
pub enum Stop {
    /// The call had no process group yet: it was cut, and nothing of it runs.
    Cut,
    /// Its group was signalled, with this result.
    Signalled(KillResult),
}

/// A person's stop carries no exit status of its own; a signalled one says the kill's result.
impl crate::audit::Answer for Stop {
    fn exit(&self) -> crate::audit::Exit {
        match self {
            Stop::Cut => crate::audit::Exit::default(),
            Stop::Signalled(result) => crate::audit::kill_said(*result, false),
        }
    }
}

impl Stop {
    /// As the person reads it: `cancelled`, or the kill's result.
    pub fn as_str(&self) -> &'static str {
        match self {
            Stop::Cut => "cancelled",
            Stop::Signalled(result) => result.as_str(),
        }
    }
}

/// A kill's line says its result.
impl crate::audit::Answer for sshmcp_proto::command::CommandKilled {
    fn exit(&self) -> crate::audit::Exit {
        crate::audit::kill_said(self.result, self.force_kill_used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sshmcp_proto::ErrorCode;

    #[test]
    fn order_edges() {
        assert_eq!(
            KillOrder::check(None, None, None).unwrap(),
            KillOrder {
                signal: 15,
                force: false,
                wait: 1.0
            }
        );
        assert!(KillOrder::check(Some(64), None, Some(MAX_KILL_WAIT_SECS)).is_ok());
        assert!(KillOrder::check(Some(1), None, Some(0.0)).is_ok());
        for (signal, wait) in [
            (0, 1.0),
            (65, 1.0),
            (-9, 1.0),
            (9, MAX_KILL_WAIT_SECS + 0.1),
            (9, -1.0),
        ] {
            assert_eq!(
                KillOrder::check(Some(signal), None, Some(wait))
                    .unwrap_err()
                    .code,
                ErrorCode::InvalidArguments
            );
        }
    }

    /// The program against real local process groups, under every shell a host may have as
    /// `/bin/sh`: one that exits on TERM, one that ignores it (without and with force), and
    /// one that is gone.
    #[test]
    fn the_program_gives_each_result_on_real_groups() {
        let shells = crate::programs::Shells::new();
        for (shell, path) in shells.each() {
            results_on_real_groups(&shell, &path);
        }
    }

    fn results_on_real_groups(shell: &[String], path: &str) {
        let home = tempfile::tempdir().unwrap();
        let said = |pgid: u32, order: KillOrder, look_only: bool| {
            let script = order.script(pgid, look_only);
            crate::programs::run_under(shell, path, home.path(), &script, b"")
        };
        let run = |pgid: u32, order: KillOrder| parse(&said(pgid, order, false));
        let order = |force| KillOrder::check(None, Some(force), Some(0.3)).unwrap();
        for (body, force, expected) in [
            (
                "sleep 30 & echo ready; wait",
                false,
                (KillResult::Killed, false),
            ),
            (
                "trap '' TERM; sleep 30 & echo ready; wait",
                false,
                (KillResult::FailedToKill, false),
            ),
            (
                "trap '' TERM; sleep 30 & echo ready; wait",
                true,
                (KillResult::Killed, true),
            ),
        ] {
            let mut child = crate::remote::kill::tests::ready_group(body);
            assert_eq!(
                run(child.id(), order(force)),
                expected,
                "{shell:?}: {body} force={force}"
            );
            if expected.0 == KillResult::FailedToKill {
                nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .unwrap();
            }
            child.wait().unwrap();
        }
        assert_eq!(
            run(crate::programs::NO_SUCH_GROUP, order(false)),
            (KillResult::NotRunning, false)
        );
        // Only looked at: an empty group is told, a peopled one is left alone.
        let none = said(crate::programs::NO_SUCH_GROUP, order(true), true);
        assert_eq!(parse(&none), (KillResult::NotRunning, false));
        let mut child = crate::remote::kill::tests::ready_group("sleep 30 & echo ready; wait");
        let group = nix::unistd::Pid::from_raw(child.id() as i32);
        let looked = said(child.id(), order(true), true);
        assert_eq!(looked.trim(), "unconfirmed", "{shell:?}");
        assert_eq!(parse(&looked), (KillResult::Error, false));
        assert_eq!(
            nix::sys::signal::killpg(group, None),
            Ok(()),
            "{shell:?}: signalled"
        );
        nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).unwrap();
        child.wait().unwrap();
    }

    /// `already_exited` needs the group to go between the check and the signal, a race on a
    /// real host. Here a `kill` function in front of the shell's builtin ends and reaps the
    /// real group just before the signal goes out.
    #[test]
    fn a_group_gone_between_check_and_signal_is_already_exited() {
        let order = KillOrder::check(None, None, Some(0.3)).unwrap();
        let race = "setsid sleep 30 & g=$!\n\
                    while ! command kill -0 -$g 2>/dev/null; do sleep 0.01; done\n\
                    kill() { case $1 in -0) ;; *) command kill -KILL $g; wait $g;; esac; \
                    command kill \"$@\"; }";
        let script = order.script(0, false).replacen("g=0", race, 1);
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .output()
            .unwrap();
        let said = String::from_utf8(out.stdout).unwrap();
        assert_eq!(parse(&said), (KillResult::AlreadyExited, false), "{said}");
    }
}
