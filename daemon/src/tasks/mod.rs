//! Detached tasks (`task_launch`, `task_status`, `task_kill`): remote processes in their own
//! session and process group that outlive the session, the daemon and any reconnect. All
//! their state lives on the host, in a 0700 directory of the remote user: per task (named by
//! its PID) the command, the two logs (0600), a start marker and, once it ended, its exit
//! status. The start marker is the process's start time as the kernel gives it: a PID that
//! now belongs to another process does not match it, so that process is never taken for the
//! task and never signalled.

use std::time::Duration;

use sshmcp_proto::command::{DEFAULT_TAIL_BYTES, KillResult};
use sshmcp_proto::task::{
    LogTail, TaskKillRequest, TaskKilled, TaskLaunchRequest, TaskLaunched, TaskReport, TaskState,
    TaskStatusRequest,
};
use sshmcp_proto::time::now_rfc3339;
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::commands::kill::{KillOrder, signal_group};
use crate::inspect::remote_text;
use crate::remote::capture::utf8_tail_boundary;
use crate::remote::status::{self, whole};
use crate::remote::{self, Program};
use crate::request;
use crate::session::Session;

/// How long a launch or a status may take on the host.
const TIMEOUT: Duration = Duration::from_secs(30);

/// How long a launch may take on the host: its wait for the wrapper (20 s by the clock), a
/// channel and a login shell.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(45);

/// Where the tasks live on the host.
const DIR: &str = "d=$HOME/.sshmcp/tasks\n";

/// `started PID`: the process's start marker (its start time in clock ticks from /proc, else
/// `ps`'s start time), nothing for a zombie or no process. The fields after the name are
/// split from a variable: posh splits an unquoted `${s##*)}` into one field too many. No single quote: the launch puts it
/// inside a quoted program.
const STARTED: &str = include_str!("started.sh");

/// The launch: the command (on stdin) saved in the private directory, then a detached
/// `setsid /bin/sh` that opens its logs, records its start marker, runs the command with
/// stdin from /dev/null and records its status. setsid forks it (`setsid -f`, else `setsid
/// setsid`, whose inner one forks as the session leader the outer one made it, for a setsid
/// without `-f`: BusyBox, util-linux before 2.31), so that it is no asynchronous list of the
/// launching shell, whose INT and QUIT would be ignored for good (a shell cannot trap or
/// reset a signal ignored on entry). The wrapper's traps are handlers, not ignores, so the
/// command keeps the default dispositions and a signal to the group still ends it, after
/// which the wrapper records 128 + the signal; the wrapper's own stderr is /dev/null, so its
/// notes on how the command ended ("Terminated") stay out of the log. PIDs come round again
/// and the files of an old task of the same PID may still be there: the wrapper removes them
/// and creates its logs anew, exclusively (an old log would keep its mode, and the logs must
/// be private), then gives its PID to the launch (`launch.WORD.pid`, 0 when it could not
/// make its logs), then writes this launch's word (`$word`, fresh from the daemon) to
/// `PID.launch`, then its start marker. The launch answers once its own word is there and
/// the marker after it, or after 20 s by the clock with what it knows. A wrapper still to
/// give its PID then is stopped short: the launch removes the command file, which the
/// wrapper takes only after giving its PID, and a wrapper that finds it gone runs nothing.
const LAUNCH: &str = include_str!("launch.sh");

/// Whether PID `$p` is the task sshmcp launched: its start file matches the live process.
/// With its leader gone, the group is the task's only while a live member carries the task's
/// mark in its environment (every process the task starts inherits it): a group whose number
/// was once the task's but emptied may be anyone's now. A member in the middle of an exec
/// shows an empty environment for a moment (Linux installs the new one late), so when no
/// member carries the mark, those that showed none are read again until a second is over (a
/// process started with an empty environment, `env -i`, shows none for good).
const IS_TASK: &str = include_str!("is_task.sh");

/// The status: a line `state exit out_size err_size dir`, then the stdout log's tail; the
/// stderr log's tail on stderr, where nothing else goes. `$n` is the tail's size. Only
/// regular files are read (a fifo in a log's place would hang the read), and an exit file
/// that holds no number is no status.
const STATUS: &str = include_str!("status.sh");

/// `task_launch`.
pub async fn launch(
    session: &Session,
    max_output_bytes: u64,
    req: TaskLaunchRequest,
) -> Result<TaskLaunched, DaemonError> {
    request::check_command(&req.command)?;
    request::check_cwd(req.cwd.as_deref())?;
    let word = crate::random::nonce("t")
        .map_err(|e| DaemonError::internal(format!("no randomness: {e}")))?;
    let mut program = Program::new(
        launch_script(&word),
        LAUNCH_TIMEOUT,
        max_output_bytes.max(4096),
    );
    program.cwd = req.cwd;
    program.stdin = Some(req.command.into_bytes());
    let result = remote::run(&session.host, program).await?;
    if result.timed_out {
        return Err(DaemonError::internal(format!(
            "the launch did not answer within {} s (a slow host): the task may have started \
             all the same, so look for it in \
             ~/.sshmcp/tasks (newest files) before launching it again",
            LAUNCH_TIMEOUT.as_secs()
        )));
    }
    let said = String::from_utf8_lossy(&whole(result.stdout)?).into_owned();
    let words: Vec<&str> = said.trim_end().splitn(3, ' ').collect();
    match words.as_slice() {
        ["ok", pid, dir] => {
            let pid: u32 = pid
                .parse()
                .map_err(|_| DaemonError::internal(format!("the launch said {said:?}")))?;
            Ok(TaskLaunched {
                pid,
                stdout_log: format!("{dir}/{pid}.out"),
                stderr_log: format!("{dir}/{pid}.err"),
                started_at: now_rfc3339(),
            })
        }
        ["nodir"] => Err(DaemonError::internal(
            "cannot create the private task directory ~/.sshmcp/tasks on the host",
        )),
        ["nosetsid"] => Err(DaemonError::new(
            ErrorCode::HostToolMissing,
            "the host lacks `setsid` (util-linux, or BusyBox's), which a detached task needs",
        )),
        ["nostart", pid] => Err(DaemonError::internal(format!(
            "the task's wrapper, PID {pid}, did not confirm its start within 20 s (a slow \
             host or home directory): it may still run the command, so ask task_status for \
             PID {pid} before launching it again"
        ))),
        ["nologs"] => Err(DaemonError::internal(
            "the task's wrapper could not create its logs in ~/.sshmcp/tasks on the host (a \
             full disk or quota?); nothing ran",
        )),
        ["nostart"] => Err(DaemonError::internal(
            "no task wrapper started within 20 s (the host is slow, or out of processes); \
             none is known to run",
        )),
        _ => Err(DaemonError::internal(format!(
            "the task did not start (the host said {:?})",
            said.trim_end()
        ))),
    }
}

/// The launch program, whose wrapper proves itself with `word`.
fn launch_script(word: &str) -> String {
    let launch = LAUNCH.replace("{STARTED}", STARTED);
    format!("{DIR}word={word}\n{launch}")
}

/// What the status and kill programs start with for PID `pid`.
fn about(pid: u32) -> String {
    format!("{DIR}{STARTED}p={pid}\n{IS_TASK}")
}

/// A PID a task can have: above 1 (0 and negative values address groups, 1 is init).
fn task_pid(pid: i64) -> Option<u32> {
    u32::try_from(pid).ok().filter(|p| *p > 1)
}

/// How often a waiting `task_status` looks again: the task runs on the host, where nothing
/// tells the daemon it ended.
const STATUS_POLL: Duration = Duration::from_secs(1);

/// `task_status`: at once, or once the task stopped running or `wait_seconds` passed.
pub async fn status(
    session: &Session,
    max_output_bytes: u64,
    req: TaskStatusRequest,
) -> Result<TaskReport, DaemonError> {
    let until = tokio::time::Instant::now() + crate::commands::check_wait(req.wait_seconds)?;
    // While it waits, it looks with one byte of each log; the answer reads the tails asked.
    let probe = TaskStatusRequest {
        tail_bytes: Some(1),
        ..req.clone()
    };
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() || status_now(session, 1, &probe).await?.state != TaskState::Running {
            return status_now(session, max_output_bytes, &req).await;
        }
        tokio::time::sleep(left.min(STATUS_POLL)).await;
    }
}

/// The task as the host tells it now.
async fn status_now(
    session: &Session,
    max_output_bytes: u64,
    req: &TaskStatusRequest,
) -> Result<TaskReport, DaemonError> {
    let cap = max_output_bytes.max(1);
    // A wish above the cap is taken as the cap, as every size wish is.
    let tail = req.tail_bytes.unwrap_or(DEFAULT_TAIL_BYTES).min(cap);
    if tail == 0 {
        return Err(DaemonError::invalid_arguments(
            "tail_bytes must be at least 1",
        ));
    }
    let not_found = TaskReport {
        pid: req.pid,
        state: TaskState::NotFound,
        exit_code: None,
        stdout_log: None,
        stderr_log: None,
        stdout: None,
        stderr: None,
    };
    let Some(pid) = task_pid(req.pid) else {
        return Ok(not_found);
    };
    let script = format!("{}n={tail}\n{STATUS}", about(pid));
    // Room for the status line beside the tail.
    let program = Program::new(script, TIMEOUT, tail + 4096);
    let result = remote::run(&session.host, program).await?;
    if result.timed_out {
        return Err(status::no_answer(TIMEOUT, ""));
    }
    let (out, err) = (whole(result.stdout)?, whole(result.stderr)?);
    let (line, out_tail) = match out.iter().position(|b| *b == b'\n') {
        Some(at) => (
            String::from_utf8_lossy(&out[..at]).into_owned(),
            &out[at + 1..],
        ),
        None => (String::from_utf8_lossy(&out).into_owned(), &[][..]),
    };
    let words: Vec<&str> = line.splitn(5, ' ').collect();
    let [state, exit, out_size, err_size, dir] = words.as_slice() else {
        return match line.as_str() {
            "not_found" => Ok(not_found),
            _ => Err(DaemonError::internal(format!(
                "unexpected task status from the host: {line:?}"
            ))),
        };
    };
    let size = |s: &str| s.trim().parse::<u64>().unwrap_or(0);
    Ok(TaskReport {
        pid: req.pid,
        state: match *state {
            "running" => TaskState::Running,
            _ => TaskState::Exited,
        },
        exit_code: exit.parse().ok(),
        stdout_log: Some(format!("{dir}/{pid}.out")),
        stderr_log: Some(format!("{dir}/{pid}.err")),
        stdout: Some(log_tail(out_tail, size(out_size))),
        stderr: Some(log_tail(&err, size(err_size))),
    })
}

/// A log's tail as an answer gives it: a character cut in half at its start is left out.
fn log_tail(bytes: &[u8], size: u64) -> LogTail {
    let skip = match (bytes.len() as u64) < size {
        true => utf8_tail_boundary(bytes),
        false => 0,
    };
    let (data, encoding) = remote_text(&bytes[skip..]);
    LogTail {
        data,
        encoding,
        size,
    }
}

/// `task_kill`: the command_kill program, behind the check that the PID is still the task.
pub async fn kill(session: &Session, req: TaskKillRequest) -> Result<TaskKilled, DaemonError> {
    let order = KillOrder::check(req.signal, req.force, req.wait_seconds)?;
    let (result, force_kill_used) = match task_pid(req.pid) {
        None => (KillResult::InvalidPid, false),
        Some(pid) => {
            // Only the task itself: a PID now another process's is left alone.
            let script = format!(
                "{}is_task || {{ echo not_running; exit 0; }}\n{}",
                about(pid),
                order.script(pid, false)
            );
            signal_group(&session.host, script, order, false).await
        }
    };
    if result == KillResult::Error && session.host.master_gone() {
        return Err(crate::remote::lost_error());
    }
    Ok(TaskKilled {
        pid: req.pid,
        result,
        signal: order.signal,
        force_kill_used,
        timestamp: now_rfc3339(),
    })
}

// A call answered so adds nothing to its trail line but how it ended (a report's exit
// code is its command's, told when asked, not the call's).
impl crate::audit::Answer for sshmcp_proto::task::TaskLaunched {}
impl crate::audit::Answer for sshmcp_proto::task::TaskReport {}
/// A kill's line says its result.
impl crate::audit::Answer for sshmcp_proto::task::TaskKilled {
    fn exit(&self) -> crate::audit::Exit {
        crate::audit::kill_said(self.result, self.force_kill_used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `script` with this machine's `/bin/sh`, `stdin` on its stdin, as a host whose home
    /// is `home` (and whose PATH is `path`, when given); its stdout.
    fn local_sh(home: &std::path::Path, path: Option<&str>, script: &str, stdin: &[u8]) -> String {
        let path = path.map_or_else(|| std::env::var("PATH").unwrap_or_default(), String::from);
        crate::programs::run_under(&["/bin/sh".into()], &path, home, script, stdin)
    }

    /// A `setsid` of shell text `body` in `home`'s `bin`, first on the PATH this returns.
    fn fake_setsid(home: &std::path::Path, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let bin = home.join("bin");
        std::fs::create_dir(&bin).unwrap();
        let fake = bin.join("setsid");
        std::fs::write(&fake, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
    }

    /// The launch and status programs under every shell a host may have as `/bin/sh` (dash,
    /// bash, a strict POSIX shell, BusyBox with only its own applets on PATH, whose setsid
    /// has no `-f`): a task starts detached and is the task while it runs, its status follows
    /// it to its exit code and log tails, and once it has ended its PID is no longer the task.
    /// (The task and its wrapper run under the machine's `/bin/sh`, as they would on a host.)
    #[cfg(target_os = "linux")]
    #[test]
    fn a_task_launches_and_reports_under_every_posix_shell() {
        let shells = crate::programs::Shells::new();
        for (shell, path) in shells.each() {
            let home = tempfile::tempdir().unwrap();
            let run = |script: &str, stdin: &[u8]| {
                crate::programs::run_under(&shell, &path, home.path(), script, stdin)
            };
            // The task waits for a file the test makes once it has seen it running.
            let task =
                b"until [ -e \"$HOME/go\" ]; do sleep 0.02; done; echo out; echo err >&2; exit 3";
            let said = run(&launch_script("tword"), task);
            let pid: u32 = said
                .split(' ')
                .nth(1)
                .and_then(|pid| pid.parse().ok())
                .unwrap_or_else(|| panic!("{shell:?}: the launch said {said:?}"));
            let status = || run(&format!("{}n=100\n{STATUS}", about(pid)), b"");
            let is_task = || {
                run(
                    &format!("{}is_task && echo task || echo other", about(pid)),
                    b"",
                )
            };
            let said = status();
            assert!(said.starts_with("running - 0 0 "), "{shell:?}: {said}");
            assert_eq!(is_task(), "task\n", "{shell:?}");
            std::fs::write(home.path().join("go"), "").unwrap();
            let give_up = std::time::Instant::now() + Duration::from_secs(10);
            let mut said = status();
            while said.starts_with("running ") {
                assert!(std::time::Instant::now() < give_up, "{shell:?}: {said}");
                std::thread::sleep(Duration::from_millis(10));
                said = status();
            }
            let dir = home.path().join(".sshmcp/tasks");
            assert_eq!(
                said,
                format!("exited 3 4 4 {}\nout\n", dir.display()),
                "{shell:?}"
            );
            assert_eq!(is_task(), "other\n", "{shell:?}");
        }
    }

    #[test]
    fn the_start_marker_function_fits_in_a_quoted_program() {
        assert!(!STARTED.contains('\''));
    }

    #[test]
    fn only_real_task_pids() {
        assert_eq!(task_pid(2), Some(2));
        for bad in [1, 0, -5, i64::from(u32::MAX) + 1] {
            assert_eq!(task_pid(bad), None, "{bad}");
        }
    }

    /// A wrapper that cannot make its logs (here a directory in the way of each, under the
    /// PIDs to come) says so at once, and nothing runs.
    #[test]
    fn a_wrapper_without_its_logs_says_so_at_once() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".sshmcp/tasks");
        std::fs::create_dir_all(&dir).unwrap();
        let mut ran = home.path().join("ran");
        let sh = |script: &str, stdin: &[u8]| local_sh(home.path(), None, script, stdin);
        // The next PIDs are taken to follow this shell's: a launch whose wrapper came after
        // all of them (other processes took them) ran, and the try is over.
        let mut said = String::new();
        for attempt in 0..5 {
            // Each try's own mark: a try whose launch ran leaves its mark behind.
            ran = home.path().join(format!("ran{attempt}"));
            let command = format!("touch {}; sleep 30", ran.display());
            let after: u32 = sh("echo $$", b"").trim().parse().unwrap();
            for next in after + 1..after + 200 {
                std::fs::create_dir_all(dir.join(format!("{next}.out"))).unwrap();
            }
            let began = std::time::Instant::now();
            said = sh(&launch_script("tword"), command.as_bytes());
            if said == "nologs\n" {
                assert!(
                    began.elapsed() < Duration::from_secs(10),
                    "{:?}",
                    began.elapsed()
                );
                break;
            }
            if let Some(pid) = said.split(' ').nth(1).and_then(|p| p.parse::<i32>().ok()) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        assert_eq!(said, "nologs\n");
        assert!(!ran.exists());
    }

    /// A wrapper that starts after the launch gave up on it (a host too loaded to fork it in
    /// 20 s: here a setsid that waits 21 s first) runs nothing: the launch said none runs.
    #[test]
    fn a_wrapper_later_than_its_launch_runs_nothing() {
        let home = tempfile::tempdir().unwrap();
        let path = fake_setsid(
            home.path(),
            "( sleep 21; /usr/bin/setsid \"$@\" ) </dev/null >/dev/null 2>&1 &",
        );
        let ran = home.path().join("ran");
        let command = format!("touch {}", ran.display());
        let said = local_sh(
            home.path(),
            Some(&path),
            &launch_script("tword"),
            command.as_bytes(),
        );
        assert_eq!(said, "nostart \n");
        // The late wrapper gives its PID, finds its command gone and ends.
        let dir = home.path().join(".sshmcp/tasks");
        let pid_file = dir.join("launch.tword.pid");
        let give_up = std::time::Instant::now() + Duration::from_secs(20);
        let wrapper = loop {
            assert!(std::time::Instant::now() < give_up, "no late wrapper");
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|p| p.trim().parse::<u32>().ok())
            {
                break pid;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        while std::path::Path::new(&format!("/proc/{wrapper}/cmdline")).exists()
            && !std::fs::read_to_string(format!("/proc/{wrapper}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
        {
            assert!(std::time::Instant::now() < give_up, "the wrapper runs on");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!ran.exists(), "the command ran");
        assert!(!dir.join(format!("{wrapper}.cmd")).exists());
    }

    /// A host whose `setsid` has no `-f` (BusyBox, util-linux before 2.31): the wrapper
    /// starts through `setsid setsid` instead, and the launch still names its PID.
    #[test]
    fn a_setsid_without_fork_still_launches() {
        let home = tempfile::tempdir().unwrap();
        let path = fake_setsid(
            home.path(),
            "[ \"$1\" = -f ] && { echo \"setsid: invalid option -- 'f'\" >&2; exit 1; }\n\
             exec /usr/bin/setsid \"$@\"",
        );
        let sh = |script: &str, stdin: &[u8]| local_sh(home.path(), Some(&path), script, stdin);
        let said = sh(&launch_script("tword"), b"echo started");
        let pid: u32 = said
            .strip_prefix("ok ")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|pid| pid.parse().ok())
            .unwrap_or_else(|| panic!("the launch said {said:?}"));
        let exit = home.path().join(format!(".sshmcp/tasks/{pid}.exit"));
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        while !exit.exists() {
            assert!(std::time::Instant::now() < give_up, "never exited");
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = home.path().join(format!(".sshmcp/tasks/{pid}.out"));
        assert_eq!(std::fs::read_to_string(out).unwrap(), "started\n");
    }

    /// The launch, status and identity programs against this machine's own shell: a task
    /// starts detached, records its marker and exit status, and a PID whose marker does not
    /// match (reused) is not the task.
    #[test]
    #[allow(clippy::too_many_lines)] // One task's life, step by step.
    fn launch_status_and_identity_on_a_local_shell() {
        let home = tempfile::tempdir().unwrap();
        let sh = |script: &str, stdin: &[u8]| local_sh(home.path(), None, script, stdin);
        let said = sh(&launch_script("tword"), b"echo out; echo err >&2; exit 3");
        let pid: u32 = said.split(' ').nth(1).unwrap().parse().unwrap();
        let dir = home.path().join(".sshmcp/tasks");
        let status = |pid: u32| sh(&format!("{}n=100\n{STATUS}", about(pid)), b"");
        // The task is not our child: poll its status until it has exited (its shell writes
        // the exit file a moment before it ends, and is running until then).
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        let mut said = status(pid);
        while said.starts_with("running ") {
            assert!(std::time::Instant::now() < give_up, "never exited: {said}");
            std::thread::sleep(Duration::from_millis(10));
            said = status(pid);
        }
        assert!(said.starts_with("exited 3 4 4 "), "{said}");
        assert!(said.ends_with("\nout\n"), "{said}");
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(format!("{pid}.out"))), 0o600);
        // Another process given the task's start file: not the task. Init, which started long
        // before: this test's own process may have started in the task's clock tick, and
        // start times only tell apart processes of different ticks.
        let other = 1;
        std::fs::copy(
            dir.join(format!("{pid}.start")),
            dir.join(format!("{other}.start")),
        )
        .unwrap();
        let said = sh(
            &format!("{}is_task && echo task || echo other", about(other)),
            b"",
        );
        assert_eq!(said, "other\n");
        assert_eq!(status(999_999), "not_found\n");

        // The files an old task left under the PID the next one gets (PIDs come round
        // again): the launch waits for the new wrapper's own files, and the status is the new
        // task's, and its logs are private though the old ones were not. PIDs cannot be
        // foretold on a busy machine, so a `setsid` of the test's plants the old files under
        // the PID of the process it is about to turn into the wrapper (the real `setsid`,
        // called from a process that leads no group, keeps that PID).
        let reused = fake_setsid(
            home.path(),
            "[ \"$1\" = -f ] && shift\n\
             (\n\
               me=$(exec /bin/sh -c 'echo $PPID'); d=$HOME/.sshmcp/tasks; u=$(umask)\n\
               umask 022\n\
               printf '12345\\n' > \"$d/$me.start\"; printf '42\\n' > \"$d/$me.exit\"\n\
               printf 'old\\n' > \"$d/$me.out\"; printf 'old\\n' > \"$d/$me.err\"\n\
               printf 'tother\\n' > \"$d/$me.launch\"; echo \"$me\" > \"$HOME/planted\"\n\
               umask \"$u\"; exec /usr/bin/setsid \"$@\"\n\
             ) &",
        );
        let launched = local_sh(
            home.path(),
            Some(&reused),
            &launch_script("tword"),
            b"sleep 30",
        );
        let pid: u32 = launched
            .split(' ')
            .nth(1)
            .and_then(|pid| pid.parse().ok())
            .unwrap_or_else(|| panic!("the launch said {launched:?}"));
        let planted = std::fs::read_to_string(home.path().join("planted")).unwrap();
        assert_eq!(
            planted.trim(),
            pid.to_string(),
            "the old files were the wrapper's PID's"
        );
        let said = status(pid);
        let log_modes = (
            mode(&dir.join(format!("{pid}.out"))),
            mode(&dir.join(format!("{pid}.err"))),
        );
        nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        assert!(said.starts_with("running - 0 0 "), "{said}");
        assert_eq!(log_modes, (0o600, 0o600));

        // A group whose leader is gone, two of whose members have an empty environment for
        // good (`env -i`) and the third for 0.4 s, as a process in the middle of an exec
        // does, before it carries the mark: still the task, as it was all along. The status
        // must begin before that exec (the file it leaves says when), else the try is over.
        let execd = home.path().join("execd");
        let members = b"env -i sleep 30 & env -i sleep 30 & \
            env -i /bin/sh -c 'sleep 0.4; : > \"$2\"; export SSHMCP_TASK=\"$1\"; exec sleep 30' \
            - \"$SSHMCP_TASK\" \"$HOME/execd\" &";
        let mut said = String::new();
        for _try in 0..5 {
            let _ = std::fs::remove_file(&execd);
            let launched = sh(&launch_script("tword"), members);
            let pid: u32 = launched.split(' ').nth(1).unwrap().parse().unwrap();
            let give_up = std::time::Instant::now() + Duration::from_secs(10);
            let leader_gone = || {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .map_or(true, |stat| stat.contains(") Z "))
            };
            while !(dir.join(format!("{pid}.exit")).exists() && leader_gone()) {
                assert!(
                    std::time::Instant::now() < give_up,
                    "the leader never ended"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            let in_time = !execd.exists();
            said = status(pid);
            nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            )
            .unwrap();
            if in_time {
                break;
            }
            said = "the status never began before the member's exec".into();
        }
        assert!(said.starts_with("running 0 "), "{said}");
    }
}
