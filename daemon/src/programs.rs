//! The remote programs kept as `.sh` files beside the code that runs them: each is checked
//! here with shellcheck as POSIX `sh`, and parsed by every shell a host may have as `/bin/sh`
//! (dash, bash in POSIX mode, a strict POSIX shell, BusyBox's as on Alpine). Their behaviour
//! under those shells is tested by the module that owns each program.

use std::path::{Path, PathBuf};
use std::process::Command;

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
    let applets = crate::inspect::busybox_applets();
    let busybox_sh = applets.path().join("sh").display().to_string();
    let shells: [&[&str]; 4] = [
        &["dash"],
        &["bash", "--posix"],
        &["posh"],
        &[busybox_sh.as_str()],
    ];
    for program in source_programs() {
        for shell in shells {
            let out = Command::new(shell[0])
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
