//! `list_directory`: one page of a directory's entries, from `find -printf` sorted by name
//! bytes, paged on the host so an answer stays small whatever the directory holds. A host
//! without GNU's `find -printf` or `-z` options (BusyBox, as on Alpine) lists every entry with
//! the shell's own glob and `stat -c`, and the daemon sorts and pages.

use std::sync::Arc;

use sshmcp_proto::inspect::{
    DEFAULT_LIST_LIMIT, DirEntry, FileType, ListRequest, Listing, MAX_LIST_LIMIT,
};
use sshmcp_proto::service::tools;
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::inspect::{file_type, mode_string, number, path_bytes, remote_text, time};
use crate::operation::Operation;
use crate::remote::status::{prelude, run};
use crate::session::{Registry, Session};

/// The most bytes a page may take: names up to 255 bytes and link targets up to 4096 for
/// each of `MAX_LIST_LIMIT` entries, with room to spare.
const MAX_PAGE_BYTES: u64 = 8 * 1024 * 1024;

/// The program. A directory is entered first (its search permission), then counted and
/// listed: one record per entry, NUL-terminated, fields `/`-separated (a name holds neither),
/// the link target last since it may hold `/`. Records sort by their first field, the name,
/// byte by byte. The page is read fresh: an entry removed while `find` reads the directory is
/// left out, and a link whose target may not be read has an empty one. `find` complains of
/// both on stderr, which would fail the call: `_find` drops those two complaints and passes
/// any other (an I/O error, a stale NFS handle) on.
///
/// Without those GNU options, `ok all` and a record per entry in the same layout, with the
/// raw mode in hex (`x81a4`) for the type and `@` and seconds since the epoch for the mtime:
/// the shell's glob gives the names (dotfiles too; `.`, `..` and an unmatched pattern
/// skipped), `stat -c` the rest, one entry at a time.
const LIST: &str = include_str!("list_directory.sh");

/// The program for the page after `skip` entries, at most `limit` long.
fn script(skip: u64, limit: u32) -> String {
    let prelude = prelude("stat find grep sort head tail wc readlink");
    format!("{prelude}_skip={skip}\n_limit={limit}\n{LIST}")
}

pub async fn list(session: &Session, req: ListRequest) -> Result<Listing, DaemonError> {
    let path = path_bytes(&req.path, "path")?;
    let limit = req.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    if !(1..=MAX_LIST_LIMIT).contains(&limit) {
        return Err(DaemonError::new(
            ErrorCode::InvalidArguments,
            format!("`limit` must be 1..={MAX_LIST_LIMIT}"),
        ));
    }
    // `tail -n +N` counts from 1. No directory holds i64::MAX entries (the largest count the
    // host's tools take), so a larger offset reads as that one: past the end.
    let skip = req.offset.saturating_add(1).min(i64::MAX as u64);
    let script = script(skip, limit);
    let (said, records) = run(&session.host, script, &path, MAX_PAGE_BYTES).await?;
    let (entries, total) = page(&path, &said, &records, req.offset, limit)?;
    let truncated = req.offset.saturating_add(entries.len() as u64) < total;
    Ok(Listing {
        entries,
        total,
        offset: req.offset,
        truncated,
    })
}

/// The entries of the page at `offset` (at most `limit`) and the directory's count, from what
/// the program said: its count and that page, or `all` and every entry, unsorted (a host
/// without GNU's options), sorted and paged here.
fn page(
    path: &[u8],
    said: &str,
    records: &[u8],
    offset: u64,
    limit: u32,
) -> Result<(Vec<DirEntry>, u64), DaemonError> {
    let mut records: Vec<&[u8]> = records
        .split(|b| *b == 0)
        .filter(|r| !r.is_empty())
        .collect();
    let total = match said.trim() {
        "all" => {
            records.sort_by(|a, b| name_of(a).cmp(name_of(b)));
            let all = records.len() as u64;
            let first = usize::try_from(offset).unwrap_or(usize::MAX);
            records = records
                .into_iter()
                .skip(first)
                .take(limit as usize)
                .collect();
            all
        }
        total => number("total", total)?,
    };
    let entries = records
        .into_iter()
        .map(|record| entry(path, record))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((entries, total))
}

/// A record's name: what comes before its first `/` (a name holds none).
fn name_of(record: &[u8]) -> &[u8] {
    record.split(|b| *b == b'/').next().unwrap_or_default()
}

/// One record, `name/type/size/mode/mtime/target`, of the directory at `dir`. The type is
/// `find`'s letter, or `x` and the raw mode in hex; the mtime `find`'s time, or `@` and
/// seconds since the epoch.
fn entry(dir: &[u8], record: &[u8]) -> Result<DirEntry, DaemonError> {
    let fields: Vec<&[u8]> = record.splitn(6, |b| *b == b'/').collect();
    let [name, kind, size, mode, mtime, target] = fields[..] else {
        return Err(DaemonError::internal(format!(
            "bad listing record: {:?}",
            String::from_utf8_lossy(record)
        )));
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let file_type = match kind {
        [b'x', hex @ ..] => file_type(
            u32::from_str_radix(&text(hex), 16)
                .map_err(|_| DaemonError::internal(format!("bad mode: {:?}", text(hex))))?,
        ),
        b"f" => FileType::File,
        b"d" => FileType::Directory,
        b"l" => FileType::Symlink,
        b"p" => FileType::Fifo,
        b"s" => FileType::Socket,
        b"c" => FileType::CharDevice,
        b"b" => FileType::BlockDevice,
        _ => FileType::Other,
    };
    let mode = u32::from_str_radix(&text(mode), 8)
        .map_err(|_| DaemonError::internal(format!("bad mode: {:?}", text(mode))))?;
    let mut full = dir.to_vec();
    if !full.ends_with(b"/") {
        full.push(b'/');
    }
    full.extend_from_slice(name);
    let (name, name_encoding) = remote_text(name);
    let (path, path_encoding) = remote_text(&full);
    let (link_target, link_target_encoding) = match file_type {
        // No link has an empty target: the one `find` could not read.
        FileType::Symlink if !target.is_empty() => {
            let (text, encoding) = remote_text(target);
            (Some(text), Some(encoding))
        }
        _ => (None, None),
    };
    Ok(DirEntry {
        name,
        name_encoding,
        path,
        path_encoding,
        file_type,
        size: number("size", &text(size))?,
        mode: mode_string(mode),
        mtime: match mtime {
            [b'@', secs @ ..] => time(&text(secs))?,
            _ => utc_time(&text(mtime))?,
        },
        link_target,
        link_target_encoding,
    })
}

/// `find`'s UTC time (`YEAR-MM-DDTHH:MM:SS.fraction`, the year of any width) as RFC 3339 to
/// the millisecond. Not `%T@`: findutils writes the seconds before 1970 with the fraction on
/// the wrong side.
fn utc_time(text: &str) -> Result<String, DaemonError> {
    let bad = || DaemonError::internal(format!("bad time from the host: {text:?}"));
    let (date, clock) = text.split_once('T').ok_or_else(bad)?;
    let (year, month_day) = date
        .get(1..)
        .and_then(|d| d.split_once('-'))
        .ok_or_else(bad)?;
    let year = format!("{}{year}", &date[..1]);
    let (whole, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let millis: String = fraction.chars().chain("000".chars()).take(3).collect();
    let fields: Vec<&str> = month_day.split('-').chain(whole.split(':')).collect();
    let [m, d, hh, mm, ss] = fields[..] else {
        return Err(bad());
    };
    let number = |field: &str| field.parse::<i64>().map_err(|_| bad());
    let at = sshmcp_proto::time::from_utc(
        number(&year)?,
        [
            number(m)?,
            number(d)?,
            number(hh)?,
            number(mm)?,
            number(ss)?,
        ],
        number(&millis)?,
    )
    .ok_or_else(bad)?;
    Ok(sshmcp_proto::time::rfc3339(at))
}

// A call answered so adds nothing to its trail line but how it ended.
impl crate::audit::Answer for sshmcp_proto::inspect::Listing {}

impl Operation for tools::ListDirectory {
    fn summary(req: &ListRequest) -> String {
        crate::audit::path(&req.path)
    }

    async fn run(
        req: ListRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<Listing, DaemonError> {
        list(&session, req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sshmcp_proto::exec::Encoding;

    #[test]
    fn records_keep_names_and_targets_whole() {
        let e = entry(b"/d", b"a\nb/l/4/777/1970-01-01T00:00:01.5000000000/../x/y").unwrap();
        assert_eq!((e.name.as_str(), e.file_type), ("a\nb", FileType::Symlink));
        assert_eq!(
            (e.path.as_str(), e.path_encoding),
            ("/d/a\nb", Encoding::Utf8)
        );
        assert_eq!(e.link_target.as_deref(), Some("../x/y"));
        assert_eq!(
            (e.mode.as_str(), e.mtime.as_str()),
            ("0777", "1970-01-01T00:00:01.500Z")
        );
        let e = entry(b"/d/", b"\xff/f/3/4755/1960-06-01T00:00:00/").unwrap();
        assert_eq!(
            (e.name.as_str(), e.name_encoding),
            ("/w==", Encoding::Base64)
        );
        assert_eq!(
            (e.path.as_str(), e.path_encoding),
            ("L2Qv/w==", Encoding::Base64)
        );
        assert_eq!((e.mode.as_str(), e.link_target), ("4755", None));
        assert_eq!(e.mtime, "1960-06-01T00:00:00.000Z");
        // Years of any width, as tmpfs, btrfs and XFS keep them.
        for (find, answer) in [
            (
                "10000-01-01T00:00:00.0000000000",
                "10000-01-01T00:00:00.000Z",
            ),
            ("999-01-01T00:00:00.5", "0999-01-01T00:00:00.500Z"),
        ] {
            assert_eq!(utc_time(find).unwrap(), answer);
        }
        for bad in ["", "2026-13-01T00:00:00", "2026-01-01", "x-01-01T00:00:00"] {
            assert!(utc_time(bad).is_err(), "{bad}");
        }
        assert!(entry(b"/d", b"short/f/1").is_err());
    }

    /// The listing program under every shell a host may have as `/bin/sh`, the path on stdin:
    /// with GNU's tools each gives a sorted page; BusyBox with only its applets on PATH (as
    /// on Alpine) gives every entry, which `page` sorts and pages to the same answer.
    #[cfg(target_os = "linux")]
    #[test]
    fn every_shell_lists_what_gnu_lists() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("b"), "four").unwrap();
        std::fs::write(d.join(".hidden"), "").unwrap();
        std::fs::write(d.join("a\nnl"), "").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        // A target's trailing newline is part of it (a command substitution would drop it).
        std::os::unix::fs::symlink("../elsewhere\n", d.join("link")).unwrap();
        let shells = crate::programs::Shells::new();
        let run = |shell: &[String], path: &str, offset: u64, limit: u32| {
            let dir = d.as_os_str().as_encoded_bytes();
            let script = script(offset + 1, limit);
            let out = crate::programs::run_under(shell, path, d, &script, dir);
            let (said, listed) = out.split_once('\n').unwrap();
            let said = said.strip_prefix("ok ").unwrap_or(said).to_string();
            let (entries, total) = page(dir, &said, listed.as_bytes(), offset, limit)
                .unwrap_or_else(|e| panic!("{shell:?} {said}: {}", e.message));
            (said, entries, total)
        };
        // The reference: GNU's tools, as this machine's /usr/bin and /bin hold them.
        let dash = ["dash".to_string()];
        let (_, gnu, _) = run(&dash, "/usr/bin:/bin", 0, 10);
        // `..` after a symlink is its target's parent, as stat takes it: `sub`'s, not `d`'s.
        let linked = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(linked.path().join("x/y")).unwrap();
        std::fs::write(linked.path().join("x/in-x"), "").unwrap();
        std::os::unix::fs::symlink(linked.path().join("x/y"), linked.path().join("l")).unwrap();
        for (shell, path) in shells.each() {
            let through = linked.path().join("l/..");
            let through = through.as_os_str().as_encoded_bytes();
            let out = crate::programs::run_under(&shell, &path, d, &script(1, 10), through);
            let (said, listed) = out.split_once('\n').unwrap();
            let said = said.strip_prefix("ok ").unwrap_or(said).to_string();
            let (entries, _) = page(through, &said, listed.as_bytes(), 0, 10).unwrap();
            let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
            assert_eq!(names, ["in-x", "y"], "{shell:?}");
        }
        let kinds: Vec<(FileType, u64)> = gnu.iter().map(|e| (e.file_type, e.size)).collect();
        assert_eq!(kinds[2], (FileType::File, 4));
        assert_eq!(
            (kinds[3].0, kinds[4].0),
            (FileType::Symlink, FileType::Directory)
        );
        assert_eq!(gnu[3].link_target.as_deref(), Some("../elsewhere\n"));
        let fields = |e: &DirEntry| (e.name.clone(), e.file_type, e.size, e.mode.clone());
        for (shell, path) in shells.each() {
            let busybox = path == shells.busybox_path();
            let (said, ours, all) = run(&shell, &path, 0, 10);
            let expected = if busybox { "all" } else { "5" };
            assert_eq!((said.as_str(), all), (expected, 5), "{shell:?}");
            let names: Vec<&str> = ours.iter().map(|e| e.name.as_str()).collect();
            assert_eq!(names, [".hidden", "a\nnl", "b", "link", "sub"], "{shell:?}");
            for (gnu, ours) in gnu.iter().zip(&ours) {
                assert_eq!(fields(gnu), fields(ours), "{shell:?}");
                assert_eq!(gnu.link_target, ours.link_target, "{shell:?}");
                // BusyBox gives whole seconds.
                assert_eq!(gnu.mtime[..19], ours.mtime[..19], "{shell:?}");
            }
            let (_, second_page, _) = run(&shell, &path, 3, 10);
            let names: Vec<&str> = second_page.iter().map(|e| e.name.as_str()).collect();
            assert_eq!(names, ["link", "sub"], "{shell:?}");
            let (_, one, all) = run(&shell, &path, 1, 1);
            assert_eq!(
                (one.len(), one[0].name.as_str(), all),
                (1, "a\nnl", 5),
                "{shell:?}"
            );
        }
    }
}
