//! One test's world: a temp root holding the sshd, the daemon's runtime and state
//! directories and the local root, a cleared environment pointing every binary at them, and a
//! guard that stops the daemon (printing its log when the test failed).

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output};

use crate::bins;
use crate::mcp::McpClient;
use crate::netns::NetnsPair;
use crate::sshd::{Sshd, SshdOptions};

pub struct TestEnv {
    pub root: tempfile::TempDir,
    pub sshd: Sshd,
    pub runtime_dir: PathBuf,
    pub state_dir: PathBuf,
    pub local_root: PathBuf,
    pub home: PathBuf,
    extra: Vec<(String, String)>,
    /// Every session key an MCP client of this world received; none may reach a file.
    issued_keys: crate::mcp::IssuedKeys,
    /// When set, sshd runs in the server namespace and the shim (so the daemon and its
    /// masters) in the client namespace. Declared last: dropped after sshd is stopped.
    pub netns: Option<NetnsPair>,
}

impl TestEnv {
    pub fn new() -> Self {
        Self::with(&SshdOptions::default(), &[])
    }

    /// A world split by a network link: sshd in one namespace, the shim, daemon and masters
    /// in another, joined by a veth pair the test can take down. Root only.
    pub fn across_network(extra: &[(&str, &str)]) -> Self {
        let pair = NetnsPair::create();
        let opts = SshdOptions {
            netns: Some(pair.server_ns.clone()),
            ..SshdOptions::default()
        };
        let mut env = Self::with(&opts, extra);
        env.netns = Some(pair);
        env
    }

    /// A world whose sshd has `opts` and whose binaries get `extra` environment variables.
    pub fn with(opts: &SshdOptions, extra: &[(&str, &str)]) -> Self {
        let root = tempfile::Builder::new()
            .prefix("sshmcp-")
            .tempdir_in("/tmp")
            .expect("temp root");
        // The test user's sshd must traverse into root/sshd.
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let sshd = Sshd::start(&root.path().join("sshd"), opts);
        let home = root.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        Self {
            runtime_dir: root.path().join("run"),
            state_dir: root.path().join("state"),
            local_root: root.path().join("local"),
            home,
            sshd,
            root,
            extra: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            issued_keys: Default::default(),
            netns: None,
        }
    }

    /// The whole environment of every binary a test starts: nothing leaks in from the
    /// developer's shell.
    pub fn env_vars(&self) -> Vec<(String, String)> {
        let mut vars = vec![
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            ),
            ("HOME".to_string(), self.home.display().to_string()),
            (
                "SSHMCP_RUNTIME_DIR".to_string(),
                self.runtime_dir.display().to_string(),
            ),
            (
                "SSHMCP_STATE_DIR".to_string(),
                self.state_dir.display().to_string(),
            ),
            (
                "SSHMCP_LOCAL_ROOT".to_string(),
                self.local_root.display().to_string(),
            ),
            (
                "SSHMCP_SSH_CONFIG".to_string(),
                self.sshd.ssh_config.display().to_string(),
            ),
            ("SSHMCP_LOG".to_string(), "debug".to_string()),
        ];
        for (k, v) in &self.extra {
            vars.retain(|(name, _)| name != k);
            vars.push((k.clone(), v.clone()));
        }
        vars.retain(|(_, v)| !v.is_empty());
        vars
    }

    /// Starts `sshmcp-mcp` and completes the MCP handshake.
    pub async fn mcp(&self) -> McpClient {
        self.mcp_with_env(&self.env_vars()).await
    }

    /// Starts `sshmcp-mcp` with exactly `vars` for its environment, as a launcher that passes
    /// little of the user's environment starts it.
    pub async fn mcp_with_env(&self, vars: &[(String, String)]) -> McpClient {
        self.mcp_started(vars, &[]).await
    }

    /// Starts `sshmcp-mcp` with the flags `args`, as a person's MCP client config passes them.
    pub async fn mcp_with_args(&self, args: &[&str]) -> McpClient {
        self.mcp_started(&self.env_vars(), args).await
    }

    async fn mcp_started(&self, vars: &[(String, String)], args: &[&str]) -> McpClient {
        let mut argv = match &self.netns {
            Some(pair) => NetnsPair::exec_in(&pair.client_ns),
            None => Vec::new(),
        };
        argv.push(bins::path("sshmcp-mcp").display().to_string());
        argv.extend(args.iter().map(|arg| arg.to_string()));
        McpClient::start(&argv, vars, &self.logs_dir(), self.issued_keys.clone()).await
    }

    /// Runs `sshmcp-mcp` with the flags `args` and no MCP client, to completion: for flags it
    /// refuses before serving.
    pub fn mcp_refusing(&self, args: &[&str]) -> Output {
        Command::new(bins::path("sshmcp-mcp"))
            .args(args)
            .env_clear()
            .envs(self.env_vars())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run sshmcp-mcp")
    }

    /// Runs the `sshmcp` CLI to completion.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.cli_with(args, &[])
    }

    /// [`cli`](Self::cli) with the variables `extra` set over this world's.
    pub fn cli_with(&self, args: &[&str], extra: &[(&str, &OsStr)]) -> Output {
        Command::new(bins::path("sshmcp"))
            .args(args)
            .env_clear()
            .envs(self.env_vars())
            .envs(extra.iter().copied())
            .output()
            .expect("run sshmcp")
    }

    /// The pid recorded by the running daemon, if any (the pidfile's first word).
    pub fn daemon_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.runtime_dir.join("sshmcpd.pid"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// The files of a session's spool directory under the local root (its handles' output
    /// and kept spools), sorted; none when the directory is gone.
    pub fn spool_files(&self, session_id: &str) -> Vec<PathBuf> {
        let dir = self.local_root.join(".sshmcp/spool").join(session_id);
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|dir| dir.flatten().map(|f| f.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    }

    /// Kills the daemon with SIGKILL, as a crash would, and waits until it is gone.
    pub fn crash_daemon(&self) -> u32 {
        let pid = self.daemon_pid().expect("a running daemon");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill the daemon");
        assert!(crate::process::gone(pid), "the daemon died");
        pid
    }

    /// Where each shim's stderr is kept (outside the daemon's private state directory).
    pub fn logs_dir(&self) -> PathBuf {
        self.root.path().join("logs")
    }

    /// Waits (up to 10 s) for the daemon's log to contain `needle`: the log is written by a
    /// background thread, a little after the event it records.
    pub fn daemon_log_shows(&self, needle: &str) -> bool {
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < give_up {
            if self.daemon_log().contains(needle) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    }

    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.state_dir.join("sshmcpd.log")).unwrap_or_default()
    }
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("----- daemon log -----\n{}", self.daemon_log());
            let sshd = self.sshd.log_text();
            let tail: Vec<&str> = sshd.lines().rev().take(40).collect();
            eprintln!("----- sshd log (last lines) -----");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
        // An orderly stop closes every master this test opened.
        let _ = self.cli(&["daemon", "stop"]);
        if !std::thread::panicking() {
            self.assert_no_key_in_files();
        }
    }
}

/// Above this size a file under the test's directories is a transfer test's payload.
const PAYLOAD_BYTES: u64 = 32 << 20;

impl TestEnv {
    /// Session keys are secrets: after every test, no file the daemon, the shims or the
    /// spool wrote may contain one.
    fn assert_no_key_in_files(&self) {
        let keys = self.issued_keys.lock().unwrap().clone();
        let dirs = [
            &self.state_dir,
            &self.runtime_dir,
            &self.local_root,
            &self.logs_dir(),
        ];
        for file in dirs.iter().flat_map(|d| files_under(d)) {
            // Files this large are the payloads transfer tests wrote themselves (random or
            // sparse bytes); reading them would cost seconds per test.
            if std::fs::metadata(&file).is_ok_and(|m| m.len() > PAYLOAD_BYTES) {
                continue;
            }
            let text =
                String::from_utf8_lossy(&std::fs::read(&file).unwrap_or_default()).into_owned();
            for key in &keys {
                assert!(
                    !text.contains(key.as_str()),
                    "a session key leaked into {}",
                    file.display()
                );
            }
        }
    }
}

/// Every regular file below `dir` (none when it does not exist). Symlinks are not followed:
/// a test may plant one that leads out of the tree, or back into it.
pub fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            files.extend(files_under(&entry.path()));
        } else if kind.is_file() {
            files.push(entry.path());
        }
    }
    files
}

/// Waits (up to 10 s) until `path` no longer exists: what the daemon removes when a session's
/// last reference goes may go a moment after the call that closed it answered.
pub async fn until_absent(path: &std::path::Path) -> bool {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while path.exists() {
        if std::time::Instant::now() > give_up {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    true
}
