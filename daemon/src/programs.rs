//! The remote programs kept as `.sh` files beside the code that runs them: each is checked
//! here with shellcheck as POSIX `sh`, and parsed by every shell a host may have as `/bin/sh`
//! (dash, bash in POSIX mode, a strict POSIX shell, BusyBox's as on Alpine). Their behaviour
//! under those shells is tested by the module that owns each program, with [`Shells`] and
//! [`run_under`] from here.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A directory of links to BusyBox's applets: a PATH as on Alpine.
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

/// The shells a host may have as `/bin/sh`, each with the PATH it runs under: dash, bash in
/// POSIX mode and posh with this machine's tools, BusyBox's `sh` with only its own applets
/// (as on Alpine).
pub(crate) struct Shells {
    applets: tempfile::TempDir,
    system: String,
}

impl Shells {
    pub(crate) fn new() -> Self {
        Self {
            applets: busybox_applets(),
            system: std::env::var("PATH").unwrap_or_default(),
        }
    }

    /// The BusyBox applets' directory: a PATH as on Alpine.
    pub(crate) fn busybox_path(&self) -> String {
        self.applets.path().display().to_string()
    }

    /// Each shell's argv before its script, and its PATH.
    pub(crate) fn each(&self) -> Vec<(Vec<String>, String)> {
        let busybox_sh = self.applets.path().join("sh").display().to_string();
        vec![
            (vec!["dash".into()], self.system.clone()),
            (vec!["bash".into(), "--posix".into()], self.system.clone()),
            (vec!["posh".into()], self.system.clone()),
            (vec![busybox_sh], self.busybox_path()),
        ]
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
fn programs(dir: &Path) -> Vec<PathBuf> {
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

fn source_programs() -> Vec<PathBuf> {
    let found = programs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(!found.is_empty(), "no .sh programs found");
    found
}

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
