//! Daemon settings: flag, then `SSHMCP_*` environment, then the config file, then default.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sshmcp_local::paths::{self, RuntimePaths};
use sshmcp_proto::limits::{
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SPOOL_BYTES, DEFAULT_MAX_TRANSFERS,
};

/// The smallest `--max-output-bytes`: the longest UTF-8 character.
const MIN_OUTPUT_BYTES: u64 = 4;

/// The largest `--max-output-bytes`: both streams of one answer must fit a wire frame with room
/// to spare.
pub const MAX_OUTPUT_BYTES_CEILING: u64 = 16 * 1024 * 1024;

/// Channels each session keeps waiting for a command by default, and at most: they share the
/// session's channel slots (8, below sshd's usual MaxSessions of 10) with running commands.
/// One is enough for an agent's commands one after another; more (channels of commands that
/// ran side by side, idle again) wait only briefly (see `remote::standby`).
pub const DEFAULT_STANDBY_CHANNELS: usize = 1;
pub const MAX_STANDBY_CHANNELS: usize = 4;

/// Seconds a daemon with no session and no client waits before it exits by default. Nothing
/// is lost by exiting then (the next client starts a daemon again); a session, however idle,
/// keeps the daemon.
pub const DEFAULT_IDLE_EXIT_SECS: u64 = 900;

/// Command-line flags; clap reads the environment variable of each one it is not given.
#[derive(Debug, Default, clap::Parser)]
#[command(
    name = "sshmcpd",
    version,
    about = "The sshmcp daemon: owns OpenSSH masters for MCP agents"
)]
pub struct Flags {
    /// Directory of the socket, lock and pidfile.
    #[arg(long, env = "SSHMCP_RUNTIME_DIR")]
    pub runtime_dir: Option<PathBuf>,
    /// Directory of logs and the session record.
    #[arg(long, env = "SSHMCP_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Default local root for clients that send none.
    #[arg(long, env = "SSHMCP_LOCAL_ROOT")]
    pub local_root: Option<PathBuf>,
    /// OpenSSH client configuration handed to every ssh as `-F FILE`.
    #[arg(long, env = "SSHMCP_SSH_CONFIG")]
    pub ssh_config: Option<PathBuf>,
    /// Most sessions the daemon holds at once, counting those still authenticating.
    #[arg(long, env = "SSHMCP_MAX_SESSIONS")]
    pub max_sessions: Option<u32>,
    /// Bytes of each output stream an answer keeps (head and tail halves).
    #[arg(long, env = "SSHMCP_MAX_OUTPUT_BYTES")]
    pub max_output_bytes: Option<u64>,
    /// Most transfers active at once per session.
    #[arg(long, env = "SSHMCP_MAX_TRANSFERS")]
    pub max_transfers: Option<u32>,
    /// Bytes each spooled stream may take on the local disk (`spool_output`).
    #[arg(long, env = "SSHMCP_MAX_SPOOL_BYTES")]
    pub max_spool_bytes: Option<u64>,
    /// Channels each session keeps waiting for a command (0 to 4): a command that takes one
    /// skips opening a channel and starting the login shell. 0: every command opens its own.
    #[arg(long, env = "SSHMCP_STANDBY_CHANNELS")]
    pub standby_channels: Option<usize>,
    /// Let forwards listen on addresses other than loopback (127.0.0.1, ::1, localhost): then
    /// anyone who can reach this machine (local forwards, SOCKS) or the remote host (remote
    /// forwards) on that address uses the session's SSH connection. Off by default.
    #[arg(long, env = "SSHMCP_ALLOW_PUBLIC_FORWARDS", value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_public_forwards: bool,
    /// Keep no audit trail of calls (`<state dir>/audit.jsonl`, one line per call that
    /// reaches a host). On by default. A flag or the config file's `audit = false`, never the
    /// environment: an auto-started daemon takes its environment from whichever client
    /// started it, and the trail is the person's, not a client's. The trail still records
    /// each start, saying it keeps no calls.
    #[arg(long)]
    pub no_audit: bool,
    /// Offer ciphers in OpenSSH's own order. By default, when the configuration leaves
    /// OpenSSH's cipher list as it is and this CPU does AES in hardware, masters offer
    /// AES-GCM first (the same ciphers, cheaper for bulk data on such CPUs); a configuration
    /// cannot tell "OpenSSH's order, on purpose" from "not configured", this can.
    #[arg(long, env = "SSHMCP_KEEP_CIPHER_ORDER", value_parser = clap::builder::BoolishValueParser::new())]
    pub keep_cipher_order: bool,
    /// Seconds without any session or client after which the daemon exits; 0: never.
    #[arg(long, env = "SSHMCP_IDLE_EXIT")]
    pub idle_exit: Option<u64>,
    /// Log filter, e.g. `info` or `debug`.
    #[arg(long, env = "SSHMCP_LOG")]
    pub log: Option<String>,
    /// Config file (default `$XDG_CONFIG_HOME/sshmcp/config.toml`).
    #[arg(long, env = "SSHMCP_CONFIG")]
    pub config: Option<PathBuf>,
    /// Write one status line to stdout once listening (used by clients that start us).
    #[arg(long, hide = true)]
    pub report_ready: bool,
    /// Only read the settings and the config file, say whether a daemon could start with
    /// them, and exit (what `sshmcp daemon restart` and `sshmcp doctor` ask first).
    #[arg(long)]
    pub check_config: bool,
}

/// The config file's keys: the same settings as the flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileSettings {
    runtime_dir: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    local_root: Option<PathBuf>,
    ssh_config: Option<PathBuf>,
    max_sessions: Option<u32>,
    max_output_bytes: Option<u64>,
    max_transfers: Option<u32>,
    max_spool_bytes: Option<u64>,
    standby_channels: Option<usize>,
    idle_exit: Option<u64>,
    allow_public_forwards: Option<bool>,
    audit: Option<bool>,
    keep_cipher_order: Option<bool>,
    log: Option<String>,
    /// The `[[policy]]` entries (see `policy`).
    #[serde(default)]
    policy: Vec<crate::policy::Entry>,
}

/// The settings in force.
#[derive(Debug, Clone)]
pub struct Settings {
    pub runtime: RuntimePaths,
    pub state_dir: PathBuf,
    pub local_root: PathBuf,
    pub ssh_config: Option<PathBuf>,
    pub max_sessions: u32,
    pub max_output_bytes: u64,
    pub max_transfers: u32,
    pub max_spool_bytes: u64,
    pub standby_channels: usize,
    /// When an idle daemon exits (see [`DEFAULT_IDLE_EXIT_SECS`]); `None`: never.
    pub idle_exit: Option<std::time::Duration>,
    /// Forwards may listen beyond loopback.
    pub allow_public_forwards: bool,
    /// The audit trail is kept (see `audit`).
    pub audit: bool,
    /// Masters offer ciphers in OpenSSH's own order (see `session::ciphers`).
    pub keep_cipher_order: bool,
    pub log: String,
    /// The config file read, if any: `reload_policy` reads the same one.
    pub config_file: Option<PathBuf>,
    /// The per-host policy as the config file gave it at start.
    pub policy: crate::policy::Policy,
}

impl Settings {
    pub fn load(flags: &Flags) -> Result<Self, String> {
        let config_file = flags.config.clone().or_else(paths::default_config_file);
        // A file named by flag or environment must exist; the default one may not.
        let mut file = match &config_file {
            Some(path) => read_file(path, flags.config.is_some())?,
            None => FileSettings::default(),
        };
        let policy = policy_of(&mut file, config_file.as_deref())?;
        let state_dir = flags
            .state_dir
            .clone()
            .or(file.state_dir)
            .or_else(paths::state_dir_from_env)
            .ok_or("no state directory: set SSHMCP_STATE_DIR or HOME")?;
        let local_root = flags
            .local_root
            .clone()
            .or(file.local_root)
            .or_else(paths::default_local_root)
            .ok_or("no local root: set SSHMCP_LOCAL_ROOT or HOME")?;
        let settings = Self {
            runtime: RuntimePaths::resolve(flags.runtime_dir.clone().or(file.runtime_dir)),
            state_dir,
            local_root,
            ssh_config: flags.ssh_config.clone().or(file.ssh_config),
            max_sessions: flags
                .max_sessions
                .or(file.max_sessions)
                .unwrap_or(DEFAULT_MAX_SESSIONS),
            max_output_bytes: flags
                .max_output_bytes
                .or(file.max_output_bytes)
                .unwrap_or(DEFAULT_MAX_OUTPUT_BYTES),
            max_transfers: flags
                .max_transfers
                .or(file.max_transfers)
                .unwrap_or(DEFAULT_MAX_TRANSFERS),
            max_spool_bytes: flags
                .max_spool_bytes
                .or(file.max_spool_bytes)
                .unwrap_or(DEFAULT_MAX_SPOOL_BYTES),
            standby_channels: flags
                .standby_channels
                .or(file.standby_channels)
                .unwrap_or(DEFAULT_STANDBY_CHANNELS),
            idle_exit: Some(
                flags
                    .idle_exit
                    .or(file.idle_exit)
                    .unwrap_or(DEFAULT_IDLE_EXIT_SECS),
            )
            .filter(|secs| *secs > 0)
            .map(std::time::Duration::from_secs),
            allow_public_forwards: flags.allow_public_forwards
                || file.allow_public_forwards.unwrap_or(false),
            audit: !flags.no_audit && file.audit.unwrap_or(true),
            keep_cipher_order: flags.keep_cipher_order || file.keep_cipher_order.unwrap_or(false),
            log: flags
                .log
                .clone()
                .or(file.log)
                .unwrap_or_else(|| "info".into()),
            config_file,
            policy,
        };
        settings.check()?;
        Ok(settings)
    }

    fn check(&self) -> Result<(), String> {
        if self.max_sessions == 0 {
            return Err("max-sessions must be at least 1".into());
        }
        if self.max_transfers == 0 {
            return Err("max-transfers must be at least 1".into());
        }
        if self.standby_channels > MAX_STANDBY_CHANNELS {
            return Err(format!(
                "standby-channels must be at most {MAX_STANDBY_CHANNELS}"
            ));
        }
        if self.max_output_bytes > MAX_OUTPUT_BYTES_CEILING {
            return Err(format!(
                "max-output-bytes must be at most {MAX_OUTPUT_BYTES_CEILING}"
            ));
        }
        // A cap of 0 left a file reader at the same offset for ever; below the longest
        // character (4 bytes) a character would come in pieces, as base64.
        if self.max_output_bytes < MIN_OUTPUT_BYTES {
            return Err(format!(
                "max-output-bytes must be at least {MIN_OUTPUT_BYTES}"
            ));
        }
        sshmcp_local::paths::check_local_root(&self.local_root)
    }

    /// The config file's policy as it reads now; the file's other settings need a restart.
    /// A file that went missing is an error, not an empty policy: one moved away for a
    /// moment (an editor saving it) must not lift every limit.
    pub fn reload_policy(&self) -> Result<crate::policy::Policy, String> {
        let mut file = match &self.config_file {
            Some(path) => read_file(path, true)?,
            None => FileSettings::default(),
        };
        policy_of(&mut file, self.config_file.as_deref())
    }

    pub fn log_file(&self) -> PathBuf {
        self.state_dir.join(paths::LOG_FILE)
    }

    /// The host keys the policy's entries have seen (see `policy::LearnedKeys`).
    pub fn learned_keys_file(&self) -> PathBuf {
        self.state_dir.join("policy-keys.json")
    }

    /// The sessions the person closed (see `Registry::stopped_by_person`).
    pub fn person_stopped_file(&self) -> PathBuf {
        self.state_dir.join("closed-by-person.json")
    }

    /// Where each master's own stderr goes (private: it is never shown to callers).
    pub fn masters_log_dir(&self) -> PathBuf {
        self.state_dir.join("masters")
    }

    /// Beside the masters' sockets it describes: a daemon of another runtime directory
    /// (another login's `XDG_RUNTIME_DIR`) has other masters and a record of its own, and a
    /// reboot that ends the masters ends the record too.
    pub fn record_file(&self) -> PathBuf {
        self.runtime.record()
    }
}

/// The file's `[[policy]]` entries, checked, with the file named in any error.
fn policy_of(
    file: &mut FileSettings,
    path: Option<&Path>,
) -> Result<crate::policy::Policy, String> {
    crate::policy::Policy::new(std::mem::take(&mut file.policy)).map_err(|e| match path {
        Some(path) => format!("{}: {e}", path.display()),
        None => e,
    })
}

fn read_file(path: &Path, required: bool) -> Result<FileSettings, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
            Ok(FileSettings::default())
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags_with_file(text: &str) -> (Flags, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        let flags = Flags {
            config: Some(path),
            state_dir: Some(dir.path().join("state")),
            local_root: Some(dir.path().join("root")),
            ..Flags::default()
        };
        (flags, dir)
    }

    #[test]
    fn flag_beats_file_beats_default() {
        let (mut flags, _dir) = flags_with_file("max-sessions = 7\nmax-output-bytes = 99\n");
        flags.max_output_bytes = Some(5);
        let s = Settings::load(&flags).unwrap();
        assert_eq!(s.max_sessions, 7);
        assert_eq!(s.max_output_bytes, 5);
        assert_eq!(s.max_transfers, DEFAULT_MAX_TRANSFERS);
        assert_eq!(
            s.idle_exit,
            Some(std::time::Duration::from_secs(DEFAULT_IDLE_EXIT_SECS))
        );
        let (flags, _dir) = flags_with_file("idle-exit = 0\n");
        assert_eq!(Settings::load(&flags).unwrap().idle_exit, None, "0: never");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let (flags, _dir) = flags_with_file("max-session = 7\n");
        assert!(Settings::load(&flags).is_err());
        let (flags, _dir) = flags_with_file("max-sessions = 0\n");
        assert!(Settings::load(&flags).is_err());
        // The output cap at its floor, and one below it.
        let (flags, _dir) = flags_with_file("max-output-bytes = 4\n");
        assert_eq!(Settings::load(&flags).unwrap().max_output_bytes, 4);
        let (flags, _dir) = flags_with_file("max-output-bytes = 3\n");
        let e = Settings::load(&flags).unwrap_err();
        assert!(e.contains("at least 4"), "{e}");
    }
}
