//! The tools that change small remote files: each one fixed `/bin/sh` program on the building
//! block, the path written into it as base64 and any data on its stdin or in a private
//! temporary file (never argv, never shell text), publishing by a rename in the file's own
//! directory. The shell pieces both programs share are here.

pub mod edit;
pub mod paths;
pub mod write;

use sshmcp_proto::error::ErrorDetails;
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::inspect;
use crate::remote::status;

fn invalid(message: impl Into<String>) -> DaemonError {
    DaemonError::new(ErrorCode::InvalidArguments, message)
}

/// The path's bytes, which must end with a name; `field` names the argument it came in, and
/// `files_only` says the tool takes only a file there.
fn file_path(
    path: &sshmcp_proto::inspect::RemotePath,
    field: &str,
    files_only: bool,
) -> Result<Vec<u8>, DaemonError> {
    let path = inspect::path_bytes(path, field)?;
    match inspect::file_name(&path) {
        Some(_) => Ok(path),
        None => Err(inspect::names_nothing(field, files_only)),
    }
}

/// Checks `expected_sha256`'s form: 64 lowercase hex digits.
fn check_expected(expected: &Option<String>) -> Result<(), DaemonError> {
    match expected {
        Some(e)
            if !(e.len() == 64 && e.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))) =>
        {
            Err(invalid(
                "`expected_sha256` must be 64 lowercase hex digits (a sha256 from an earlier \
                 answer, or sha256sum)",
            ))
        }
        _ => Ok(()),
    }
}

/// The shell functions the file programs share, after the prelude (`files.sh`):
/// - `_target_checks`: `_d` the directory, which must be one that the session's user may
///   search (else the target's absence would be a guess); the target, if it exists, a regular
///   file and no symlink; `_x` 1 when it exists.
/// - `_take_turns` (in the checks): the session user's writes and edits take turns, so that
///   two given the same `expected_sha256` cannot both pass the check before either renames:
///   a lock (`flock`, where the host has it) on a file of the user's own,
///   `~/.sshmcp/files.lock`, which no other user can hold, held until the program ends.
///   `flock -n` in a loop, 20 s at most: the BusyBox one has no `-w`. Where the lock cannot
///   be had otherwise (no flock, no writable home, a flock that fails with another status
///   than 1, its "held by another"), the change goes ahead without it.
/// - `_ident` names the target's state (device, inode, size, change time to the
///   nanosecond): a rename over it or a write into it changes it. `_same` notes that state in
///   `_i`, then ends the program with `ok changed <hash>` (or `missing`) unless the target's
///   SHA-256 is `$_expected`; `_changed_now` ends it with the target's current hash.
/// - `_writable`: an existing target the session's user may not write is refused, as the
///   shell would refuse to write into it: the rename that replaces it needs only the
///   directory's write permission.
/// - `_temporary WHAT`: a temporary file `_t` beside the target, removed however the program
///   ends: a signal (the daemon's timeout, a cancel) ends it through `exit`, which runs the
///   trap.
/// - `_keep_owner` gives `_t` the old file's owner first (a `chown` clears setuid and
///   setgid, so the mode comes after it); a change that cannot keep the owner does not
///   happen. `_keep_mode` gives it the old file's mode, special bits included, through
///   `stat -c %a` and a numeric `chmod`, not GNU's `chmod --reference`, which BusyBox's lacks.
/// - `_flush_and_recheck` flushes `_t`, then, when the target's state was noted, ends the
///   program if it moved since: the last step before the rename, so the window left is a
///   few system calls. `_replace` renames `_t` over the target.
/// - `_second_path` decodes a second path, `_q`, from `$_q64`, made `./`-relative as the
///   first.
const FILES: &str = include_str!("files.sh");

/// A program of this module: the prelude for `tools` and `path`, then `values` as shell
/// variables (words this module made: numbers, octal modes, hex digests, base64; never a
/// user's text), the shared functions, then `body`.
fn program(tools: &str, path: &[u8], values: &[(&str, String)], body: &str) -> String {
    let mut text = status::prelude_with_path(tools, path);
    for (name, value) in values {
        debug_assert!(!value.contains('\''), "{name} is no word");
        text.push_str(&format!("{name}='{value}'\n"));
    }
    text.push_str(FILES);
    text.push_str(body);
    text
}

/// A mode in octal digits, or nothing.
fn octal(mode: Option<u32>) -> String {
    mode.map(|mode| format!("{mode:o}")).unwrap_or_default()
}

/// The base64 form of a second path, for `_second_path`.
fn encoded(path: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(path)
}

/// The host's own failure (a full disk, a read-only file system) names what happened.
fn nothing_changed(e: DaemonError) -> DaemonError {
    match e.code {
        ErrorCode::InternalError if !e.message.starts_with(status::NOTHING_CHANGED) => {
            DaemonError::internal(format!(
                "{}: {}",
                status::NOTHING_CHANGED,
                e.message.trim_start_matches("the host said: ")
            ))
        }
        _ => e,
    }
}

/// The error of an `ok changed <hash>` answer; `creates`: the tool can make the file anew
/// (`write_file`), which the message then says how.
fn changed(detail: &str, creates: bool) -> DaemonError {
    match detail {
        "missing" => DaemonError::new(
            ErrorCode::FileChanged,
            match creates {
                true => {
                    "the file does not exist (any more), so it cannot match expected_sha256; \
                     nothing was changed (to create it, leave expected_sha256 out)"
                }
                false => "the file does not exist (any more); nothing was changed",
            },
        ),
        hash => DaemonError::new(
            ErrorCode::FileChanged,
            format!(
                "the file changed since expected_sha256: its sha256 is now {hash}; nothing was \
                 changed (read it again, then retry with the new hash)"
            ),
        )
        .with_details(ErrorDetails {
            sha256: Some(hash.to_string()),
            ..ErrorDetails::default()
        }),
    }
}

/// The programs need GNU or BusyBox `stat -c`: not a Mac's own.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::PermissionsExt as _;

    use sha2::{Digest as _, Sha256};
    use sshmcp_proto::exec::Encoding;
    use sshmcp_proto::files::{EditFileRequest, WriteFileRequest};
    use sshmcp_proto::inspect::RemotePath;
    use sshmcp_proto::session::SessionAuth;

    use super::{edit, paths, write};

    fn auth() -> SessionAuth {
        SessionAuth {
            session_id: "s".into(),
            session_key: "k".into(),
        }
    }

    fn remote(path: &[u8]) -> RemotePath {
        RemotePath {
            path: String::from_utf8(path.to_vec()).unwrap(),
            encoding: Encoding::Utf8,
        }
    }

    fn hex(data: &[u8]) -> String {
        Sha256::digest(data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// A file whose path is near the host's limit (4,095 bytes) is written and edited: the
    /// temporary file beside it, whose name is longer, is made by its name alone.
    #[test]
    fn a_file_at_the_path_limit_is_written_and_edited_under_every_posix_shell() {
        let shells = crate::programs::Shells::new();
        for (shell, path) in shells.each() {
            let home = tempfile::tempdir().unwrap();
            let mut dir = home.path().to_path_buf();
            while dir.as_os_str().len() < 4093 - 200 {
                dir.push("d".repeat(200));
            }
            let fill = 4093 - dir.as_os_str().len() - 1;
            dir.push("e".repeat(fill));
            std::fs::create_dir_all(&dir).unwrap();
            let file = dir.join("f");
            let bytes = file.as_os_str().as_bytes();
            assert_eq!(bytes.len(), 4095);
            let req = WriteFileRequest {
                auth: auth(),
                path: remote(bytes),
                content: b"long way\n".to_vec(),
                mode: None,
                create_dirs: false,
                overwrite: false,
                expected_sha256: None,
            };
            let run = |script: String, stdin: &[u8]| {
                crate::programs::run_under(&shell, &path, home.path(), &script, stdin)
            };
            assert_eq!(
                run(write::script(bytes, &req), b"long way\n"),
                "ok written 0\n"
            );
            let req = EditFileRequest {
                auth: auth(),
                path: remote(bytes),
                old_text: "long".into(),
                new_text: "short".into(),
                replace_all: false,
                expected_sha256: None,
            };
            let edited = run(edit::script(bytes, &req), b"");
            let expected = match path == shells.busybox_path() {
                true => "ok whole\nlong way\n".to_string(),
                false => format!("ok edited 1 {}\n", hex(b"short way\n")),
            };
            assert_eq!(edited, expected, "{shell:?}");
        }
    }

    /// Where a test's write program runs: `shell` with `path` as its PATH, in `home`.
    struct Under<'a> {
        shell: &'a [String],
        path: &'a str,
        home: &'a std::path::Path,
    }

    impl Under<'_> {
        /// What the write program says of `content` written to `file`.
        fn write(
            &self,
            file: &std::path::Path,
            content: &[u8],
            overwrite: bool,
            expected_sha256: Option<String>,
        ) -> String {
            let bytes = file.as_os_str().as_bytes();
            let req = WriteFileRequest {
                auth: auth(),
                path: remote(bytes),
                content: content.to_vec(),
                mode: None,
                create_dirs: false,
                overwrite,
                expected_sha256,
            };
            let script = write::script(bytes, &req);
            crate::programs::run_under(self.shell, self.path, self.home, &script, content)
        }
    }

    /// An overwrite keeps the old file's owner and group, also where chown has no
    /// `--reference` (BusyBox's): given as numbers then.
    #[test]
    fn an_overwrite_keeps_the_owner_under_every_posix_shell() {
        use std::os::unix::fs::MetadataExt as _;
        let shells = crate::programs::Shells::new();
        for (shell, path) in shells.each() {
            let home = tempfile::tempdir().unwrap();
            let file = home.path().join("owned");
            std::fs::write(&file, b"old\n").unwrap();
            std::os::unix::fs::chown(&file, Some(1), Some(1)).unwrap();
            let under = Under {
                shell: &shell,
                path: &path,
                home: home.path(),
            };
            let said = under.write(&file, b"new\n", true, None);
            assert_eq!(said, "ok written 1\n", "{shell:?}");
            let meta = std::fs::metadata(&file).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (1, 1), "{shell:?}");
        }
    }

    /// `..` after a symlink in a path is its target's parent, for a write as for every other
    /// tool (the program works in the target's directory, entered physically).
    #[test]
    fn a_dot_dot_after_a_symlink_is_the_targets_parent_under_every_posix_shell() {
        let shells = crate::programs::Shells::new();
        for (shell, path) in shells.each() {
            let home = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(home.path().join("x/y")).unwrap();
            std::fs::create_dir(home.path().join("a")).unwrap();
            std::os::unix::fs::symlink(home.path().join("x/y"), home.path().join("a/link"))
                .unwrap();
            let file = home.path().join("a/link/../f");
            let under = Under {
                shell: &shell,
                path: &path,
                home: home.path(),
            };
            let said = under.write(&file, b"here", true, None);
            assert_eq!(said, "ok written 0\n", "{shell:?}");
            assert_eq!(
                std::fs::read(home.path().join("x/f")).unwrap(),
                b"here",
                "{shell:?}"
            );
            assert!(!home.path().join("a/f").exists(), "{shell:?}");
        }
    }

    /// The file programs under every shell a host may have as `/bin/sh` (dash, bash, a
    /// strict POSIX shell, BusyBox with only its applets): a file written new, refused where
    /// one exists and on a stale hash, replaced keeping its mode, edited (where `sed -z` is
    /// missing, told so and left as it was); a directory made, the file copied and moved
    /// into it, the directory refused without `recursive` and removed with it. A name with
    /// a quote and a newline is only data.
    #[test]
    #[allow(clippy::too_many_lines)] // One file's life, step by step, under each shell.
    fn the_file_programs_under_every_posix_shell() {
        let shells = crate::programs::Shells::new();
        for (shell, path) in shells.each() {
            let busybox = path == shells.busybox_path();
            let home = tempfile::tempdir().unwrap();
            let run = |script: String, stdin: &[u8]| {
                crate::programs::run_under(&shell, &path, home.path(), &script, stdin)
            };
            let file = home.path().join("a 'b'\nc");
            let bytes = file.as_os_str().as_bytes();
            let under = Under {
                shell: &shell,
                path: &path,
                home: home.path(),
            };
            let write = |content: &[u8], overwrite: bool, expected: Option<String>| {
                under.write(&file, content, overwrite, expected)
            };
            assert_eq!(
                write(b"hello\n", false, None),
                "ok written 0\n",
                "{shell:?}"
            );
            assert_eq!(std::fs::read(&file).unwrap(), b"hello\n");
            assert_eq!(write(b"x", false, None), "exists\n", "{shell:?}");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
            let stale = Some("0".repeat(64));
            let now = format!("ok changed {}\n", hex(b"hello\n"));
            assert_eq!(write(b"x", false, stale), now, "{shell:?}");
            let current = Some(hex(b"hello\n"));
            assert_eq!(write(b"hello world\n", false, current), "ok written 1\n");
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o7777, 0o640, "{shell:?}");

            let req = EditFileRequest {
                auth: auth(),
                path: remote(bytes),
                old_text: "world".into(),
                new_text: "there".into(),
                replace_all: false,
                expected_sha256: None,
            };
            let edited = run(edit::script(bytes, &req), b"");
            let (said, content) = match busybox {
                true => (
                    "ok whole\nhello world\n".to_string(),
                    b"hello world\n".as_slice(),
                ),
                false => (
                    format!("ok edited 1 {}\n", hex(b"hello there\n")),
                    b"hello there\n".as_slice(),
                ),
            };
            assert_eq!(
                (edited, std::fs::read(&file).unwrap()),
                (said, content.to_vec())
            );

            // A file in the way of the directories asked for is no directory, whatever
            // mkdir calls it ("File exists", "Not a directory").
            let below = file.join("x");
            let below_bytes = below.as_os_str().as_bytes();
            let req = WriteFileRequest {
                auth: auth(),
                path: remote(below_bytes),
                content: b"x".to_vec(),
                mode: None,
                create_dirs: true,
                overwrite: true,
                expected_sha256: None,
            };
            assert_eq!(run(write::script(below_bytes, &req), b"x"), "notdir\n");
            let deeper = below.join("y");
            let deeper_bytes = deeper.as_os_str().as_bytes();
            let made = run(paths::make_directory_program(deeper_bytes, true, None), b"");
            assert_eq!(made, "notdir\n", "{shell:?}");

            let dir = home.path().join("sub 'dir'");
            let dir_bytes = dir.as_os_str().as_bytes();
            let made = run(paths::make_directory_program(dir_bytes, false, None), b"");
            assert!(made.starts_with("ok made "), "{shell:?}: {made}");
            let again = run(paths::make_directory_program(dir_bytes, false, None), b"");
            assert!(again.starts_with("ok same "), "{shell:?}: {again}");
            let copy = dir.join("copy");
            let copy_bytes = copy.as_os_str().as_bytes();
            let copied = run(
                paths::copy_move_program(bytes, copy_bytes, false, false),
                b"",
            );
            assert!(copied.starts_with("ok done "), "{shell:?}: {copied}");
            assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&file).unwrap());
            let moved = dir.join("moved");
            let moved_bytes = moved.as_os_str().as_bytes();
            let said = run(
                paths::copy_move_program(copy_bytes, moved_bytes, false, true),
                b"",
            );
            assert!(said.starts_with("ok done "), "{shell:?}: {said}");
            assert!(!copy.exists() && moved.exists(), "{shell:?}");
            let kept = run(
                paths::copy_move_program(bytes, moved_bytes, false, false),
                b"",
            );
            assert_eq!(kept, "exists\n", "{shell:?}");

            let refused = run(paths::remove_program(dir_bytes, false), b"");
            assert_eq!(refused, "ok notempty\n", "{shell:?}");
            let removed = run(paths::remove_program(dir_bytes, true), b"");
            assert!(removed.starts_with("ok removed "), "{shell:?}: {removed}");
            assert!(!dir.exists(), "{shell:?}");
        }
    }
}
