//! `edit_file`: replaces a literal text in a remote file, on the host, in one program. GNU
//! `sed -z` reads the whole file as one record (a file holding a NUL byte is refused), with
//! the text turned into a pattern that matches only itself; the occurrences are counted by
//! what their removal takes off the size. The result goes into a temporary file beside the
//! target and is renamed over it as `write_file` does (owner, then mode, flush). The
//! target's state is noted before the first read and compared just before the rename: a
//! file changed during the edit is `file_changed`, never replaced by an edit of its old
//! content. The daemon holds the texts only, whatever the file's size; the host holds the
//! file (at most 64 MiB).
//!
//! A host whose sed has no `-z` (BusyBox's) sends a file of up to 1 MiB whole
//! instead: the daemon replaces the text and writes the result back through `write_file`,
//! with the hash of what it read as `expected_sha256`, so the same compare-and-swap keeps an
//! edit from landing on a file that changed meanwhile.

use sha2::{Digest, Sha256};
use sshmcp_proto::error::ErrorDetails;
use sshmcp_proto::files::{
    EditFileRequest, FileEdited, MAX_EDIT_FILE_BYTES, MAX_NEW_TEXT_BYTES, MAX_OLD_TEXT_BYTES,
    MAX_WRITE_BYTES, WriteFileRequest,
};
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::inspect;
use crate::remote::status;
use crate::session::Session;

/// How long an edit may take on the host (64 MiB through sed twice, hashed twice).
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// `text` as a GNU basic regular expression that matches exactly it, between `/`s.
fn pattern(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 2);
    for b in text {
        match b {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\\' | b'/' | b'.' | b'*' | b'[' | b']' | b'^' | b'$' => {
                out.push(b'\\');
                out.push(*b);
            }
            b => out.push(*b),
        }
    }
    out
}

/// `text` as sed's replacement that yields exactly it, between `/`s.
fn replacement(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 2);
    for b in text {
        match b {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\\' | b'/' | b'&' => {
                out.push(b'\\');
                out.push(*b);
            }
            b => out.push(*b),
        }
    }
    out
}

/// The sed programs: one that removes every occurrence (to count them), one that replaces
/// the first or all.
fn sed_programs(req: &EditFileRequest) -> (Vec<u8>, Vec<u8>) {
    let old = pattern(req.old_text.as_bytes());
    let mut count = b"s/".to_vec();
    count.extend_from_slice(&old);
    count.extend_from_slice(b"//g\n");
    let mut edit = b"s/".to_vec();
    edit.extend_from_slice(&old);
    edit.push(b'/');
    edit.extend_from_slice(&replacement(req.new_text.as_bytes()));
    edit.extend_from_slice(if req.replace_all { b"/g\n" } else { b"/\n" });
    (count, edit)
}

/// The program that edits. The two sed programs are written into it as base64 (shell text
/// cannot hold every byte; base64's letters are no shell syntax) and decoded into a private
/// temporary file: never argv, where other users could read the texts.
const EDIT: &str = include_str!("edit.sh");

pub(super) fn script(path: &[u8], req: &EditFileRequest) -> String {
    use base64::Engine as _;
    let (count, edit) = sed_programs(req);
    let encode = |p: &[u8]| base64::engine::general_purpose::STANDARD.encode(p);
    super::program(
        "mktemp mv rm chmod chown stat sha256sum sed tr wc cat",
        path,
        &[
            ("_expected", req.expected_sha256.clone().unwrap_or_default()),
            ("_count64", encode(&count)),
            ("_edit64", encode(&edit)),
            ("_max_file", MAX_EDIT_FILE_BYTES.to_string()),
            ("_max_whole", MAX_WRITE_BYTES.to_string()),
            ("_old_len", req.old_text.len().to_string()),
            ("_new_len", req.new_text.len().to_string()),
            ("_all", u8::from(req.replace_all).to_string()),
        ],
        EDIT,
    )
}

fn check_text(field: &str, text: &str, max: usize, may_be_empty: bool) -> Result<(), DaemonError> {
    if text.len() > max {
        return Err(super::invalid(format!(
            "`{field}` holds {} bytes; at most {max} (use write_file for larger changes)",
            text.len()
        )));
    }
    if text.contains('\0') {
        return Err(super::invalid(format!(
            "`{field}` contains a NUL character"
        )));
    }
    if text.is_empty() && !may_be_empty {
        return Err(super::invalid(format!("`{field}` is empty")));
    }
    Ok(())
}

/// Edits the file; see the module's description.
pub async fn edit(session: &Session, req: EditFileRequest) -> Result<FileEdited, DaemonError> {
    let path = super::file_path(&req.path, "path", true)?;
    check_text("old_text", &req.old_text, MAX_OLD_TEXT_BYTES, false)?;
    check_text("new_text", &req.new_text, MAX_NEW_TEXT_BYTES, true)?;
    super::check_expected(&req.expected_sha256)?;
    let (said, whole) = status::run_program(
        &session.host,
        script(&path, &req),
        Vec::new(),
        &path,
        // A file sent whole, after its line.
        MAX_WRITE_BYTES as u64 + 4096,
        TIMEOUT,
        false,
    )
    .await
    .map_err(super::nothing_changed)?;
    let mut words = said.split(' ');
    match (words.next(), words.next(), words.next()) {
        (Some("edited"), Some(k), Some(hash)) => {
            let (path, path_encoding) = inspect::remote_text(&path);
            Ok(FileEdited {
                path,
                path_encoding,
                replacements: k.parse().unwrap_or(0),
                sha256: hash.to_string(),
            })
        }
        (Some("changed"), detail, _) => Err(super::changed(detail.unwrap_or(""), false)),
        (Some("whole"), ..) => edit_here(session, req, whole).await,
        (Some("wholetoolarge"), Some(n), _) => Err(whole_too_large(n)),
        (Some("nomatch"), ..) => Err(no_match()),
        (Some("ambiguous"), Some(k), _) => Err(ambiguous(k.parse().unwrap_or(0))),
        (Some("toolarge"), Some(n), _) => Err(DaemonError::new(
            ErrorCode::FileTooLarge,
            format!(
                "the file holds {n} bytes; edit_file edits files up to {MAX_EDIT_FILE_BYTES} \
                 (64 MiB): nothing was changed (download, edit and upload it instead)"
            ),
        )),
        (Some("outgrows"), Some(n), _) => Err(DaemonError::new(
            ErrorCode::FileTooLarge,
            format!(
                "the edit would make the file {n} bytes; edit_file writes files up to \
                 {MAX_EDIT_FILE_BYTES} (64 MiB): nothing was changed (fewer replacements at a \
                 time, or download, edit and upload it)"
            ),
        )),
        (Some("binary"), ..) => Err(DaemonError::new(
            ErrorCode::InvalidRemoteType,
            "the file holds NUL bytes: edit_file edits text files",
        )),
        _ => Err(DaemonError::internal(format!(
            "unexpected answer from the host: {said}"
        ))),
    }
}

/// Edits a file the host sent whole (see the module's description).
async fn edit_here(
    session: &Session,
    req: EditFileRequest,
    content: Vec<u8>,
) -> Result<FileEdited, DaemonError> {
    let (write, replacements) = write_back(req, &content)?;
    let written = super::write::write(session, write)
        .await
        .map_err(|e| match e.code {
            // Said of a write the agent did not ask for: what it means for the edit.
            ErrorCode::FileChanged | ErrorCode::RemotePathNotFound => DaemonError::new(
                ErrorCode::FileChanged,
                "the file changed (or went) between edit_file's read and its write; nothing \
                 was changed (call edit_file again)",
            )
            .with_details(*e.details),
            _ => e,
        })?;
    Ok(FileEdited {
        path: written.path,
        path_encoding: written.path_encoding,
        replacements,
        sha256: written.sha256,
    })
}

/// The write that publishes an edit of `content` (what the host sent): the whole edited file
/// over the old one, only while the old one still hashes as `content` did.
fn write_back(
    req: EditFileRequest,
    content: &[u8],
) -> Result<(WriteFileRequest, u64), DaemonError> {
    let read = crate::random::hex(&Sha256::digest(content));
    if req.expected_sha256.as_ref().is_some_and(|e| *e != read) {
        return Err(super::changed(&read, false));
    }
    // The host checked the size before it sent the file: it may have grown since.
    if content.len() > MAX_WRITE_BYTES {
        return Err(whole_too_large(content.len()));
    }
    let (edited, replacements) = replaced(content, &req)?;
    if edited.len() > MAX_WRITE_BYTES {
        return Err(DaemonError::new(
            ErrorCode::FileTooLarge,
            format!(
                "the edit would make the file {} bytes; on this host (its sed has no -z) \
                 edit_file writes files up to {MAX_WRITE_BYTES} (1 MiB): nothing was changed \
                 (fewer replacements at a time)",
                edited.len()
            ),
        ));
    }
    let write = WriteFileRequest {
        auth: req.auth,
        path: req.path,
        content: edited,
        mode: None,
        create_dirs: false,
        overwrite: true,
        expected_sha256: Some(read),
    };
    Ok((write, replacements))
}

/// A file too large for the daemon to edit on a host whose sed has no `-z`.
fn whole_too_large(size: impl std::fmt::Display) -> DaemonError {
    DaemonError::new(
        ErrorCode::HostToolMissing,
        format!(
            "the host's sed has no -z, without which edit_file edits files up to \
             {MAX_WRITE_BYTES} bytes (1 MiB); this one holds {size}: nothing was changed (edit \
             it with exec and the host's own tools, e.g. `sed -i` for a change within lines)"
        ),
    )
}

/// `content` with `old_text` replaced as the request asks, and how many times: the
/// occurrences sed's `s///g` finds (leftmost first, none overlapping), which must be one
/// unless `replace_all`.
fn replaced(content: &[u8], req: &EditFileRequest) -> Result<(Vec<u8>, u64), DaemonError> {
    let (old, new) = (req.old_text.as_bytes(), req.new_text.as_bytes());
    let found: Vec<usize> = memchr::memmem::find_iter(content, old).collect();
    match found.len() {
        0 => return Err(no_match()),
        1 => {}
        k if !req.replace_all => return Err(ambiguous(k as u64)),
        _ => {}
    }
    let mut edited = Vec::with_capacity(content.len() + found.len() * new.len());
    let mut from = 0;
    for at in &found {
        edited.extend_from_slice(&content[from..*at]);
        edited.extend_from_slice(new);
        from = at + old.len();
    }
    edited.extend_from_slice(&content[from..]);
    Ok((edited, found.len() as u64))
}

fn no_match() -> DaemonError {
    DaemonError::new(
        ErrorCode::EditNoMatch,
        "old_text does not occur in the file; nothing was changed (read the file again: \
         whitespace and line ends must match exactly)",
    )
}

fn ambiguous(count: u64) -> DaemonError {
    DaemonError::new(
        ErrorCode::EditAmbiguousMatch,
        format!(
            "old_text occurs {count} times; nothing was changed (add surrounding lines to make \
             it unique, or pass replace_all: true)"
        ),
    )
    .with_details(ErrorDetails {
        count: Some(count),
        ..ErrorDetails::default()
    })
}

// A call answered so adds nothing to its trail line but how it ended.
impl crate::audit::Answer for sshmcp_proto::files::FileEdited {}

#[cfg(test)]
mod tests {
    use super::*;

    /// What GNU sed makes of the programs, run here on this machine's sed.
    fn sed(program: &[u8], input: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let (prog, file) = (dir.path().join("p"), dir.path().join("f"));
        std::fs::write(&prog, program).unwrap();
        std::fs::write(&file, input).unwrap();
        let out = std::process::Command::new("sed")
            .env("LC_ALL", "C")
            .args(["-z", "-f"])
            .arg(&prog)
            .arg("--")
            .arg(&file)
            .output()
            .unwrap();
        std::io::stderr().write_all(&out.stderr).unwrap();
        out.stdout
    }

    fn request(old: &str, new: &str, all: bool) -> EditFileRequest {
        EditFileRequest {
            auth: sshmcp_proto::session::SessionAuth {
                session_id: "s".into(),
                session_key: "k".into(),
            },
            path: sshmcp_proto::inspect::RemotePath {
                path: "x".into(),
                encoding: sshmcp_proto::exec::Encoding::Utf8,
            },
            old_text: old.into(),
            new_text: new.into(),
            replace_all: all,
            expected_sha256: None,
        }
    }

    /// The daemon's own edit (for a host without `sed -z`) finds what sed's `s///g` finds:
    /// leftmost first, none overlapping, every byte literal; one unless `replace_all`.
    #[test]
    fn an_edit_in_the_daemon_replaces_as_sed_does() {
        let edit = |content: &[u8], old: &str, new: &str, all: bool| {
            replaced(content, &request(old, new, all)).map_err(|e| (e.code, e.details))
        };
        assert_eq!(
            edit(b"a.b a*b\n", "a*b", "[&\\1]", false),
            Ok((b"a.b [&\\1]\n".to_vec(), 1))
        );
        assert_eq!(edit(b"aaa", "aa", "b", true), Ok((b"ba".to_vec(), 1)));
        assert_eq!(
            edit(b"x\ny\nx\ny", "x\ny", "z", true),
            Ok((b"z\nz".to_vec(), 2))
        );
        let (code, details) = edit(b"x x x", "x", "y", false).unwrap_err();
        assert_eq!(
            (code, details.count),
            (ErrorCode::EditAmbiguousMatch, Some(3))
        );
        assert_eq!(
            edit(b"\xe9t\xe9", "\u{e9}", "e", true).unwrap_err().0,
            ErrorCode::EditNoMatch,
            "Latin-1 bytes are not the UTF-8 text"
        );
        for (content, old) in [(&b"x x x"[..], "x"), (b"x\ny\nx\ny", "x\ny")] {
            let (edited, k) = edit(content, old, "NEW", true).unwrap();
            assert_eq!(
                sed(&sed_programs(&request(old, "NEW", true)).1, content),
                edited
            );
            assert_eq!(k, 2 + u64::from(old == "x"));
        }
    }

    /// The daemon's edit goes back only over the file it read (its hash is the write's
    /// `expected_sha256`), replacing it whole; a stale hash of the agent's, a file grown past
    /// 1 MiB since the host measured it and an edit past 1 MiB change nothing.
    #[test]
    fn an_edit_in_the_daemon_writes_back_over_what_it_read_only() {
        let content = b"one two\n";
        let (write, k) = write_back(request("two", "three", false), content).unwrap();
        assert_eq!(
            (
                write.content.as_slice(),
                k,
                write.overwrite,
                write.create_dirs,
                write.mode
            ),
            (&b"one three\n"[..], 1, true, false, None)
        );
        let read = crate::random::hex(&Sha256::digest(content));
        assert_eq!(write.expected_sha256.as_deref(), Some(read.as_str()));
        let mut stale = request("two", "three", false);
        stale.expected_sha256 = Some("0".repeat(64));
        let e = write_back(stale, content).unwrap_err();
        assert_eq!(
            (e.code, e.details.sha256),
            (ErrorCode::FileChanged, Some(read))
        );
        let grown = vec![b'a'; MAX_WRITE_BYTES + 1];
        let e = write_back(request("a", "b", true), &grown).unwrap_err();
        assert_eq!(e.code, ErrorCode::HostToolMissing);
        let mut full = vec![b'a'; MAX_WRITE_BYTES];
        full[0] = b'Z';
        assert!(write_back(request("Z", "Y", false), &full).is_ok());
        let e = write_back(request("Z", "YY", false), &full).unwrap_err();
        assert_eq!(e.code, ErrorCode::FileTooLarge);
    }

    /// An edit may make a file no larger than one it would edit: 1024 replacements of one
    /// byte by 64 KiB make exactly 64 MiB, one byte more is refused before anything is
    /// written (under every shell here with GNU `sed -z`; BusyBox's sed has no `-z`).
    #[test]
    fn the_edited_file_is_bounded_exactly_at_and_one_past_the_limit() {
        let shells = crate::programs::Shells::new();
        let wide = "b".repeat(sshmcp_proto::files::MAX_NEW_TEXT_BYTES);
        let req = request("a", &wide, true);
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join("f");
        let run = |shell: &[String], path: &str| {
            let bytes = file.as_os_str().as_encoded_bytes();
            crate::programs::run_under(shell, path, home.path(), &script(bytes, &req), b"")
        };
        let mut checked_at_the_limit = false;
        for (shell, path) in shells.each() {
            let past = [b"a".repeat(1024), b"\n".to_vec()].concat();
            std::fs::write(&file, &past).unwrap();
            let said = run(&shell, &path);
            // Without `sed -z` (BusyBox) the file goes to the daemon, whose bound is 1 MiB.
            if said.starts_with("ok whole\n") {
                continue;
            }
            let limit = MAX_EDIT_FILE_BYTES + 1;
            assert_eq!(said, format!("ok outgrows {limit}\n"), "{shell:?}");
            assert_eq!(std::fs::read(&file).unwrap(), past, "{shell:?}");
            if !checked_at_the_limit {
                std::fs::write(&file, b"a".repeat(1024)).unwrap();
                let said = run(&shell, &path);
                assert!(said.starts_with("ok edited 1024 "), "{shell:?}: {said}");
                let size = std::fs::metadata(&file).unwrap().len();
                assert_eq!(size, MAX_EDIT_FILE_BYTES, "{shell:?}");
                checked_at_the_limit = true;
            }
        }
    }

    #[test]
    fn every_special_byte_is_taken_literally() {
        let text = "a.b*c[d]^e$f\\g/h&i\nj \t+?|(){}";
        let input = format!("start {text} middle {text} end");
        let (count, edit) = sed_programs(&request(text, "R&\\/\nS", false));
        assert_eq!(sed(&count, input.as_bytes()), b"start  middle  end");
        assert_eq!(
            String::from_utf8(sed(&edit, input.as_bytes())).unwrap(),
            format!("start R&\\/\nS middle {text} end")
        );
        let (_, all) = sed_programs(&request(text, "", true));
        assert_eq!(sed(&all, input.as_bytes()), b"start  middle  end");
        // No trailing newline is added, and none is lost.
        assert_eq!(sed(&all, b"x\n"), b"x\n");
        assert_eq!(sed(&all, b"x"), b"x");
    }
}
