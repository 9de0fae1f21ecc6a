//! `read_file_range`: bytes of a regular file from an offset, at most a length and never more
//! than the daemon's output bound.

use sshmcp_proto::inspect::{FileRange, ReadRangeRequest};
use sshmcp_proto::{DaemonError, ErrorCode};

use super::{number, path_bytes, prelude, remote_text, run};
use crate::session::Session;

/// The program: only a regular file the user may read, then its size, then the range, one
/// byte longer than asked (whether more follows tells `eof`, also where the size is unknown
/// or changing). `tail -c +N` seeks on a regular file, so a far offset costs nothing.
fn script(start: u64, read_length: u64) -> String {
    format!(
        "{}_o=$(command stat -L -c '%F %s' -- \"$_p\" 2>&1) || _sshmcp_fail \"$_o\"\n\
         case $_o in 'regular file '*|'regular empty file '*) ;; *) echo notfile; exit 0 ;; esac\n\
         [ -r \"$_p\" ] || {{ echo denied; exit 0; }}\n\
         printf 'ok %s\\n' \"${{_o##* }}\"\n\
         command tail -c +{start} -- \"$_p\" | command head -c {read_length}\n",
        prelude("stat tail head")
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
    // `tail -c +N` counts from 1; an offset beyond i64 is no offset a host can seek to.
    let start = i64::try_from(req.offset)
        .ok()
        .and_then(|o| o.checked_add(1))
        .ok_or_else(|| DaemonError::new(ErrorCode::InvalidArguments, "`offset` is too large"))?;
    let length = req.length.min(max_output_bytes);
    // The status line comes first: room for it beside the range and its extra byte.
    let script = script(start as u64, length + 1);
    let (size, mut data) = run(session, script, &path, length + 65).await?;
    let file_size: u64 = number("size", size.trim())?;
    let eof = data.len() as u64 <= length;
    data.truncate(length as usize);
    let (text, encoding) = remote_text(&data);
    Ok(FileRange {
        data: text,
        encoding,
        offset: req.offset,
        bytes_read: data.len() as u64,
        file_size,
        eof,
    })
}
