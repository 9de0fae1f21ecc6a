//! Locating the workspace binaries under test (built by `cargo build --workspace --bins`).

use std::path::PathBuf;

/// `target/<profile>/<name>`, next to the test executable's `deps/` directory.
pub fn path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} is missing: build the binaries first (cargo build --workspace --bins)",
        bin.display()
    );
    bin
}
