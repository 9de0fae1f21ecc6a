//! The remote user tests log in as. As root (CI) that is a dedicated unprivileged user with a
//! plain shell: root's rc files are slow and real agents rarely log in as root. Otherwise it is
//! the current user (a non-root sshd can only log its own user in).

use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;

use crate::process::run;

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
    ensure_user(TEST_USER, "/bin/bash");
    TEST_USER.to_string()
}

/// A test user whose login shell is `shell` (root only: it creates the account).
pub fn user_with_shell(name: &str, shell: &str) -> String {
    assert!(
        nix::unistd::geteuid().is_root(),
        "creating user {name} needs root"
    );
    assert!(
        std::path::Path::new(shell).exists(),
        "{shell} is missing (scripts/test.sh installs it)"
    );
    ensure_user(name, shell);
    name.to_string()
}

/// Creates `name` with `shell` once, whatever number of test processes ask at the same time.
fn ensure_user(name: &str, shell: &str) {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open("/tmp/sshmcp-test-users.lock")
        .expect("user lock");
    lock.lock().expect("lock users");
    if nix::unistd::User::from_name(name).ok().flatten().is_none() {
        run(
            Command::new("useradd").args(["-m", "-s", shell, name]),
            "passwd",
        );
    }
    // useradd leaves a locked password ("!"), which sshd refuses without PAM.
    run(Command::new("usermod").args(["-p", "*", name]), "passwd");
}
