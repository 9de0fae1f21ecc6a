//! The remote user tests log in as. As root (CI) that is a dedicated unprivileged user with a
//! plain shell: root's rc files are slow and real agents rarely log in as root. Otherwise it is
//! the current user (a non-root sshd can only log its own user in). Every account, group and
//! system file made here is written in a ledger, [`LEDGER`], from which `scripts/test.sh`
//! removes them all when the suite ends.

use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;

use crate::process::run;

pub const TEST_USER: &str = "sshmcp-test";

/// Root's own directory for what the harness keeps between test processes: the ledger and
/// the locks. Not `/tmp` or `/var/tmp`: anyone may write there, and root removes what the
/// ledger lists.
pub const STATE_DIR: &str = "/var/lib/sshmcp-tests";

/// What the harness made on the machine (`user NAME`, `group NAME`, `path PATH`, a line each,
/// in the order made): `scripts/test-cleanup.sh` removes them when the suite ends. An account
/// that was there before the suite is not in it, so it stays.
pub const LEDGER: &str = "/var/lib/sshmcp-tests/made";

/// [`STATE_DIR`], made root's alone (0700) if it is not; a directory someone else owns
/// stops the tests.
fn state_dir() -> &'static std::path::Path {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = std::path::Path::new(STATE_DIR);
    std::fs::create_dir_all(dir).expect("the tests' state directory");
    let meta = std::fs::symlink_metadata(dir).expect("the tests' state directory");
    assert!(
        meta.is_dir() && meta.uid() == 0,
        "{STATE_DIR} must be a directory of root's"
    );
    if meta.mode() & 0o777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .expect("chmod the tests' state directory");
    }
    dir
}

/// Writes `kind what` in the ledger once; the caller holds [`users_lock`].
fn record(kind: &str, what: &str) {
    use std::io::Write;
    state_dir();
    let line = format!("{kind} {what}");
    let known = std::fs::read_to_string(LEDGER).unwrap_or_default();
    if known.lines().any(|known| known == line) {
        return;
    }
    let mut ledger = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(LEDGER)
        .expect("open the ledger of what the tests made");
    writeln!(ledger, "{line}").expect("write the ledger of what the tests made");
}

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

/// The login shells of the chatty test users.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chatty {
    /// bash, whose `~/.bashrc` prints on both streams above Debian's "not interactive:
    /// return" guard, as conda, nvm and motd scripts do.
    Bash,
    /// tcsh, whose `~/.cshrc` runs for every command with no guard at all.
    Tcsh,
    /// bash whose `~/.bashrc` sends stderr to stdout for everything after it (`exec 2>&1`).
    MergedBash,
    /// bash whose `~/.bashrc` takes half a second before the guard (a slow network mount, a
    /// version manager's start-up): a window in which a command was sent but has not started.
    SlowBash,
}

/// A test user whose login shell prints on stdout and stderr before any command runs: a line,
/// a line that looks like one of the framing's markers, and a last word without a newline
/// (root only: it creates the account and writes its startup file).
pub fn chatty_user(kind: Chatty) -> String {
    let (name, shell, file, text) = match kind {
        Chatty::Bash => (
            "sshmcp-chatty",
            "/bin/bash",
            ".bashrc",
            "echo 'chatty rc on stdout'\necho '_sshmcp_00000000000000000000000000000000 run'\n\
             printf 'no newline'\necho 'chatty rc on stderr' >&2\nprintf 'no newline' >&2\n\
             case $- in *i*) ;; *) return;; esac\necho interactive only\n",
        ),
        Chatty::MergedBash => (
            "sshmcp-mergedrc",
            "/bin/bash",
            ".bashrc",
            "echo 'merging' >&2\nexec 2>&1\ncase $- in *i*) ;; *) return;; esac\n",
        ),
        Chatty::SlowBash => (
            "sshmcp-slowrc",
            "/bin/bash",
            ".bashrc",
            "echo 'slow rc'\nsleep 0.5\ncase $- in *i*) ;; *) return;; esac\n",
        ),
        Chatty::Tcsh => (
            "sshmcp-chattycsh",
            "/usr/bin/tcsh",
            ".cshrc",
            "echo 'chatty rc on stdout'\necho '_sshmcp_00000000000000000000000000000000 run'\n\
             printf 'no newline'\nsh -c 'echo chatty rc on stderr >&2; printf \"no newline\" >&2'\n",
        ),
    };
    user_with_startup_file(name, shell, file, text)
}

/// A bash user whose `~/.bashrc` is empty at each call, for a test that edits it (root only).
pub fn rc_editing_user() -> String {
    user_with_startup_file("sshmcp-rcedit", "/bin/bash", ".bashrc", "")
}

/// A bash user whose `~/.bashrc` sources every file in `~/.bashrc.d` (as Fedora's does), for
/// tests that edit them (root only).
pub fn rc_dir_user() -> String {
    user_with_startup_file(
        "sshmcp-rcdir",
        "/bin/bash",
        ".bashrc",
        "for rc in ~/.bashrc.d/*; do [ -f \"$rc\" ] && . \"$rc\"; done\n",
    )
}

/// A bash user whose `~/.bashrc` takes 2 s before its guard: long enough that a command is
/// handed off before its shell could report its process group (root only).
pub fn slow_login_user() -> String {
    user_with_startup_file(
        "sshmcp-slowlogin",
        "/bin/bash",
        ".bashrc",
        "sleep 2\ncase $- in *i*) ;; *) return;; esac\n",
    )
}

/// The file whose presence makes [`hanging_login_user`]'s login shell hang.
pub const HANG_FILE: &str = "/tmp/sshmcp-hang-sshmcp-hanglogin";

/// A bash user whose `~/.bashrc` sleeps 33 s while [`HANG_FILE`] exists: a login shell that
/// hangs, on demand, after the session connected, longer than a handle waits to start
/// (root only).
pub fn hanging_login_user() -> String {
    user_with_startup_file(
        "sshmcp-hanglogin",
        "/bin/bash",
        ".bashrc",
        &format!("[ -e {HANG_FILE} ] && sleep 33\ncase $- in *i*) ;; *) return;; esac\n"),
    )
}

/// A user of `shell` whose startup `file` holds `text` (root only).
fn user_with_startup_file(name: &str, shell: &str, file: &str, text: &str) -> String {
    let user = user_with_shell(name, shell);
    let home = nix::unistd::User::from_name(&user)
        .ok()
        .flatten()
        .expect("the user just made")
        .dir;
    // Written aside and renamed: a login shell of another test may be reading it right now.
    let rc = home.join(file);
    let fresh = home.join(format!("{file}.{}", std::process::id()));
    std::fs::write(&fresh, text).expect("write the startup file");
    run(
        Command::new("chown").arg(format!("{user}:")).arg(&fresh),
        "coreutils",
    );
    std::fs::rename(&fresh, &rc).expect("publish the startup file");
    user
}

/// Writes a system path the harness makes in the ledger, before it is made.
fn record_path(path: &std::path::Path) {
    let _lock = users_lock();
    record("path", &path.display().to_string());
}

/// Holds the lock on the machine's user database for the test processes that change it.
fn users_lock() -> std::fs::File {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(state_dir().join("users.lock"))
        .expect("user lock");
    lock.lock().expect("lock users");
    lock
}

/// Makes `user` a member of `group` (made when missing), for its next login (root only).
pub fn add_to_group(user: &str, group: &str) {
    let _lock = users_lock();
    if nix::unistd::Group::from_name(group)
        .ok()
        .flatten()
        .is_none()
    {
        record("group", group);
        run(Command::new("groupadd").args(["-f", group]), "passwd");
    }
    run(Command::new("usermod").args(["-aG", group, user]), "passwd");
}

/// Creates `name` with `shell` once, whatever number of test processes ask at the same time.
fn ensure_user(name: &str, shell: &str) {
    let _lock = users_lock();
    if nix::unistd::User::from_name(name).ok().flatten().is_none() {
        // Written first: a run stopped right after useradd still has its user removed.
        record("user", name);
        run(
            Command::new("useradd").args(["-m", "-s", shell, name]),
            "passwd",
        );
    }
    // useradd leaves a locked password ("!"), which sshd refuses without PAM.
    run(Command::new("usermod").args(["-p", "*", name]), "passwd");
}

/// What sudoers allows a sudo test user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SudoRule {
    /// Everything as root, no password.
    NoPassword,
    /// Everything as root, after a password (which sshmcp never sends).
    PasswordRequired,
    /// Only `/usr/bin/id` as root, without a password: no rule for bash.
    OnlyId,
    /// `/usr/bin/id` without a password and everything else after one: `sudo -l` lists bash
    /// without asking (a NOPASSWD rule exists), yet running it wants the password.
    PasswordRequiredBesideId,
    /// Everything as root, no password, for a user whose `~/.bashrc` sends stderr to stdout
    /// (`exec 2>&1`) above its guard.
    NoPasswordMergedStreams,
}

/// A user whose sudoers rule is `rule` (root only: creates the account and writes
/// `/etc/sudoers.d/sshmcp-tests`). The default test user is in no sudoers rule.
pub fn sudo_user(rule: SudoRule) -> String {
    let user = match rule {
        SudoRule::NoPassword => user_with_shell("sshmcp-sudo", "/bin/bash"),
        SudoRule::PasswordRequired => user_with_shell("sshmcp-sudopw", "/bin/bash"),
        SudoRule::OnlyId => user_with_shell("sshmcp-sudoid", "/bin/bash"),
        SudoRule::PasswordRequiredBesideId => user_with_shell("sshmcp-sudomix", "/bin/bash"),
        SudoRule::NoPasswordMergedStreams => user_with_startup_file(
            "sshmcp-sudomrg",
            "/bin/bash",
            ".bashrc",
            "echo 'merging' >&2\nexec 2>&1\ncase $- in *i*) ;; *) return;; esac\n",
        ),
    };
    let rules = "sshmcp-sudo ALL=(ALL) NOPASSWD: ALL\nsshmcp-sudopw ALL=(ALL) ALL\n\
                 sshmcp-sudoid ALL=(ALL) NOPASSWD: /usr/bin/id\n\
                 sshmcp-sudomix ALL=(ALL) NOPASSWD: /usr/bin/id\nsshmcp-sudomix ALL=(ALL) ALL\n\
                 sshmcp-sudomrg ALL=(ALL) NOPASSWD: ALL\n";
    let path = std::path::Path::new("/etc/sudoers.d/sshmcp-tests");
    if std::fs::read_to_string(path).ok().as_deref() != Some(rules) {
        record_path(path);
        // Written aside and renamed: another test's sudo may be reading it.
        let fresh = path.with_extension(format!("{}", std::process::id()));
        std::fs::write(&fresh, rules).expect("write the sudoers rule");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o440)).unwrap();
        std::fs::rename(&fresh, path).expect("publish the sudoers rule");
    }
    user
}

/// A bash user whose PATH finds a `find` without `-printf` first, as on a BusyBox host (root
/// only: it writes the fake tool and the startup file).
pub fn user_without_gnu_find() -> String {
    let bin = std::path::Path::new("/var/tmp/sshmcp-busybox-like");
    record_path(bin);
    std::fs::create_dir_all(bin).expect("the fake tools' directory");
    let find = bin.join("find");
    let fresh = bin.join(format!("find.{}", std::process::id()));
    std::fs::write(
        &fresh,
        "#!/bin/sh\nfor a; do [ \"$a\" = -printf ] && { echo 'find: unrecognized: -printf' >&2; exit 1; }; done\nexec /usr/bin/find \"$@\"\n",
    )
    .expect("the fake find");
    std::fs::set_permissions(&fresh, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod the fake find");
    std::fs::rename(&fresh, &find).expect("publish the fake find");
    user_with_startup_file(
        "sshmcp-nogfind",
        "/bin/bash",
        ".bashrc",
        &format!("export PATH={}:$PATH\n", bin.display()),
    )
}

/// The user whose sessions run in [`BUSYBOX_ROOT`].
pub const BUSYBOX_USER: &str = "sshmcp-busybox";

/// A root holding only busybox-static, as `/bin/sh` and every tool (as on a small Alpine host:
/// no GNU options, no rsync, sudo, openssl or sftp-server). sshd's `ChrootDirectory` for
/// [`BUSYBOX_USER`]: every component of its path is root's and writable by no one else.
pub const BUSYBOX_ROOT: &str = "/var/lib/sshmcp-tests/busybox";

/// The user whose sessions run in a BusyBox-only root (an sshd started with
/// `SshdOptions::busybox` chroots it there and mounts `/proc` in it); made once, with the
/// root, for every test process (root only).
pub fn busybox_user() -> String {
    use std::os::unix::fs::PermissionsExt;
    let user = user_with_shell(BUSYBOX_USER, "/bin/sh");
    let _lock = users_lock();
    let root = std::path::Path::new(BUSYBOX_ROOT);
    let account = nix::unistd::User::from_name(&user)
        .ok()
        .flatten()
        .expect("the user just made");
    let (uid, gid) = (account.uid, account.gid);
    // Made for this very account: one made again since has another uid.
    let ready = root.join(".ready");
    if std::fs::read_to_string(&ready).is_ok_and(|made_for| made_for == uid.to_string()) {
        return user;
    }
    record("path", BUSYBOX_ROOT);
    let _ = std::fs::remove_dir_all(root);
    let home = format!("home/{user}");
    for dir in [
        "bin", "sbin", "usr/bin", "usr/sbin", "etc", "dev", "tmp", "proc", &home,
    ] {
        std::fs::create_dir_all(root.join(dir)).expect("the BusyBox root");
    }
    // sshd takes a root whose every directory is root's and writable by no one else, whatever
    // the umask.
    for dir in [
        "", "bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "dev", "proc", "home",
    ] {
        std::fs::set_permissions(root.join(dir), std::fs::Permissions::from_mode(0o755))
            .expect("the BusyBox root's modes");
    }
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("busybox-static is missing (scripts/test.sh installs it)");
    std::fs::copy(busybox, root.join("bin/busybox")).expect("copy busybox");
    run(
        Command::new("chroot")
            .arg(root)
            .args(["/bin/busybox", "--install", "-s"]),
        "coreutils",
    );
    for (name, major, minor) in [
        ("null", "1", "3"),
        ("zero", "1", "5"),
        ("random", "1", "8"),
        ("urandom", "1", "9"),
        ("tty", "5", "0"),
    ] {
        let path = root.join("dev").join(name);
        run(
            Command::new("mknod")
                .args(["-m", "666"])
                .arg(&path)
                .args(["c", major, minor]),
            "coreutils",
        );
    }
    std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::fs::write(
        root.join("etc/passwd"),
        format!("root:x:0:0::/root:/bin/sh\n{user}:x:{uid}:{gid}::/{home}:/bin/sh\n"),
    )
    .unwrap();
    std::fs::write(
        root.join("etc/group"),
        format!("root:x:0:\n{user}:x:{gid}:\n"),
    )
    .unwrap();
    std::fs::write(
        root.join("etc/os-release"),
        "NAME=BusyBox\nPRETTY_NAME=\"BusyBox (the sshmcp tests' host)\"\n",
    )
    .unwrap();
    nix::unistd::chown(&root.join(&home), Some(uid), Some(gid)).expect("chown its home");
    std::fs::write(&ready, uid.to_string()).expect("the BusyBox root's mark");
    user
}

/// A bash user whose `openssl` (the hasher transfers use on the host) first runs `~/hook.sh`
/// once, if the test put one there: a test acts at the moment a transfer is being verified,
/// after its copy and before its publishing (root only: it writes the wrapper). Answers the
/// user and the hook's path.
pub fn user_with_hashing_hook(name: &str) -> (String, std::path::PathBuf) {
    let user = user_with_startup_file(
        name,
        "/bin/bash",
        ".bashrc",
        "export PATH=$HOME/bin:$PATH\n",
    );
    let home = nix::unistd::User::from_name(&user)
        .ok()
        .flatten()
        .expect("the user just made")
        .dir;
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).expect("the wrapper's directory");
    let wrapper = bin.join("openssl");
    // `mv` makes the hook run once, whoever hashes next. Where the machine has no openssl,
    // `sha256sum` gives the digest as the first word too (transfers read no more).
    std::fs::write(
        &wrapper,
        "#!/bin/sh\nmv \"$HOME/hook.sh\" \"$HOME/hook.ran\" 2>/dev/null && sh \"$HOME/hook.ran\"\n\
         [ -x /usr/bin/openssl ] && exec /usr/bin/openssl \"$@\"\nexec sha256sum\n",
    )
    .expect("the openssl wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod the wrapper");
    let hook = home.join("hook.sh");
    let _ = std::fs::remove_file(&hook);
    (user, hook)
}
