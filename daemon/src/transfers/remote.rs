//! The remote end of a transfer: an upload's destination checked (and its directory resolved),
//! the dot-file beside it that the copy goes into, the publishing by a same-directory rename
//! or link, and the SHA-256 of a remote file. Each is one fixed `/bin/sh` program on the
//! building block with the path on its stdin, as the inspection tools run.

use std::time::Duration;

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

/// An upload's destination, checked on the host: its directory exists and the session's user
/// may write there; the file is missing, or (with `overwrite`) a regular file.
pub async fn destination(
    session: &Session,
    remote: &[u8],
    overwrite: bool,
) -> Result<Destination, DaemonError> {
    let name = inspect::file_name(remote).ok_or_else(|| {
        DaemonError::new(
            ErrorCode::InvalidArguments,
            "`remote_path` must end with a file name",
        )
    })?;
    let script = format!(
        "{}unset CDPATH\n\
         _d=${{_p%/*}}; _d=${{_d:-/}}\n\
         _e=$(command stat -L -c %F -- \"$_d\" 2>&1) || _sshmcp_fail \"$_e\"\n\
         [ \"$_e\" = directory ] || {{ echo notdir; exit 0; }}\n\
         if [ -L \"$_p\" ] || {{ [ -e \"$_p\" ] && [ ! -f \"$_p\" ]; }}; then echo notfile; exit 0; fi\n\
         if [ -e \"$_p\" ] && [ {overwrite} = 0 ]; then echo exists; exit 0; fi\n\
         cd -- \"$_d\" 2>/dev/null && [ -w . ] || {{ echo denied; exit 0; }}\n\
         _c=$(pwd -P; printf .); _c=${{_c%?.}}\n\
         _i=$(command cat /etc/machine-id 2>/dev/null) || _i=; [ -n \"$_i\" ] || _i=$(uname -n)\n\
         printf 'ok %s %s\\n%s' \"$_i\" \"$(command stat -c %d:%i .)\" \"$_c\"\n",
        status::prelude("stat rsync"),
        overwrite = u8::from(overwrite),
    );
    let (identity, directory) = status::run(session, script, remote, 64 * 1024).await?;
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
    let script = format!(
        "{}_o=$(command stat -L -c '%s %a %F' -- \"$_p\" 2>&1) || _sshmcp_fail \"$_o\"\n\
         case ${{_o#* * }} in 'regular file'|'regular empty file') ;; *) echo notfile; exit 0 ;; esac\n\
         [ -r \"$_p\" ] || {{ echo denied; exit 0; }}\n\
         _s=${{_o%% *}}; _o=${{_o#* }}\n\
         printf 'ok %s %s\\n' \"$_s\" \"${{_o%% *}}\"\n",
        status::prelude("stat rsync"),
    );
    let (size, _) = status::run(session, script, remote, 4096)
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
    let moved = match overwrite {
        // A directory that took the destination's name refuses the rename: not the
        // destination `overwrite` was given for, and nothing was removed.
        true => {
            "if ! _e=$(command mv -f -T -- \"$_t\" \"$_p\" 2>&1); then\n\
             if [ -d \"$_p\" ] && [ ! -L \"$_p\" ]; then echo notfile; exit 0; fi\n\
             _sshmcp_fail \"$_e\"; fi\necho ok\n"
        }
        false => {
            "if _e=$(command ln -T -- \"$_t\" \"$_p\" 2>&1); then command rm -f -- \"$_t\"; echo ok; exit 0; fi\n\
             if [ -e \"$_p\" ] || [ -L \"$_p\" ]; then command rm -f -- \"$_t\"; echo exists; exit 0; fi\n\
             _sshmcp_fail \"$_e\"\n"
        }
    };
    // Another user cannot take over the user's own file, so the check before the move holds.
    let script = format!(
        "{}_t=${{_p%/*}}/.sshmcp-{}.part\n{OWN_FILE}\
         if ! _own \"$_t\"; then [ -e \"$_t\" ] || [ -L \"$_t\" ] || \
         _sshmcp_fail 'the partial file is gone'; echo 'ok notown'; exit 0; fi\n{moved}",
        status::prelude("mv ln rm stat id"),
        partial.tag
    );
    match status::run(session, script, destination, 4096).await {
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
/// the partial a moment later, under a retry that resumes from it.
pub async fn stop_rsync(session: &Session, mark: &str) -> Result<(), DaemonError> {
    // grep exits 2 when it could not read some other user's `environ`, even after a match:
    // the list it printed decides.
    let script = format!(
        "_i=0\n\
         while _l=$(command grep -lzxF '{RSYNC_MARK_VAR}={mark}' /proc/[0-9]*/environ 2>/dev/null); \
         [ -n \"$_l\" ]; do\n\
         _l=$(printf '%s\\n' \"$_l\" | command sed 's|^/proc/||; s|/environ$||')\n\
         command kill -KILL $_l 2>/dev/null\n\
         _i=$((_i + 1)); [ $_i -ge 100 ] && exit 1\n\
         command sleep 0.05\n\
         done\n"
    );
    let program = crate::remote::Program::new(script, Duration::from_secs(10), 4096);
    let result = crate::remote::run(&session.host, program).await?;
    match result.exit_code {
        Some(0) => Ok(()),
        _ => Err(DaemonError::internal(
            "the remote rsync of a stopped copy outlived 5 s of SIGKILL",
        )),
    }
}

/// `_own FILE`: whether FILE is the session user's own regular file with one link. Nobody
/// else can make it otherwise where others may write (a sticky directory), so it is the last
/// check before rsync writes the partial and before it is published.
const OWN_FILE: &str = "_own() { _o=$(command stat -c '%h %u %F' -- \"$1\" 2>/dev/null) || return 1; \
     set -- $_o; _u=$(command id -u) || return 1; \
     [ \"$1 $2 $3 $4\" = \"1 $_u regular file\" ] || [ \"$1 $2 $3 $4 $5\" = \"1 $_u regular empty file\" ]; }\n";

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
    let script = format!(
        "{}_u=$(command id -u) || exit 1\n\
         if _o=$(command stat -c '%s %h %u %F' -- \"$_p\" 2>/dev/null); then\n\
         set -- $_o\n\
         case $4$5$6 in regularfile|regularemptyfile) _k=1 ;; *) _k=0 ;; esac\n\
         if [ $_k = 0 ] || [ \"$1\" -gt {size} ] || [ \"$2\" -gt 1 ] || [ \"$3\" != \"$_u\" ]; then\n\
         command rm -f -- \"$_p\" 2>/dev/null\n\
         if [ -e \"$_p\" ] || [ -L \"$_p\" ]; then echo 'ok inway'; exit 0; fi; fi; fi\n\
         if ! {{ [ -e \"$_p\" ] || [ -L \"$_p\" ]; }}; then\n\
         _m=$(printf '%o' $((0{mode:o} & ~0$(umask)))); _k=$(umask); umask 077; set -C\n\
         {{ command exec 7>\"$_p\"; }} 2>/dev/null || {{ echo 'ok inway'; exit 0; }}\n\
         set +C; umask \"$_k\"; _f=\"$_p\"; [ -e /proc/self/fd/7 ] && _f=/proc/self/fd/7\n\
         _e=$(command chmod \"$_m\" -- \"$_f\" 2>&1) || _sshmcp_fail \"$_e\"; exec 7>&-; fi\n\
         {OWN_FILE}_own \"$_p\" || {{ echo 'ok inway'; exit 0; }}\n\
         echo 'ok ready'\n",
        status::prelude("stat rm id chmod"),
        mode = mode & 0o777,
    );
    let (said, _) = status::run(session, script, &partial.path, 4096).await?;
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
    let script = format!(
        "{}_e=$(command rm -f -- \"$_p\" 2>&1) || _sshmcp_fail \"$_e\"\necho ok\n",
        status::prelude("rm")
    );
    status::run(session, script, &partial.path, 4096)
        .await
        .map(drop)
}

/// A remote file of `size` bytes' SHA-256: `openssl dgst` where there is one (four times
/// faster than coreutils there), else `sha256sum`. The path travels on stdin, and the file is
/// hashed from stdin too: both tools mark the digest of an odd file name with a backslash.
pub async fn sha256(session: &Session, remote: &[u8], size: u64) -> Result<String, DaemonError> {
    // Only stdout counts (a build of openssl may warn on stderr and still hash), and only a
    // digest that looks like one: else `sha256sum`, whose errors are the answer.
    let script = format!(
        "{}_h=$(command openssl dgst -sha256 -r 2>/dev/null < \"$_p\") || _h=\n\
         _h=${{_h%% *}}\n\
         case $_h in *[!0-9a-f]*|'') _h= ;; esac\n\
         if [ ${{#_h}} -ne 64 ]; then \
         _h=$(command sha256sum 2>&1 < \"$_p\") || _sshmcp_fail \"$_h\"; _h=${{_h%% *}}; fi\n\
         printf 'ok %s\\n' \"$_h\"\n",
        status::prelude("sha256sum")
    );
    // 30 s, and one more per 10 MiB: a slow disk reads at 10 MiB/s.
    let timeout = Duration::from_secs(30 + size / (10 << 20));
    let (hash, _) = status::run_within(session, script, remote, 4096, timeout)
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
}
