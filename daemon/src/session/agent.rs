//! Which ssh-agent a master logs in with when this daemon's environment names none that
//! answers. An MCP client launched from a desktop gives its servers a bare environment (the
//! MCP SDKs keep `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM` and `USER`), so a daemon such a
//! client started has no `SSH_AUTH_SOCK`, and every master it starts, for every client and
//! the person's terminal alike, would log in without the user's agent. So the agent the
//! desktop session offers is looked for where it lives: launchd's on macOS (`launchctl getenv
//! SSH_AUTH_SOCK`), and on Linux systemd's (`ssh-agent.socket`), GNOME Keyring's
//! (`keyring/ssh`) and gcr's (`gcr/ssh`) under `/run/user/UID`. An `IdentityAgent` in the
//! user's ssh configuration still decides: ssh reads it before the variable.

use std::path::{Path, PathBuf};

/// The variable ssh finds its agent by.
pub const VAR: &str = "SSH_AUTH_SOCK";

/// The agent socket a master should be given, or `None` when the daemon's own environment
/// names one that answers (the master inherits it) or no agent is found.
pub async fn for_master() -> Option<PathBuf> {
    if let Some(inherited) = std::env::var_os(VAR)
        && answers(Path::new(&inherited)).await
    {
        return None;
    }
    let found = first_answering(desktop_agents().await).await?;
    tracing::info!(
        "the master logs in with the agent at {} (this daemon's environment names none that \
         answers)",
        found.display()
    );
    Some(found)
}

/// How long an agent may take to accept a connection before it counts as not answering.
const AGENT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether an agent listens at `path` (and accepts within [`AGENT_WAIT`]: a wedged one must
/// not hold up a connect).
async fn answers(path: &Path) -> bool {
    let connect = tokio::net::UnixStream::connect(path);
    matches!(tokio::time::timeout(AGENT_WAIT, connect).await, Ok(Ok(_)))
}

async fn first_answering(candidates: Vec<PathBuf>) -> Option<PathBuf> {
    for path in candidates {
        if answers(&path).await {
            return Some(path);
        }
    }
    None
}

/// Where the user's desktop session keeps its agent.
#[cfg(target_os = "macos")]
async fn desktop_agents() -> Vec<PathBuf> {
    let asked = tokio::process::Command::new("/bin/launchctl")
        .args(["getenv", VAR])
        .stdin(std::process::Stdio::null())
        .output()
        .await;
    let said = asked.map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string());
    said.ok()
        .filter(|path| path.starts_with('/'))
        .map(PathBuf::from)
        .into_iter()
        .collect()
}

/// Where the user's desktop session keeps its agent.
#[cfg(not(target_os = "macos"))]
async fn desktop_agents() -> Vec<PathBuf> {
    run_user_agents(nix::unistd::getuid().as_raw())
}

/// The agents a Linux desktop session starts, in `/run/user/UID`.
#[cfg(any(not(target_os = "macos"), test))]
fn run_user_agents(uid: u32) -> Vec<PathBuf> {
    let dir = PathBuf::from(format!("/run/user/{uid}"));
    ["ssh-agent.socket", "keyring/ssh", "gcr/ssh"]
        .iter()
        .map(|name| dir.join(name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_agent_that_answers_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("live");
        let _listening = std::os::unix::net::UnixListener::bind(&live).unwrap();
        // A socket file nobody listens on any more, as a dead agent leaves.
        let dead = dir.path().join("dead");
        drop(std::os::unix::net::UnixListener::bind(&dead).unwrap());
        let missing = dir.path().join("missing");
        assert!(answers(&live).await && !answers(&dead).await && !answers(&missing).await);
        let found = first_answering(vec![missing.clone(), dead.clone(), live.clone()]).await;
        assert_eq!(found, Some(live));
        assert_eq!(first_answering(vec![missing, dead]).await, None);
        assert_eq!(first_answering(Vec::new()).await, None);
    }

    #[test]
    fn a_linux_desktop_session_keeps_its_agents_in_run_user() {
        let agents = run_user_agents(1000);
        assert_eq!(
            agents,
            ["ssh-agent.socket", "keyring/ssh", "gcr/ssh"]
                .map(|name| PathBuf::from("/run/user/1000").join(name))
        );
    }
}
