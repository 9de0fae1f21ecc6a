//! `sshmcp doctor`: checks what sshmcp needs on this machine, one line each, and says how to
//! fix every problem it finds.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use sshmcp_local::client::{ClientError, Connection, connect_existing};
use sshmcp_local::paths::{self, RuntimePaths};

/// Exit status when a check failed (see `cli::EXIT_CODES`).
const EXIT_PROBLEM: u8 = 4;

/// One check's outcome.
enum Finding {
    Ok(String),
    Problem { what: String, fix: String },
}

fn problem(what: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding::Problem {
        what: what.into(),
        fix: fix.into(),
    }
}

pub async fn run(
    paths: &RuntimePaths,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let answered = connect_existing(paths).await;
    let (status, policy) = match &answered {
        Ok(Some(c)) => (ask_status(c).await, ask_policy(c).await),
        _ => (None, None),
    };
    let checks = checks(paths, answered, status, policy.as_ref());
    let problems = checks
        .iter()
        .filter(|(_, finding)| matches!(finding, Finding::Problem { .. }))
        .count();
    if json {
        let rows: Vec<serde_json::Value> = checks
            .iter()
            .map(|(name, finding)| match finding {
                Finding::Ok(said) => serde_json::json!({"check": name, "ok": true, "said": said}),
                Finding::Problem { what, fix } => serde_json::json!({
                    "check": name, "ok": false, "problem": what, "fix": fix
                }),
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(match problems {
            0 => ExitCode::SUCCESS,
            _ => ExitCode::from(EXIT_PROBLEM),
        });
    }
    for (name, finding) in checks {
        match finding {
            Finding::Ok(said) => writeln!(out, "ok    {name:<12}{said}")?,
            Finding::Problem { what, fix } => {
                // A cause of several lines (a TOML error) stays in the column it began in.
                let mut lines = what.lines();
                writeln!(out, "FAIL  {name:<12}{}", lines.next().unwrap_or_default())?;
                for line in lines {
                    writeln!(out, "      {:<12}{line}", "")?;
                }
                writeln!(out, "      {:<12}fix: {fix}", "")?;
            }
        }
    }
    if let Some(report) = &policy {
        for line in crate::render::policy_entries(report).lines() {
            writeln!(out, "      {:<12}{line}", "")?;
        }
    }
    Ok(match problems {
        0 => ExitCode::SUCCESS,
        n => {
            writeln!(out, "{n} problem(s) found")?;
            ExitCode::from(EXIT_PROBLEM)
        }
    })
}

/// The running daemon's status (its settings count, not the environment's).
async fn ask_status(c: &Connection) -> Option<sshmcp_proto::DaemonStatus> {
    let ctx = sshmcp_proto::service::context_with_timeout(std::time::Duration::from_secs(10));
    c.client.status(ctx).await.ok()
}

/// The running daemon's policy, when it is new enough to say it.
async fn ask_policy(c: &Connection) -> Option<sshmcp_proto::policy::PolicyReport> {
    if !c.capabilities.iter().any(|t| t == "policy") {
        return None;
    }
    let ctx = sshmcp_proto::service::context_with_timeout(std::time::Duration::from_secs(10));
    c.client.policy(ctx).await.ok()
}

/// Every check, named, in the order they print.
fn checks(
    paths: &RuntimePaths,
    answered: Result<Option<Connection>, ClientError>,
    status: Option<sshmcp_proto::DaemonStatus>,
    policy: Option<&sshmcp_proto::policy::PolicyReport>,
) -> Vec<(&'static str, Finding)> {
    let state_dir = paths::state_dir_from_env();
    // The settings that count are the running daemon's; without one, those a daemon
    // started now would take (its flags, environment and config file: it says them).
    let would = check_config();
    let (root, ssh_config_file) = match (&status, &would) {
        (Some(s), _) => (
            Some(PathBuf::from(&s.default_local_root)),
            s.ssh_config.as_ref().map(PathBuf::from),
        ),
        (None, Ok(would)) => (would.local_root.clone(), would.ssh_config.clone()),
        // A daemon would not start (the config line says why): what this environment asks
        // for, not the defaults it would not take.
        (None, Err(_)) => (
            paths::path_from_env("SSHMCP_LOCAL_ROOT").or_else(paths::default_local_root),
            paths::path_from_env("SSHMCP_SSH_CONFIG"),
        ),
    };
    vec![
        (
            "ssh",
            tool_version("ssh", "-V", "apt-get install openssh-client"),
        ),
        ("rsync", rsync()),
        (
            "runtime dir",
            match paths.check() {
                Ok(()) => private_dir(&paths.dir),
                Err(why) => problem(
                    why,
                    "set SSHMCP_RUNTIME_DIR (or runtime-dir in the config file) to an absolute \
                     directory of its own",
                ),
            },
        ),
        (
            "socket",
            match paths.check() {
                Ok(()) => socket(&paths.socket()),
                Err(_) => {
                    Finding::Ok("not looked for: the runtime directory is refused (above)".into())
                }
            },
        ),
        (
            "state dir",
            match &state_dir {
                Some(dir) => private_dir(dir),
                None => problem("none: neither SSHMCP_STATE_DIR nor HOME is set", "set HOME"),
            },
        ),
        ("local root", local_root(root)),
        ("ssh config", ssh_config(ssh_config_file)),
        ("config", config_finding(would)),
        ("daemon", daemon(answered)),
        ("policy", policy_finding(policy)),
    ]
}

/// Whether a daemon started now would take its config file.
fn config_finding(would: Result<WouldStart, String>) -> Finding {
    match would {
        Ok(would) => Finding::Ok(match would.config_file {
            Some(file) => format!(
                "{}: a daemon started now reads it without error",
                file.display()
            ),
            None => "none; a daemon started now takes the defaults".into(),
        }),
        // A directory's mode stops a start as surely as a bad file, but its fix is its own
        // line's.
        Err(why) if why.contains("runtime directory") || why.contains("state directory") => {
            problem(why, "correct that directory as its own line above says")
        }
        Err(why) => problem(
            why,
            "correct the config file, then sshmcp daemon restart (or reload for the policy)",
        ),
    }
}

/// What a daemon started now, from this environment, would take: its local root, ssh
/// config and config file, as `sshmcpd --check-config` says them (each none when it does
/// not say).
pub struct WouldStart {
    pub local_root: Option<PathBuf>,
    pub ssh_config: Option<PathBuf>,
    pub config_file: Option<PathBuf>,
}

/// Whether a daemon started now, from this environment, would accept its settings and the
/// config file (`sshmcpd --check-config`), and what it would take: a running daemon read
/// them when it started, and a file edited since may stop the next one.
pub fn check_config() -> Result<WouldStart, String> {
    let program = sshmcp_local::client::daemon_program();
    match Command::new(&program).arg("--check-config").output() {
        Ok(out) if out.status.success() => {
            let said: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            let path = |key: &str| said[key].as_str().map(PathBuf::from);
            Ok(WouldStart {
                local_root: path("local_root"),
                ssh_config: path("ssh_config"),
                config_file: path("config_file"),
            })
        }
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr)
            .trim()
            .trim_start_matches("sshmcpd: ")
            .to_string()),
        Err(e) => Err(format!("cannot run {}: {e}", program.display())),
    }
}

/// The first line a tool prints about its version (on either stream: `ssh -V` uses stderr).
/// The rsync a daemon started from this environment runs for transfers.
fn rsync() -> Finding {
    use sshmcp_local::rsync;
    match rsync::find() {
        Ok(found) => Finding::Ok(format!("{} ({})", found.version, found.path.display())),
        Err(none) => problem(
            none.what(),
            format!(
                "{} (transfers need it here and on each host)",
                rsync::INSTALL
            ),
        ),
    }
}

fn tool_version(tool: &str, flag: &str, install: &str) -> Finding {
    match Command::new(tool).arg(flag).output() {
        Ok(out) if out.status.success() => {
            let text = [out.stdout, out.stderr].concat();
            let text = String::from_utf8_lossy(&text);
            Finding::Ok(text.lines().next().unwrap_or("").trim().to_string())
        }
        Ok(out) => problem(
            format!("`{tool} {flag}` failed ({})", out.status),
            format!("reinstall it: {install}"),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            problem("not found on PATH", install.to_string())
        }
        Err(e) => problem(format!("cannot run {tool}: {e}"), install.to_string()),
    }
}

/// A directory only this user may use: ours, not a symlink, mode without group or other bits.
/// One that does not exist yet is fine: it is made (0700) on first use.
fn private_dir(dir: &Path) -> Finding {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Finding::Ok(format!("{} (made on first use)", dir.display()))
        }
        Err(e) => problem(
            format!("{}: {e}", dir.display()),
            "check the path and its parents",
        ),
        Ok(meta) => match private(&meta, true) {
            None => Finding::Ok(format!(
                "{} (mode {:o})",
                dir.display(),
                meta.mode() & 0o7777
            )),
            // Only its owner (or root) can change or remove another user's directory.
            Some(why) if meta.uid() != nix::unistd::geteuid().as_raw() => problem(
                format!("{}: {why}", dir.display()),
                format!(
                    "have root remove {0} (it is made again), or choose another with \
                     `runtime-dir` in the config file or SSHMCP_RUNTIME_DIR",
                    dir.display()
                ),
            ),
            Some(why) => problem(
                format!("{}: {why}", dir.display()),
                format!(
                    "chmod 700 {0} (or remove it: it is made again)",
                    dir.display()
                ),
            ),
        },
    }
}

/// Why `meta` is not private to this user, if it is not.
fn private(meta: &std::fs::Metadata, dir: bool) -> Option<String> {
    let me = nix::unistd::geteuid().as_raw();
    if meta.file_type().is_symlink() {
        return Some("a symlink".into());
    }
    if dir && !meta.is_dir() {
        return Some("not a directory".into());
    }
    if meta.uid() != me {
        return Some(format!("owned by uid {}, not {me}", meta.uid()));
    }
    let mode = meta.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| format!("mode {mode:o} lets other users in"))
}

fn socket(path: &Path) -> Finding {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Finding::Ok("none (the daemon makes it when it starts)".into())
        }
        Err(e) => problem(format!("{}: {e}", path.display()), "sshmcp daemon restart"),
        Ok(meta) => match private(&meta, false) {
            None => Finding::Ok(format!(
                "{} (mode {:o})",
                path.display(),
                meta.mode() & 0o777
            )),
            Some(why) => problem(
                format!("{}: {why}", path.display()),
                "sshmcp daemon restart (the new daemon binds it 0600; sessions are kept)",
            ),
        },
    }
}

/// The default local root: where agents' files go when their client sets none.
fn local_root(root: Option<PathBuf>) -> Finding {
    let Some(root) = root else {
        return problem(
            "none: set SSHMCP_LOCAL_ROOT or HOME",
            "set SSHMCP_LOCAL_ROOT",
        );
    };
    if let Err(why) = sshmcp_local::paths::check_local_root(&root) {
        return problem(
            format!("{} ({why})", root.display()),
            "point SSHMCP_LOCAL_ROOT (or local-root in config.toml) at a folder of its own",
        );
    }
    match std::fs::metadata(&root) {
        Ok(meta) if meta.is_dir() => Finding::Ok(root.display().to_string()),
        Ok(_) => problem(
            format!("{} is not a directory", root.display()),
            "move that file away, or choose another local root",
        ),
        Err(_) => Finding::Ok(format!("{} (made on first use)", root.display())),
    }
}

/// Whether OpenSSH accepts the configuration the daemon hands every ssh.
fn ssh_config(config: Option<PathBuf>) -> Finding {
    let mut cmd = Command::new("ssh");
    if let Some(config) = &config {
        cmd.arg("-F").arg(config);
    }
    let shown = config
        .as_ref()
        .map_or("the user's default".to_string(), |c| {
            c.display().to_string()
        });
    match cmd.args(["-G", "sshmcp-doctor.invalid"]).output() {
        Ok(out) if out.status.success() => Finding::Ok(format!("{shown} parses")),
        Ok(out) => problem(
            format!(
                "{shown}: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .next()
                    .unwrap_or("ssh -G failed")
            ),
            "correct the line ssh names (`ssh -G HOST` shows what ssh reads)",
        ),
        Err(_) => problem("cannot run ssh to read it", "install openssh-client"),
    }
}

/// The running daemon's policy: how many entries, from where, and a failed reload.
fn policy_finding(report: Option<&sshmcp_proto::policy::PolicyReport>) -> Finding {
    let Some(report) = report else {
        return Finding::Ok("read by the daemon when it starts".into());
    };
    let source = report.source.as_deref().unwrap_or("no config file");
    match &report.reload_error {
        Some(e) => problem(
            format!("the last reload failed, the policy before stays in force: {e}"),
            "fix the config file, then sshmcp daemon reload",
        ),
        None => Finding::Ok(format!("{} entries ({source})", report.entries.len())),
    }
}

fn daemon(answered: Result<Option<Connection>, ClientError>) -> Finding {
    match answered {
        Ok(Some(c)) => Finding::Ok(format!(
            "running (pid {}, version {}, protocol {})",
            c.hello.pid, c.hello.daemon_version, c.hello.protocol_version
        )),
        Ok(None) => Finding::Ok("not running (clients start it on first use)".into()),
        Err(e @ ClientError::VersionMismatch { daemon, client }) => {
            let fix = match daemon > client {
                true => "restart the MCP clients, and use the sshmcp installed with the daemon",
                false => "sshmcp daemon restart (sessions are kept)",
            };
            problem(e.to_string(), fix)
        }
        // The runtime directory's own check reports why; no daemon there is believed.
        Err(ClientError::RuntimeDir { .. }) => {
            Finding::Ok("not asked: its runtime directory is refused (above)".into())
        }
        Err(e) => problem(
            e.to_string(),
            "sshmcp daemon logs shows what the daemon said",
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// The finding's text and, for a problem, its fix.
    fn said(finding: Finding) -> (String, Option<String>) {
        match finding {
            Finding::Ok(text) => (text, None),
            Finding::Problem { what, fix } => (what, Some(fix)),
        }
    }

    /// A config a daemon would take is fine, naming its file; a refused directory is that
    /// directory's line's to fix; any other refusal is the config file's.
    #[test]
    fn the_config_check_sends_each_refusal_to_its_fix() {
        let would = |file: Option<&str>| WouldStart {
            local_root: None,
            ssh_config: None,
            config_file: file.map(PathBuf::from),
        };
        let (text, fix) = said(config_finding(Ok(would(Some("/c.toml")))));
        assert_eq!(
            (text.as_str(), fix),
            ("/c.toml: a daemon started now reads it without error", None)
        );
        assert!(said(config_finding(Ok(would(None)))).0.starts_with("none"));
        let (_, fix) = said(config_finding(Err(
            "the runtime directory /r is mode 755".into()
        )));
        assert_eq!(
            fix.unwrap(),
            "correct that directory as its own line above says"
        );
        let (what, fix) = said(config_finding(Err("c.toml: line 1: bad key".into())));
        assert_eq!(what, "c.toml: line 1: bad key");
        assert!(fix.unwrap().starts_with("correct the config file"));
    }

    /// A policy whose last reload failed is a problem (the one before stays); else its
    /// entries are counted, and a daemon not asked reads it when it starts.
    #[test]
    fn the_policy_check_says_whether_the_last_reload_took() {
        let report = |error: Option<&str>| sshmcp_proto::policy::PolicyReport {
            source: Some("/c.toml".into()),
            entries: Vec::new(),
            reload_error: error.map(String::from),
        };
        assert_eq!(
            said(policy_finding(Some(&report(None)))).0,
            "0 entries (/c.toml)"
        );
        let (what, fix) = said(policy_finding(Some(&report(Some("line 3")))));
        assert!(what.ends_with("line 3"), "{what}");
        assert_eq!(
            fix.unwrap(),
            "fix the config file, then sshmcp daemon reload"
        );
        assert!(said(policy_finding(None)).1.is_none());
    }

    /// A daemon older than this CLI is restarted; a newer one means the clients and the CLI
    /// are the old ones; none running is fine, and one behind a refused directory is not
    /// asked.
    #[test]
    fn a_version_mismatch_is_fixed_on_the_older_side() {
        let mismatch = |daemon, client| daemon_finding(daemon, client);
        assert_eq!(mismatch(7, 8), "sshmcp daemon restart (sessions are kept)");
        assert!(mismatch(9, 8).starts_with("restart the MCP clients"));
        assert!(said(daemon(Ok(None))).0.starts_with("not running"));
        let refused = ClientError::RuntimeDir {
            dir: "/r".into(),
            reason: std::io::Error::other("mode 755"),
        };
        assert!(said(daemon(Err(refused))).0.starts_with("not asked"));
    }

    fn daemon_finding(daemon_version: u32, client: u32) -> String {
        let e = ClientError::VersionMismatch {
            daemon: daemon_version,
            client,
        };
        said(daemon(Err(e))).1.expect("a problem")
    }

    /// Only a directory of this user's that no one else may enter is private; a file where a
    /// directory belongs, a symlink, and a mode open to others are each named.
    #[test]
    fn a_private_directory_is_this_users_alone() {
        let dir = tempfile::tempdir().unwrap();
        let meta = |p: &Path| std::fs::symlink_metadata(p).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(private(&meta(dir.path()), true), None);
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o750)).unwrap();
        assert_eq!(
            private(&meta(dir.path()), true).unwrap(),
            "mode 750 lets other users in"
        );
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(private(&meta(&file), true).unwrap(), "not a directory");
        assert_eq!(private(&meta(&file), false), None);
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(private(&meta(&link), false).unwrap(), "a symlink");
    }
}
