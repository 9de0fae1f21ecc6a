//! The `sudo_exec` tool's operation: the caller's text run by root's
//! `/bin/bash --noprofile --norc -s` under `sudo -n -k`, so it runs as root only where
//! sudoers allows that without a password. No password is ever asked for, stored or sent.
//!
//! Root's bash first prints a gate line with a fresh nonce on stderr and another on stdout
//! (see `Program::gate`), then runs the command as one group with an empty stdin (its own
//! stdin is the script: a command reading stdin must not eat the lines after it). When a gate
//! line came, the answer is the command's, whatever it exits with, and sudo's own warnings
//! before the gate are dropped. When none came, sudo did not start bash, and a second program asks sudo why: `sudo` words "not in
//! sudoers" and "password required" the same for the command itself.

use std::sync::Arc;

use sshmcp_proto::exec::{ExecResult, SudoExecRequest};
use sshmcp_proto::service::tools;
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::config::Settings;
use crate::operation::Operation;
use crate::remote::{self, Program, RunError, kill};
use crate::session::{Registry, Session};

/// The program: sudo, or a word saying there is none. `{N}` is the nonce.
const RUN: &str = "command -v sudo >/dev/null 2>&1 || { printf '%s unavailable\\n' {N}; exit 1; }\nexec {AS_ROOT}";

/// Why sudo did not start bash, asked of sudo itself (with messages in English): a rule for
/// it (`-l` answers 0, without asking a password when any of the user's rules is NOPASSWD)
/// that wants a password (the run itself says so, its stdin empty: were it allowed after
/// all, root's bash would read nothing and exit), or that refuses for another reason; no
/// rule for it among others (`-l` says nothing), not in sudoers at all (`-v`: "may not run
/// sudo"), a password wanted, or something else.
const WHY: &str = include_str!("sudo_exec_why.sh");

/// Runs the command as root and answers with its streams and exit status.
pub async fn sudo_exec(
    session: &Session,
    settings: &Settings,
    req: SudoExecRequest,
) -> Result<ExecResult, DaemonError> {
    crate::request::check_command(&req.command)?;
    crate::request::check_cwd(req.cwd.as_deref())?;
    crate::request::check_handoff(&req.handoff)?;
    let timeout = crate::request::check_limit(req.timeout, req.handoff.after.is_some())?;
    let nonce = fresh_nonce()?;
    let gate = fresh_nonce()?;
    let mut program = Program::new(
        RUN.replace("{N}", &nonce)
            .replace("{AS_ROOT}", kill::AS_ROOT),
        timeout,
        settings.max_output_bytes,
    );
    program.cwd = req.cwd;
    program.command = true;
    // The group starts with `:`, so that a command of comments alone is no empty group.
    program.stdin = Some(
        format!(
            "printf '%s\\n' {gate} >&2\nprintf '%s\\n' {}\n{{ :\n{}\n}} </dev/null\n",
            remote::stdout_gate(&gate),
            req.command
        )
        .into_bytes(),
    );
    program.gate = Some(gate);
    program.kill_as_root = true;
    let caller = crate::exec::handoff::Caller {
        tool: "sudo_exec",
        command: &req.command,
    };
    let run = crate::exec::handoff::run(
        session,
        settings,
        caller,
        program,
        req.handoff,
        req.local_root,
        false,
    );
    match run.await {
        Ok(result) => Ok(result),
        Err(RunError::NotStarted { said, stderr }) => {
            Err(refused(session, &nonce, &said, &stderr).await)
        }
        // The login user enters it, before sudo: root's own directories are out of reach.
        Err(RunError::NoCwd) => Err(DaemonError::new(
            ErrorCode::RemotePathNotFound,
            format!(
                "{} by the session's user, who enters it before sudo (a directory only root may \
                 enter: `cd` in the command instead)",
                RunError::NoCwd
            ),
        )),
        Err(e) => Err(crate::exec::failure(e)),
    }
}

fn fresh_nonce() -> Result<String, DaemonError> {
    crate::random::nonce("_sshmcp_sudo_")
        .map_err(|e| DaemonError::internal(format!("no randomness: {e}")))
}

/// The error for a command sudo did not start, with sudo's own last line.
async fn refused(session: &Session, nonce: &str, said: &str, stderr: &str) -> DaemonError {
    if said.trim() == format!("{nonce} unavailable") {
        return DaemonError::new(
            ErrorCode::SudoUnavailable,
            "no sudo on the PATH of the session's login shell (not installed, or left out of \
             PATH); run the command with exec, or install sudo",
        );
    }
    // Its last line: warnings (a host name that does not resolve) come before the refusal.
    let sudo_said = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let program = Program::new(WHY, std::time::Duration::from_secs(20), 4096);
    let why = remote::run(&session.host, program)
        .await
        .map(|r| String::from_utf8_lossy(&r.stdout.bytes).trim().to_string())
        .unwrap_or_default();
    classify(&why, sudo_said)
}

/// The error for sudo's refusal: its class (`why`, from sudo's own list of rights), and for a
/// refusal sudo's rights do not explain, the known reason its words name. sudo's raw text is
/// never passed on (automation reads the code; the text of sudo may be anything a host's
/// sudoers or a plugin makes it); the daemon's log keeps it.
fn classify(why: &str, sudo_said: &str) -> DaemonError {
    if !sudo_said.is_empty() {
        tracing::info!("sudo refused: {sudo_said}");
    }
    match why {
        "no_bash" => DaemonError::new(
            ErrorCode::HostToolMissing,
            "this host has no /bin/bash, the one program sudo_exec runs as root (sudo -n -k \
             /bin/bash --noprofile --norc -s): install bash there (Alpine: apk add bash; \
             FreeBSD: pkg install bash, then link it at /bin/bash), or ask the user",
        ),
        "password_required" => DaemonError::new(
            ErrorCode::SudoPasswordRequired,
            "sudo wants a password for this user and none is ever sent; ask the host's \
             administrator for a NOPASSWD rule for /bin/bash --noprofile --norc -s",
        ),
        "not_allowed" => DaemonError::new(
            ErrorCode::SudoNotAllowed,
            "sudoers does not let this user run /bin/bash --noprofile --norc -s as root",
        ),
        _ => {
            let reason = if sudo_said.contains("tty") {
                ": the host's sudoers requires a terminal for this user (requiretty), and \
                 commands run without one"
            } else {
                ", for a reason the user's sudo rights do not explain (the login shell may \
                 not gain privileges, sudo may not be setuid root, a plugin may refuse); \
                 sudo's words are in the daemon's log (`sshmcp logs`)"
            };
            DaemonError::new(
                ErrorCode::SudoNotAllowed,
                format!("sudo refused to start /bin/bash --noprofile --norc -s{reason}"),
            )
        }
    }
}

impl Operation for tools::SudoExec {
    fn summary(req: &SudoExecRequest) -> String {
        crate::audit::command(&req.command)
    }

    async fn run(
        req: SudoExecRequest,
        session: Arc<Session>,
        registry: &Registry,
    ) -> Result<ExecResult, DaemonError> {
        sudo_exec(&session, &registry.settings, req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_of_sudo_has_its_code_and_never_sudo_s_words() {
        let e = classify("password_required", "sudo: a password is required");
        assert_eq!(e.code, ErrorCode::SudoPasswordRequired);
        assert!(!e.message.contains("sudo:"), "{}", e.message);
        let e = classify("not_allowed", "x is not in the sudoers file. ALERT");
        assert_eq!(e.code, ErrorCode::SudoNotAllowed);
        assert!(!e.message.contains("ALERT"), "{}", e.message);
        let e = classify("allowed", "sudo: sorry, you must have a tty to run sudo");
        assert_eq!(e.code, ErrorCode::SudoNotAllowed);
        assert!(e.message.contains("requiretty"), "{}", e.message);
        assert!(!e.message.contains("sorry"), "{}", e.message);
        let e = classify("allowed", "sudo: some plugin said no");
        assert!(e.message.ends_with("(`sshmcp logs`)"), "{}", e.message);
        assert!(!e.message.contains("plugin said"), "{}", e.message);
    }

    #[test]
    fn the_programs_are_shell_text_that_parses() {
        for text in [
            RUN.replace("{N}", "_sshmcp_sudo_x")
                .replace("{AS_ROOT}", kill::AS_ROOT),
            WHY.to_string(),
        ] {
            let out = std::process::Command::new("/bin/sh")
                .arg("-n")
                .arg("-c")
                .arg(&text)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// Why sudo refused, under every shell a host may have as `/bin/sh` (BusyBox with only
    /// its applets), each case with a `sudo` first on PATH that answers `-l`, the run (`-k`)
    /// and `-v` as sudo does in that case.
    #[cfg(target_os = "linux")]
    #[test]
    fn why_sudo_refused_is_told_under_every_posix_shell() {
        use std::os::unix::fs::PermissionsExt as _;
        let password = "echo 'sudo: a password is required' >&2; exit 1";
        let not_in_sudoers = "echo 'Sorry, user me may not run sudo on h.' >&2; exit 1";
        let sudo_rs = "echo 'sudo: interactive authentication is required' >&2; exit 1";
        // (what `-l`, the run and `-v` do, the word the program answers)
        let cases = [
            ("echo /bin/bash", "exit 0", "exit 0", "allowed"),
            ("echo /bin/bash", password, "exit 0", "password_required"),
            ("exit 1", "exit 1", "exit 1", "not_allowed"),
            (not_in_sudoers, "exit 1", not_in_sudoers, "not_allowed"),
            (password, "exit 1", password, "password_required"),
            // sudo-rs words a wanted password otherwise, and `-v` wants one even where
            // the rule is NOPASSWD.
            ("echo /bin/bash", sudo_rs, "exit 0", "password_required"),
            (sudo_rs, "exit 1", sudo_rs, "password_required"),
            (
                "echo 'sudo: unable to resolve host' >&2; exit 1",
                "exit 1",
                "exit 1",
                "other",
            ),
        ];
        let shells = crate::programs::Shells::new();
        // A host without /bin/bash (Alpine, FreeBSD), whatever sudo would say.
        let no_bash = WHY.replace("[ -x /bin/bash ]", "[ -x /nonexistent/bash ]");
        for (shell, path) in shells.each() {
            let out = crate::programs::run_under(&shell, &path, std::path::Path::new("/"), &no_bash, b"");
            assert_eq!(out, "no_bash\n", "{shell:?}");
        }
        let missing = classify("no_bash", "");
        assert_eq!(missing.code, ErrorCode::HostToolMissing);
        assert!(missing.message.contains("/bin/bash"), "{}", missing.message);
        for (list, run, validate, word) in cases {
            let fake = tempfile::tempdir().unwrap();
            let sudo = fake.path().join("sudo");
            std::fs::write(
                &sudo,
                format!(
                    "#!/bin/sh\ncase \"$1 $2\" in '-n -l') {list} ;; '-n -k') {run} ;; \
                     '-n -v') {validate} ;; *) exit 99 ;; esac\n"
                ),
            )
            .unwrap();
            std::fs::set_permissions(&sudo, std::fs::Permissions::from_mode(0o755)).unwrap();
            for (shell, path) in shells.each() {
                let path = format!("{}:{path}", fake.path().display());
                let out = crate::programs::run_under(&shell, &path, fake.path(), WHY, b"");
                assert_eq!(
                    out,
                    format!("{word}\n"),
                    "{shell:?}: {list} / {run} / {validate}"
                );
            }
        }
    }
}
