//! The remote end of a transfer: an upload's destination checked (and its directory resolved),
//! the dot-file beside it that the copy goes into, the publishing by a same-directory rename
//! or link, and the SHA-256 of a remote file. Each is one fixed `/bin/sh` program on the
//! building block with the path on its stdin, as the inspection tools run.

use std::time::Duration;

use sshmcp_proto::transfer::TransferDirection;
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::inspect;
use crate::remote::status;
use crate::session::Session;

/// The dot-file an upload goes into, beside its destination: one name per server, local source
/// and destination, so the same pair resumes where it stopped.
pub struct Partial {
    /// Its absolute path.
    pub path: Vec<u8>,
    /// The part of its name that tells it from another pair's.
    tag: String,
}

impl Partial {
    pub fn of(server: &str, source: &std::path::Path, destination: &[u8]) -> Partial {
        let tag = super::pair_tag([
            server.as_bytes(),
            source.as_os_str().as_encoded_bytes(),
            destination,
        ]);
        let directory = &destination[..destination.iter().rposition(|b| *b == b'/').unwrap_or(0)];
        let mut path = directory.to_vec();
        path.extend_from_slice(format!("/.sshmcp-{tag}.part").as_bytes());
        Partial { path, tag }
    }
}

/// An upload's destination as the host showed it.
pub struct Destination {
    /// Absolute, its directory resolved (`pwd -P`): every later step uses it.
    pub path: Vec<u8>,
    /// The same file whatever name reached the host: the host's machine id (else its name),
    /// the directory's device and inode, and the file's name.
    pub identity: Vec<u8>,
}

/// The destination's checks: its directory exists and may be written, the file is missing
/// or (with `$_overwrite`) a regular file; answers the host's id, the directory's device and
/// inode, and its resolved path.
const DESTINATION: &str = include_str!("destination.sh");

/// The source's checks: a regular file the user may read; answers its size and mode.
const SOURCE: &str = include_str!("source.sh");

/// Publishes the partial `.sshmcp-$_tag.part` beside the destination: a rename over it (with
/// `$_overwrite`), else a link, which fails where the destination appeared meanwhile. A
/// directory that took the destination's name refuses the rename: not the destination
/// `overwrite` was given for, and nothing was removed.
const PUBLISH: &str = include_str!("publish.sh");

/// Kills every process whose environment holds `$_mark` (grep exits 2 when it could not read
/// some other user's `environ`, even after a match: the list it printed decides), until none
/// is left, 5 s at most.
const STOP_RSYNC: &str = include_str!("stop_rsync.sh");

/// Makes the partial ready for rsync (see [`prepare_partial`]).
const PREPARE_PARTIAL: &str = include_str!("prepare_partial.sh");

/// Removes a partial.
const DISCARD: &str = include_str!("discard.sh");

/// The partial's size in bytes.
const PARTIAL_SIZE: &str = include_str!("partial_size.sh");

/// A file's SHA-256: `openssl dgst` where there is one, else `sha256sum`. Only stdout counts
/// (a build of openssl may warn on stderr and still hash), and only a digest that looks like
/// one: else `sha256sum`, whose errors are the answer.
const SHA256: &str = include_str!("sha256.sh");

/// What the checks of a source and a destination say of a host without rsync.
const NO_RSYNC: &str = "norsync";

/// A host without rsync copies no file: the agent learns what moves the bytes instead.
fn without_rsync(direction: TransferDirection) -> DaemonError {
    let instead = match direction {
        TransferDirection::Download => {
            "exec `cat` the file with spool_output: true keeps its bytes in the local root \
             (its spool_path; up to the daemon's spool cap, 1 GiB by default); a text file's \
             parts: read_file_range"
        }
        TransferDirection::Upload => {
            "write_file writes up to 1 MiB (encoding base64 for binary bytes); a larger file \
             goes in 1 MiB parts, joined by exec `cat`"
        }
    };
    DaemonError::new(
        ErrorCode::HostToolMissing,
        format!("the host has no `rsync`, which transfers need: nothing was copied. {instead}"),
    )
}

/// The program that checks an upload's destination, the path on its stdin.
fn destination_program(overwrite: bool) -> String {
    let overwrite = u8::from(overwrite);
    format!(
        "{}_overwrite={overwrite}\n{DESTINATION}",
        status::prelude("stat")
    )
}

/// The program that checks a download's source, the path on its stdin.
fn source_program() -> String {
    format!("{}{SOURCE}", status::prelude("stat"))
}

/// The program that publishes the partial of pair `tag`, the destination on its stdin.
/// Another user cannot take over the user's own file, so the check before the move holds.
fn publish_program(tag: &str, overwrite: bool) -> String {
    let prelude = status::prelude("mv ln rm stat id");
    let overwrite = u8::from(overwrite);
    format!("{prelude}_tag={tag}\n_overwrite={overwrite}\n{OWN_FILE}{PUBLISH}")
}

/// The program that readies a partial for a source of `size` bytes and `mode`, the partial's
/// path on its stdin.
fn prepare_program(size: u64, mode: u32) -> String {
    let prelude = status::prelude("stat rm id chmod");
    let mode = mode & 0o777;
    format!("{prelude}_size={size}\n_mode={mode:o}\n{OWN_FILE}{PREPARE_PARTIAL}")
}

/// The program that removes a partial, its path on its stdin.
fn discard_program() -> String {
    format!("{}{DISCARD}", status::prelude("rm"))
}

/// The program that tells a partial's size, its path on its stdin.
fn partial_size_program() -> String {
    format!("{}{PARTIAL_SIZE}", status::prelude("stat"))
}

/// The program that hashes a file, the path on its stdin.
fn sha256_program() -> String {
    format!("{}{SHA256}", status::prelude("sha256sum"))
}

/// An upload's destination, checked on the host: its directory exists and the session's user
/// may write there; the file is missing, or (with `overwrite`) a regular file.
pub async fn destination(
    session: &Session,
    remote: &[u8],
    overwrite: bool,
) -> Result<Destination, DaemonError> {
    let name =
        inspect::file_name(remote).ok_or_else(|| inspect::names_nothing("remote_path", true))?;
    let script = destination_program(overwrite);
    let (identity, directory) = status::run(&session.host, script, remote, 64 * 1024)
        .await
        .map_err(|e| match e.code {
            // Only the directory is looked up: the file itself need not be there.
            ErrorCode::RemotePathNotFound => DaemonError::new(
                ErrorCode::RemotePathNotFound,
                format!(
                    "{} (check its directory: make_directory it if missing)",
                    e.message
                ),
            ),
            _ => e,
        })?;
    if identity == NO_RSYNC {
        return Err(without_rsync(TransferDirection::Upload));
    }
    let mut path = directory;
    if path != b"/" {
        path.push(b'/');
    }
    path.extend_from_slice(name);
    let mut identity = format!("{identity}/").into_bytes();
    identity.extend_from_slice(name);
    Ok(Destination { path, identity })
}

/// A download's source, checked on the host: a regular file (a symlink to one counts) that
/// the session's user may read. Answers its size and its mode's permission bits. rsync would
/// fail on an unreadable file only after the transfer started, and in its own words.
pub async fn source_size(session: &Session, remote: &[u8]) -> Result<(u64, u32), DaemonError> {
    let script = source_program();
    let (size, _) = status::run(&session.host, script, remote, 4096)
        .await
        .map_err(|e| match e.code {
            ErrorCode::InvalidRemoteType => DaemonError::new(
                ErrorCode::InvalidRemoteType,
                "remote_path is not a regular file (transfers copy single files)",
            ),
            ErrorCode::RemotePermissionDenied => DaemonError::new(
                ErrorCode::RemotePermissionDenied,
                format!(
                    "{}; copy it with sudo_exec into a directory only the session's user can read (not /tmp), give it to that user, and remove the copy afterwards",
                    e.message
                ),
            ),
            _ => e,
        })?;
    if size == NO_RSYNC {
        return Err(without_rsync(TransferDirection::Download));
    }
    let parsed = size.split_once(' ').and_then(|(bytes, mode)| {
        Some((
            bytes.trim().parse().ok()?,
            u32::from_str_radix(mode.trim(), 8).ok()?,
        ))
    });
    parsed.ok_or_else(|| {
        DaemonError::internal(format!("the host gave no file size and mode: {size:?}"))
    })
}

/// Moves a verified partial to its destination: a rename over it (`overwrite`), else a link,
/// which fails when the destination appeared meanwhile. Then the partial is useless: it is
/// removed before `remote_path_exists` is reported.
pub async fn publish(
    session: &Session,
    destination: &[u8],
    partial: &Partial,
    overwrite: bool,
) -> Result<(), DaemonError> {
    let script = publish_program(&partial.tag, overwrite);
    match status::run(&session.host, script, destination, 4096).await {
        Ok((said, _)) if said.trim() == "notown" => Err(DaemonError::new(
            ErrorCode::TransferFailed,
            "the partial file on the host stopped being the session user's own file with one \
             link during the copy (another user's doing?); nothing was published",
        )),
        Ok(_) => Ok(()),
        Err(e) if e.code == ErrorCode::RemotePathExists => Err(DaemonError::new(
            ErrorCode::RemotePathExists,
            "remote_path appeared during the copy; the copy was removed, nothing was replaced",
        )),
        Err(e) if e.code == ErrorCode::InvalidRemoteType => Err(DaemonError::new(
            ErrorCode::InvalidRemoteType,
            "remote_path became a directory during the copy; nothing was replaced, and the \
             partial file is kept for a retry once the directory is gone",
        )),
        Err(e) => Err(DaemonError::new(
            ErrorCode::TransferFailed,
            format!(
                "cannot publish the file on the host ({}); the partial file is kept",
                e.message
            ),
        )),
    }
}

/// The variable that marks a transfer's rsync on the host (set by its remote command, and
/// inherited by the process rsync forks there).
pub const RSYNC_MARK_VAR: &str = "SSHMCP_RSYNC";

/// Ends the remote rsync of a stopped copy, marked `mark`, and waits until it is gone (5 s at
/// most): killing our rsync only closes its channel, and the remote one may still write into
/// the partial a moment later, under a retry that resumes from it. False where the host shows
/// no process's environment (no /proc): nothing could be looked for.
pub async fn stop_rsync(session: &Session, mark: &str) -> Result<bool, DaemonError> {
    let script = format!("_mark='{RSYNC_MARK_VAR}={mark}'\n{STOP_RSYNC}");
    let program = crate::remote::Program::new(script, Duration::from_secs(10), 4096);
    let result = crate::remote::run(&session.host, program).await?;
    match result.exit_code {
        Some(0) => Ok(result.stdout.bytes != b"noproc\n"),
        _ => Err(DaemonError::internal(
            "the remote rsync of a stopped copy outlived 5 s of SIGKILL",
        )),
    }
}

/// `_own FILE`: whether FILE is the session user's own regular file with one link. Nobody
/// else can make it otherwise where others may write (a sticky directory), so it is the last
/// check before rsync writes the partial and before it is published.
const OWN_FILE: &str = include_str!("own.sh");

/// Makes an upload's partial ready for rsync, which writes into whatever file has its name:
/// one no copy can resume from (see the caller), or that is not the session user's own regular
/// file (another user may have made it, in a directory all may write such as /tmp), is
/// removed, and one that cannot be removed is in the way. A missing partial is created here,
/// exclusively (an existing file of its name fails the creation, never opened), with the mode
/// a new file of rsync's would get (`mode`, the source's, less the umask), set through the
/// descriptor that created it (`/proc/self/fd`, where the host has it): the name is known to
/// other users of the host, and one who may rename in the directory could put a symlink in
/// its place meanwhile. Last, the file of that name must be the user's own (someone may have
/// made it between two of these steps): the copy only ever goes into it.
pub async fn prepare_partial(
    session: &Session,
    partial: &Partial,
    size: u64,
    mode: u32,
) -> Result<(), DaemonError> {
    let script = prepare_program(size, mode);
    let (said, _) = status::run(&session.host, script, &partial.path, 4096).await?;
    match said.trim() {
        "ready" => Ok(()),
        _ => Err(DaemonError::new(
            ErrorCode::TransferFailed,
            format!(
                "a file of the upload's partial name is in the way on the host and cannot be \
                 removed ({}): another user's file, or a directory; nothing was copied",
                String::from_utf8_lossy(&partial.path)
            ),
        )),
    }
}

/// A transfer's step on the host that failed: `transfer_failed` saying `what`, but a lost
/// master, which stays `connection_lost` (the session is gone, not the transfer's doing).
pub fn step_failed(what: &str, e: DaemonError) -> DaemonError {
    match e.code {
        ErrorCode::ConnectionLost => e,
        _ => DaemonError::new(ErrorCode::TransferFailed, format!("{what}: {}", e.message)),
    }
}

/// Removes a partial that failed verification.
pub async fn discard(session: &Session, partial: &Partial) -> Result<(), DaemonError> {
    let script = discard_program();
    status::run(&session.host, script, &partial.path, 4096)
        .await
        .map(drop)
}

/// What a stopped upload's partial holds, asked within `within`: rsync's progress, which its
/// report counts while it runs, can be far behind what reached the host, or ahead of it by
/// what was still on its way.
pub async fn partial_size(
    session: &Session,
    partial: &Partial,
    within: Duration,
) -> Result<u64, DaemonError> {
    let script = partial_size_program();
    let (size, _) = status::run_within(&session.host, script, &partial.path, 4096, within).await?;
    size.trim()
        .parse()
        .map_err(|_| DaemonError::internal(format!("the host's stat gave no size: {size:?}")))
}

/// A remote file of `size` bytes' SHA-256: `openssl dgst` where there is one (four times
/// faster than coreutils there), else `sha256sum`. The path travels on stdin, and the file is
/// hashed from stdin too: both tools mark the digest of an odd file name with a backslash.
pub async fn sha256(session: &Session, remote: &[u8], size: u64) -> Result<String, DaemonError> {
    let script = sha256_program();
    // 30 s, and one more per 10 MiB: a slow disk reads at 10 MiB/s.
    let timeout = Duration::from_secs(30 + size / (10 << 20));
    let (hash, _) = status::run_within(&session.host, script, remote, 4096, timeout)
        .await
        .map_err(|e| step_failed("cannot hash the remote file", e))?;
    let hash = hash.trim().to_ascii_lowercase();
    match hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        true => Ok(hash),
        false => Err(DaemonError::new(
            ErrorCode::TransferFailed,
            format!("the host's hasher gave no SHA-256: {hash:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partial_sits_beside_its_destination_and_names_its_pair() {
        let p = Partial::of("h:22", std::path::Path::new("/r/a"), b"/srv/x y/f");
        let text = String::from_utf8(p.path.clone()).unwrap();
        assert!(text.starts_with("/srv/x y/.sshmcp-") && text.ends_with(".part"));
        assert_eq!(p.tag.len(), 32);
        assert_eq!(
            Partial::of("h:22", "/r/a".as_ref(), b"/f").path[..9],
            *b"/.sshmcp-"
        );
        let other = Partial::of("h:22", std::path::Path::new("/r/b"), b"/srv/x y/f");
        assert_ne!(other.tag, p.tag);
    }

    /// The remote steps of a transfer under every shell a host may have as `/bin/sh`: the
    /// checks of a destination and a source (where rsync is missing, as on BusyBox, told
    /// so), a partial made private and then given the source's mode, its hash, its
    /// publishing by a link, the second one refused where the destination now exists, and
    /// its removal. Names hold a quote and a space.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_transfer_steps_under_every_posix_shell() {
        use std::os::unix::ffi::OsStrExt as _;
        use std::os::unix::fs::PermissionsExt as _;
        let shells = crate::programs::Shells::new();
        for (shell, path) in shells.each() {
            let busybox = path == shells.busybox_path();
            let home = tempfile::tempdir().unwrap();
            // The umask a partial's mode is measured against.
            let run = |script: String, stdin: &[u8]| {
                let script = format!("umask 022\n{script}");
                crate::programs::run_under(&shell, &path, home.path(), &script, stdin)
            };
            let destination = home.path().join("got 'it'");
            let bytes = destination.as_os_str().as_bytes();
            let checked = run(destination_program(false), bytes);
            let source = run(source_program(), bytes);
            if busybox {
                assert_eq!(
                    (checked, source),
                    ("ok norsync\n".into(), "ok norsync\n".into())
                );
            } else {
                let dir = std::fs::canonicalize(home.path()).unwrap();
                assert!(checked.starts_with("ok "), "{shell:?}: {checked}");
                assert!(
                    checked.ends_with(&format!("\n{}", dir.display())),
                    "{checked}"
                );
                assert_eq!(source, "notfound\n", "{shell:?}");
                // `..` after a symlink is its target's parent, as the checks take it.
                std::fs::create_dir_all(home.path().join("x/y")).unwrap();
                std::fs::create_dir_all(home.path().join("a")).unwrap();
                std::os::unix::fs::symlink(home.path().join("x/y"), home.path().join("a/l"))
                    .unwrap();
                let through = home.path().join("a/l/../f");
                let checked = run(destination_program(false), through.as_os_str().as_bytes());
                assert!(
                    checked.ends_with(&format!("\n{}", dir.join("x").display())),
                    "{shell:?}: {checked}"
                );
                std::fs::remove_dir_all(home.path().join("a")).unwrap();
                std::fs::remove_dir_all(home.path().join("x")).unwrap();
            }
            let partial = Partial::of("h:22", "/src".as_ref(), bytes);
            assert_eq!(run(prepare_program(5, 0o640), &partial.path), "ok ready\n");
            let made = std::path::Path::new(std::ffi::OsStr::from_bytes(&partial.path));
            let mode = std::fs::metadata(made).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o640 & !0o022, "{shell:?}");
            std::fs::write(made, b"hello").unwrap();
            assert_eq!(run(partial_size_program(), &partial.path), "ok 5\n");
            let hashed = run(sha256_program(), &partial.path);
            assert_eq!(
                hashed,
                "ok 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\n"
            );
            assert_eq!(run(publish_program(&partial.tag, false), bytes), "ok\n");
            assert_eq!(std::fs::read(&destination).unwrap(), b"hello");
            assert!(!made.exists(), "{shell:?}");
            assert_eq!(run(prepare_program(5, 0o640), &partial.path), "ok ready\n");
            assert_eq!(run(publish_program(&partial.tag, false), bytes), "exists\n");
            assert!(!made.exists(), "{shell:?}: the refused partial is removed");
            assert_eq!(run(prepare_program(5, 0o640), &partial.path), "ok ready\n");
            assert_eq!(run(discard_program(), &partial.path), "ok\n");
            assert!(!made.exists(), "{shell:?}");
        }
    }

    /// The stop of a copy's remote rsync under every shell a host may have as `/bin/sh`
    /// (BusyBox with only its applets): the process whose environment holds the copy's mark
    /// is killed, and the program ends once it is gone.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_rsync_stop_runs_under_every_posix_shell() {
        use std::os::unix::process::ExitStatusExt as _;
        /// The marked process, killed and reaped whatever the test found.
        struct Marked(std::process::Child);
        impl Drop for Marked {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let home = tempfile::tempdir().unwrap();
        for (shell, path) in crate::programs::Shells::new().each() {
            let mark = crate::random::nonce("stop").unwrap();
            let mut marked = Marked(
                std::process::Command::new("sleep")
                    .arg("30")
                    .env(RSYNC_MARK_VAR, &mark)
                    .spawn()
                    .unwrap(),
            );
            let script = format!("_mark='{RSYNC_MARK_VAR}={mark}'\n{STOP_RSYNC}\necho stopped\n");
            let out = crate::programs::run_under(&shell, &path, home.path(), &script, b"");
            assert_eq!(out, "stopped\n", "{shell:?}");
            // Its environment went with its memory; its exit, for us to reap, follows.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            let ended = loop {
                if let Some(status) = marked.0.try_wait().unwrap() {
                    break status;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{shell:?}: still running"
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            };
            assert_eq!(ended.signal(), Some(9), "{shell:?}");
        }
    }
}
