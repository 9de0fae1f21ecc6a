//! `write_file`: the content goes into a temporary file beside the target (the same
//! directory, so the same file system), is flushed, takes the old file's mode and owner, and
//! is renamed over the target: a reader sees the old file or the new one, never half of one.
//! A failure at any step removes the temporary file (the program's exit trap).
//!
//! With `expected_sha256` the target's state (inode, size, change time) is noted and it is
//! hashed before the write, and its state is compared again just before the rename; a
//! writer that slips between that last look and the rename (a few system calls) is the
//! window that remains.

use sha2::{Digest, Sha256};
use sshmcp_proto::DaemonError;
use sshmcp_proto::files::{FileWritten, MAX_WRITE_BYTES, WriteFileRequest};

use crate::inspect;
use crate::remote::status;
use crate::session::Session;

/// How long a write may take on the host (1 MiB over a slow link, a slow disk's flush).
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The program that writes; its stdin is the content.
fn script(path: &[u8], req: &WriteFileRequest) -> String {
    let expected = req.expected_sha256.as_deref().unwrap_or("");
    let (make_dirs, mkdir) = match req.create_dirs {
        true => (
            "_e=$(command mkdir -p -- \"${_p%/*}/\" 2>&1) || _sshmcp_fail \"$_e\"\n",
            " mkdir",
        ),
        false => ("", ""),
    };
    // A new file gets `mode`, else what the umask leaves of 0666; an old one keeps its own
    // (unless `mode`).
    let mode = match req.mode {
        Some(mode) => format!("command chmod {mode:o} \"$_t\" || exit 1\n"),
        None => format!(
            "if [ $_x = 1 ]; then {}else command chmod \"$(printf '%o' $((0666 & ~0$(umask))))\" \
             \"$_t\" || exit 1; fi\n",
            super::KEEP_MODE
        ),
    };
    let publish = match req.overwrite || !expected.is_empty() {
        true => super::REPLACE,
        false => {
            "if ! _e=$(command ln -T -- \"$_t\" \"$_p\" 2>&1); then\n\
             if [ -e \"$_p\" ] || [ -L \"$_p\" ]; then echo exists; exit 0; fi\n\
             _sshmcp_fail \"$_e\"; fi\n"
        }
    };
    format!(
        "{prelude}{make_dirs}{checks}\
         if [ -n '{expected}' ]; then _same; \
         elif [ $_x = 1 ] && [ {overwrite} = 0 ]; then echo exists; exit 0; fi\n\
         {writable}{temporary}\
         _e=$(command cat 2>&1 > \"$_t\") || _sshmcp_fail \"$_e\"\n\
         {keep}{mode}{flush}{publish}\
         printf 'ok written %s\\n' $_x\n",
        prelude = status::prelude_with_path(
            &format!("mktemp mv ln rm chmod chown stat sha256sum cat{mkdir}"),
            path
        ),
        checks = super::target_checks(expected),
        writable = super::WRITABLE,
        temporary = super::temporary("write"),
        keep = super::KEEP_OWNER,
        flush = super::FLUSH_AND_RECHECK,
        overwrite = u8::from(req.overwrite),
    )
}

/// Writes the file; see the module's description.
pub async fn write(session: &Session, req: WriteFileRequest) -> Result<FileWritten, DaemonError> {
    let path = super::file_path(&req.path)?;
    if req.content.len() > MAX_WRITE_BYTES {
        return Err(super::invalid(format!(
            "`content` holds {} bytes; at most {MAX_WRITE_BYTES} (1 MiB) are written at once \
             (upload_start copies larger files)",
            req.content.len()
        )));
    }
    super::check_expected(&req.expected_sha256)?;
    if req.mode.is_some_and(|m| m > 0o7777) {
        return Err(super::invalid("`mode` must be at most four octal digits"));
    }
    let sha256 = crate::session::key::hex(&Sha256::digest(&req.content));
    let (said, _) = status::run_program(
        session,
        script(&path, &req),
        req.content.clone(),
        &path,
        4096,
        TIMEOUT,
        false,
    )
    .await
    .map_err(super::nothing_changed)?;
    let (word, detail) = said.split_once(' ').unwrap_or((&said, ""));
    match word {
        "written" => {
            let (path, path_encoding) = inspect::remote_text(&path);
            Ok(FileWritten {
                path,
                path_encoding,
                bytes_written: req.content.len() as u64,
                sha256,
                created: detail == "0",
            })
        }
        "changed" => Err(super::changed(detail)),
        _ => Err(DaemonError::internal(format!(
            "unexpected answer from the host: {said}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sshmcp_proto::exec::Encoding;
    use sshmcp_proto::inspect::RemotePath;
    use sshmcp_proto::session::SessionAuth;

    fn request(expected: Option<&str>, overwrite: bool) -> WriteFileRequest {
        WriteFileRequest {
            auth: SessionAuth {
                session_id: "s".into(),
                session_key: "k".into(),
            },
            path: RemotePath {
                path: "x".into(),
                encoding: Encoding::Utf8,
            },
            content: vec![],
            mode: None,
            create_dirs: false,
            overwrite,
            expected_sha256: expected.map(String::from),
        }
    }

    #[test]
    fn the_path_is_no_shell_text_and_publishing_follows_overwrite() {
        let s = script(b"$(touch x) 'q'", &request(None, false));
        assert!(!s.contains("$(touch x)") && s.contains("JCh0b3VjaCB4KSAncSc="));
        assert!(s.contains("ln -T") && !s.contains("mv -f -T"));
        let s = script(b"x", &request(Some(&"a".repeat(64)), false));
        assert!(s.contains("mv -f -T"), "a checked write replaces");
    }
}
