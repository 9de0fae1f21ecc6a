//! The `sudo_exec` tool's operation: the caller's text as the stdin of
//! `sudo -n -k /bin/bash --noprofile --norc -s`, so it runs as root only where sudoers allows
//! that without a password. No password is ever asked for, stored or sent.
//!
//! One program does it all in one round trip. The first line root's bash reads creates a file
//! in a fresh private directory: when sudo did not start bash, the file is missing, and the
//! program asks `sudo -n -v` why (sudo words "not in sudoers" and "password required" the same
//! for the command itself) and says so on stderr after a line with a fresh nonce, which no
//! output can imitate. When bash started, the answer is the command's, whatever it exits with.

use sshmcp_proto::exec::{ExecResult, SudoExecRequest};
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::config::Settings;
use crate::remote::{self, Program, kill};
use crate::session::Session;

/// The program. `{N}` is the nonce. Its stdin (the command) reaches root's bash after the
/// line that proves bash started.
const SCRIPT: &str = r#"command -v sudo >/dev/null 2>&1 || { printf '\n%s unavailable\n' {N} >&2; exit 1; }
_sshmcp_t=$(mktemp -d "${TMPDIR:-/tmp}/sshmcp-sudo.XXXXXXXX") || exit 1
{ printf 'touch %s/started\n' "$_sshmcp_t"; cat; } | {AS_ROOT}
_sshmcp_s=$?
if [ -e "$_sshmcp_t/started" ]; then rm -rf "$_sshmcp_t"; exit $_sshmcp_s; fi
rm -rf "$_sshmcp_t"
_sshmcp_v=$(LC_ALL=C sudo -n -v 2>&1) && _sshmcp_c=not_allowed || case $_sshmcp_v in
  *"may not run sudo"*) _sshmcp_c=not_allowed;;
  *) _sshmcp_c=password_required;;
esac
printf '\n%s %s\n' {N} "$_sshmcp_c" >&2
exit 1"#;

/// Why sudo did not start the command, from the program's last stderr line.
fn refusal(stderr: &str, nonce: &str) -> Option<DaemonError> {
    let last = stderr.trim_end().rsplit('\n').next()?;
    let why = last.strip_prefix(nonce)?.trim();
    Some(match why {
        "unavailable" => DaemonError::new(
            ErrorCode::SudoUnavailable,
            "sudo is not installed on the host; run the command with exec, or install sudo",
        ),
        "password_required" => DaemonError::new(
            ErrorCode::SudoPasswordRequired,
            "sudo wants a password for this user, and none is ever sent; the host's sudoers \
             must allow NOPASSWD for /bin/bash --noprofile --norc -s",
        ),
        "not_allowed" => DaemonError::new(
            ErrorCode::SudoNotAllowed,
            "sudoers does not allow this user to run /bin/bash --noprofile --norc -s as root",
        ),
        _ => return None,
    })
}

/// Runs the command as root and answers with its streams and exit status.
pub async fn sudo_exec(
    session: &Session,
    settings: &Settings,
    req: SudoExecRequest,
) -> Result<ExecResult, DaemonError> {
    super::request::check_command(&req.command)?;
    super::request::check_cwd(req.cwd.as_deref())?;
    let timeout = super::request::check_timeout(req.timeout)?;
    let bytes: [u8; 16] = crate::session::key::random_bytes()
        .map_err(|e| DaemonError::internal(format!("no randomness: {e}")))?;
    let nonce = format!("_sshmcp_sudo_{}", crate::session::key::hex(&bytes));
    let mut program = Program::new(
        SCRIPT
            .replace("{N}", &nonce)
            .replace("{AS_ROOT}", kill::AS_ROOT),
        timeout,
        settings.max_output_bytes,
    );
    program.cwd = req.cwd;
    program.stdin = Some(req.command.into_bytes());
    program.kill_as_root = true;
    let result = remote::run(&session.host, program).await?;
    // Only a run that ended by itself with status 1 can be a refusal.
    if result.exit_code == Some(1)
        && let Some(refused) = refusal(&result.stderr.data, &nonce)
    {
        return Err(refused);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_nonce_line_says_why() {
        let n = "_sshmcp_sudo_ab";
        let sudo_said = format!("sudo: a password is required\n\n{n} password_required\n");
        assert_eq!(
            refusal(&sudo_said, n).unwrap().code,
            ErrorCode::SudoPasswordRequired
        );
        assert_eq!(
            refusal(&format!("\n{n} not_allowed\n"), n).unwrap().code,
            ErrorCode::SudoNotAllowed
        );
        assert_eq!(
            refusal(&format!("\n{n} unavailable"), n).unwrap().code,
            ErrorCode::SudoUnavailable
        );
        // The command's own output, even one imitating the words, is no refusal.
        assert!(refusal("_sshmcp_sudo_other password_required\n", n).is_none());
        assert!(refusal("password_required\n", n).is_none());
    }

    #[test]
    fn the_script_is_shell_text_that_parses() {
        let out = std::process::Command::new("/bin/sh")
            .arg("-n")
            .arg("-c")
            .arg(
                SCRIPT
                    .replace("{N}", "_sshmcp_sudo_x")
                    .replace("{AS_ROOT}", kill::AS_ROOT),
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
