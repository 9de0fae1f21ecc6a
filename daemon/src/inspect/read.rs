//! `read_file_range`: bytes of a regular file from an offset, at most a length and never more
//! than the daemon's output bound.

use sshmcp_proto::inspect::{FileRange, ReadRangeRequest};
use sshmcp_proto::{DaemonError, ErrorCode};

use super::{number, path_bytes, prelude, remote_text, run};
use crate::session::Session;

/// The program: only a regular file the user may read, then its size, then the range
/// (`tail -c +N` seeks on a regular file, so a far offset costs nothing).
fn script(offset: u64, length: u64) -> String {
    format!(
        "{}_o=$(stat -L -c '%F %s' -- \"$_p\" 2>&1) || _sshmcp_fail \"$_o\"\n\
         case $_o in 'regular file '*|'regular empty file '*) ;; *) echo notfile; exit 0 ;; esac\n\
         [ -r \"$_p\" ] || {{ echo denied; exit 0; }}\n\
         printf 'ok %s\\n' \"${{_o##* }}\"\n\
         tail -c +{} -- \"$_p\" | head -c {length}\n",
        prelude("stat tail head"),
        offset + 1
    )
}

pub async fn read(
    session: &Session,
    max_output_bytes: u64,
    req: ReadRangeRequest,
) -> Result<FileRange, DaemonError> {
    let path = path_bytes(&req.path)?;
    if req.length == 0 {
        return Err(DaemonError::new(
            ErrorCode::InvalidArguments,
            "`length` must be at least 1",
        ));
    }
    let length = req.length.min(max_output_bytes);
    // The status line comes first: room for it beside the range.
    let (size, data) = run(session, script(req.offset, length), &path, length + 64).await?;
    let file_size: u64 = number("size", size.trim())?;
    let bytes_read = data.len() as u64;
    let text = remote_text(&data);
    Ok(FileRange {
        data: text.text,
        encoding: text.encoding,
        offset: req.offset,
        bytes_read,
        file_size,
        eof: req.offset + bytes_read >= file_size,
    })
}
