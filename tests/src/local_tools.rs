//! A `PATH` of chosen programs, as a launcher's bare environment or a Mac gives the daemon:
//! links to this machine's real ones, and the rsync macOS ships.

use std::path::Path;

/// Makes `dir` hold links to this machine's `tools` (found as `sh` finds them).
pub fn link_tools(dir: &Path, tools: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    for tool in tools {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let real = String::from_utf8(found.stdout).unwrap();
        assert!(!real.trim().is_empty(), "{tool} is not installed");
        std::os::unix::fs::symlink(real.trim(), dir.join(tool)).unwrap();
    }
}

/// Writes into `dir` an `rsync` that answers `--version` as macOS 15's openrsync does (older
/// macOS: rsync 2.6.9) and fails anything else, as those fail transfers' options.
pub fn write_macos_rsync(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let rsync = dir.join("rsync");
    std::fs::write(
        &rsync,
        "#!/bin/sh\n\
         if [ \"$1\" = --version ]; then\n\
         printf 'openrsync: protocol version 29\\nrsync version 2.6.9 compatible\\n'\n\
         exit 0\n\
         fi\n\
         echo \"rsync: unrecognized option '$1'\" >&2\n\
         exit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&rsync, std::fs::Permissions::from_mode(0o755)).unwrap();
}
