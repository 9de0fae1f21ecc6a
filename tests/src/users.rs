//! The remote user tests log in as. As root (CI) that is a dedicated unprivileged user with a
//! plain shell: root's rc files are slow and real agents rarely log in as root. Otherwise it is
//! the current user (a non-root sshd can only log its own user in).

use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;

pub const TEST_USER: &str = "sshmcp-test";

/// The login name for test sessions, creating the test user when running as root.
pub fn test_user() -> String {
    if !nix::unistd::geteuid().is_root() {
        return nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map(|u| u.name)
            .expect("current user name");
    }
    ensure_user(TEST_USER);
    TEST_USER.to_string()
}

/// Creates `name` once, whatever number of test processes ask at the same time.
fn ensure_user(name: &str) {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open("/tmp/sshmcp-test-users.lock")
        .expect("user lock");
    lock.lock().expect("lock users");
    if nix::unistd::User::from_name(name).ok().flatten().is_none() {
        run(Command::new("useradd").args(["-m", "-s", "/bin/bash", name]));
    }
    // useradd leaves a locked password ("!"), which sshd refuses without PAM.
    run(Command::new("usermod").args(["-p", "*", name]));
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
