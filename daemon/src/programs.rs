//! The remote programs kept as `.sh` files beside the code that runs them: each is checked
//! here with shellcheck as POSIX `sh`, and parsed by every shell a host may have as `/bin/sh`
//! (dash, bash in POSIX mode, a strict POSIX shell, BusyBox's as on Alpine), on Linux, where
//! those shells are installed (`scripts/test.sh`). Their behaviour under those shells is
//! tested by the module that owns each program, with [`Shells`] and [`run_under`] from here.

use std::path::Path;
use std::process::{Command, Stdio};

/// A process group that cannot exist: above Linux's highest PID (`PID_MAX_LIMIT`, 2^22), so a
/// test's kill of it can never reach anyone's processes.
pub(crate) const NO_SUCH_GROUP: u32 = 4_194_305;

/// A directory of links to BusyBox's applets: a PATH as on Alpine.
#[cfg(target_os = "linux")]
pub(crate) fn busybox_applets() -> tempfile::TempDir {
    let applets = tempfile::tempdir().unwrap();
    let busybox = Command::new("sh")
        .args(["-c", "command -v busybox"])
        .output()
        .expect("sh");
    let busybox = String::from_utf8_lossy(&busybox.stdout).trim().to_string();
    assert!(
        !busybox.is_empty(),
        "busybox (scripts/test.sh installs busybox-static)"
    );
    let listed = Command::new(&busybox).arg("--list").output().unwrap();
    for applet in String::from_utf8_lossy(&listed.stdout).lines() {
        std::os::unix::fs::symlink(&busybox, applets.path().join(applet)).unwrap();
    }
    applets
}

/// A `kill` first on posh's PATH (posh has none of its own and runs procps' `kill`), which
/// refuses a negative number (a process group) not after `--` (the first argument, a signal
/// such as `-KILL`, is passed on as given): procps reads `kill -TERM
/// -12345` as a signal to group 1, every process the user may signal. A program that forgot
/// `kill::GROUP_OPTION` then fails its test instead of ending the machine's processes.
#[cfg(target_os = "linux")]
const SAFE_KILL: &str = r#"#!/bin/sh
n=0
for a in "$@"; do
  n=$((n + 1))
  [ "$a" = -- ] && break
  if [ "$n" -gt 1 ]; then
    case $a in -[0-9]*) echo "kill: a group without --: $*" >&2; exit 1 ;; esac
  fi
done
exec /usr/bin/kill "$@"
"#;

/// The shells a host may have as `/bin/sh`, each with the PATH it runs under: on Linux, dash,
/// bash in POSIX mode and posh with this machine's tools, BusyBox's `sh` with only its own
/// applets (as on Alpine); elsewhere (macOS) the machine's `/bin/sh`.
pub(crate) struct Shells {
    #[cfg(target_os = "linux")]
    applets: tempfile::TempDir,
    #[cfg(target_os = "linux")]
    safe_kill: tempfile::TempDir,
    system: String,
}

impl Shells {
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(target_os = "linux")]
            applets: busybox_applets(),
            #[cfg(target_os = "linux")]
            safe_kill: {
                use std::os::unix::fs::PermissionsExt as _;
                let dir = tempfile::tempdir().unwrap();
                let kill = dir.path().join("kill");
                std::fs::write(&kill, SAFE_KILL).unwrap();
                std::fs::set_permissions(&kill, std::fs::Permissions::from_mode(0o755)).unwrap();
                dir
            },
            system: std::env::var("PATH").unwrap_or_default(),
        }
    }

    /// The BusyBox applets' directory: a PATH as on Alpine.
    #[cfg(target_os = "linux")]
    pub(crate) fn busybox_path(&self) -> String {
        self.applets.path().display().to_string()
    }

    /// Each shell's argv before its script, and its PATH.
    pub(crate) fn each(&self) -> Vec<(Vec<String>, String)> {
        #[cfg(target_os = "linux")]
        {
            let busybox_sh = self.applets.path().join("sh").display().to_string();
            let posh_path = format!("{}:{}", self.safe_kill.path().display(), self.system);
            vec![
                (vec!["dash".into()], self.system.clone()),
                (vec!["bash".into(), "--posix".into()], self.system.clone()),
                (vec!["posh".into()], posh_path),
                (vec![busybox_sh], self.busybox_path()),
            ]
        }
        #[cfg(not(target_os = "linux"))]
        vec![(vec!["/bin/sh".into()], self.system.clone())]
    }
}

/// Runs `script` under `shell` (its argv before `-c`) with `path` as PATH, `home` as HOME and
/// `stdin`: what it printed on stdout.
pub(crate) fn run_under(
    shell: &[String],
    path: &str,
    home: &Path,
    script: &str,
    stdin: &[u8],
) -> String {
    use std::io::Write as _;
    let mut child = Command::new(&shell[0])
        .args(&shell[1..])
        .arg("-c")
        .arg(script)
        .env("PATH", path)
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{shell:?} (scripts/test.sh installs it): {e}"));
    // A program that answers before it reads (a missing tool) closes its stdin.
    match child.stdin.take().unwrap().write_all(stdin) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("{shell:?}: {e}"),
        _ => {}
    }
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// Every `.sh` file under `dir`, sorted.
#[cfg(target_os = "linux")]
fn programs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(programs(&path));
        } else if path.extension().is_some_and(|ext| ext == "sh") {
            found.push(path);
        }
    }
    found.sort();
    found
}

#[cfg(target_os = "linux")]
fn source_programs() -> Vec<std::path::PathBuf> {
    let found = programs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(!found.is_empty(), "no .sh programs found");
    found
}

#[cfg(target_os = "linux")]
#[test]
fn every_program_is_shellcheck_clean_as_posix_sh() {
    for program in source_programs() {
        let out = Command::new("shellcheck")
            .args(["--shell=sh", "--severity=style"])
            .arg(&program)
            .output()
            .expect("shellcheck (scripts/test.sh installs it)");
        assert!(
            out.status.success(),
            "{}:\n{}",
            program.display(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn every_program_parses_under_every_posix_shell() {
    let shells = Shells::new();
    for program in source_programs() {
        for (shell, _) in shells.each() {
            let out = Command::new(&shell[0])
                .args(&shell[1..])
                .arg("-n")
                .arg(&program)
                .output()
                .unwrap_or_else(|e| panic!("{shell:?} (scripts/test.sh installs it): {e}"));
            assert!(
                out.status.success(),
                "{} under {shell:?}: {}",
                program.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// The guard `kill` on posh's PATH refuses a process group not after `--`, wherever it stands
/// after the signal, and hands every other call to the real `kill` as it came. (Its refusals
/// never reach a `kill`; the calls it passes signal only this test's own process or a group
/// that cannot exist.)
#[cfg(target_os = "linux")]
#[test]
fn the_guard_kill_refuses_a_group_without_its_dashes_and_passes_the_rest_on() {
    let shells = Shells::new();
    let guard = shells.safe_kill.path().join("kill");
    let run = |args: &[String]| Command::new(&guard).args(args).output().unwrap();
    let group = format!("-{NO_SUCH_GROUP}");
    let words = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    for refused in [
        words(&["-9", &group]),
        words(&["-KILL", &group, "--", "6"]),
        words(&["-s", "TERM", &group]),
    ] {
        let out = run(&refused);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && said.contains("a group without --"),
            "{refused:?}: {said}"
        );
    }
    let me = std::process::id().to_string();
    assert!(run(&words(&["-0", &me])).status.success());
    let out = run(&words(&["-0", "--", &group]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!said.contains("a group without --"), "{said}");
}
