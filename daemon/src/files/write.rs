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
use sshmcp_proto::files::{FileWritten, MAX_WRITE_BYTES, WriteFileRequest};
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::inspect;
use crate::remote::status;
use crate::session::Session;

/// How long a write may take on the host (1 MiB over a slow link, a slow disk's flush).
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The program that writes; its stdin is the content. A new file gets `mode`, else what the
/// umask leaves of 0666; an old one keeps its own (unless `mode`). Without `overwrite` (and
/// `expected_sha256`) it is published by a hard link, which fails where a file appeared
/// meanwhile.
const WRITE: &str = include_str!("write.sh");

pub(super) fn script(path: &[u8], req: &WriteFileRequest) -> String {
    let mkdir = if req.create_dirs { " mkdir" } else { "" };
    super::program(
        &format!("mktemp mv ln rm chmod chown stat sha256sum cat{mkdir}"),
        path,
        &[
            ("_expected", req.expected_sha256.clone().unwrap_or_default()),
            ("_overwrite", u8::from(req.overwrite).to_string()),
            ("_create_dirs", u8::from(req.create_dirs).to_string()),
            ("_mode", super::octal(req.mode)),
        ],
        WRITE,
    )
}

/// Writes the file; see the module's description.
pub async fn write(session: &Session, req: WriteFileRequest) -> Result<FileWritten, DaemonError> {
    let path = super::file_path(&req.path, "path", true)?;
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
    let sha256 = crate::random::hex(&Sha256::digest(&req.content));
    let (said, _) = status::run_program(
        &session.host,
        script(&path, &req),
        req.content.clone(),
        &path,
        4096,
        TIMEOUT,
        false,
    )
    .await
    .map_err(|e| match e.code {
        // The file itself need not be there: a directory on its way is missing.
        ErrorCode::RemotePathNotFound if !req.create_dirs => DaemonError::new(
            e.code,
            format!(
                "{} (a directory on its way is missing: pass create_dirs: true to make it)",
                e.message
            ),
        ),
        _ => super::nothing_changed(e),
    })?;
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
        "changed" => Err(super::changed(detail, true)),
        _ => Err(DaemonError::internal(format!(
            "unexpected answer from the host: {said}"
        ))),
    }
}

// A call answered so adds nothing to its trail line but how it ended.
impl crate::audit::Answer for sshmcp_proto::files::FileWritten {}

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
    fn the_path_is_no_shell_text() {
        let s = script(b"$(touch x) 'q'", &request(None, false));
        assert!(!s.contains("$(touch x)") && s.contains("JCh0b3VjaCB4KSAncSc="));
    }
}
