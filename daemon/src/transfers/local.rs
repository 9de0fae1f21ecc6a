//! The local end of a transfer, confined to the local root and walked one directory at a time
//! without following symlinks: a download's destination directory, kept open, so the file is
//! published into the directory that was checked even when a symlink is swapped in meanwhile;
//! an upload's source, opened once; and the private partial file a download resumes from.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat, mkdirat};
use nix::unistd::UnlinkatFlags;
use sshmcp_proto::{DaemonError, ErrorCode};

/// Where a download lands: the checked parent directory, held open, and the file's name.
pub struct Destination {
    parent: OwnedFd,
    name: OsString,
    /// The absolute path the file will have, for answers and for one owner per destination.
    pub final_path: PathBuf,
}

fn invalid(message: impl Into<String>) -> DaemonError {
    DaemonError::new(ErrorCode::InvalidLocalPath, message)
}

const DIR_FLAGS: OFlag = OFlag::O_DIRECTORY
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

/// `local_path` checked against `root`: relative (or absolute inside the root), no `..`, not
/// in the private `.sshmcp`, no symlink on the way; missing directories are made (0700). The
/// file itself must not exist unless `overwrite`, and then be a regular file.
pub fn destination(
    root: &Path,
    local_path: &str,
    overwrite: bool,
) -> Result<Destination, DaemonError> {
    let relative = confine(root, local_path)?;
    std::fs::create_dir_all(root)
        .map_err(|e| invalid(format!("cannot create the local root: {e}")))?;
    let (dir, name) = parent(root, &relative, true)?;
    match fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => {}
        Err(e) => return Err(invalid(format!("cannot look at local_path: {e}"))),
        Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG => {
            return Err(invalid("local_path exists and is not a regular file"));
        }
        Ok(_) if !overwrite => {
            return Err(DaemonError::new(
                ErrorCode::LocalPathExists,
                "local_path exists; pass overwrite: true to replace it",
            ));
        }
        Ok(_) => {}
    }
    Ok(Destination {
        parent: dir,
        name,
        final_path: root.join(&relative),
    })
}

impl Destination {
    /// The file as its directory's device and inode and its name: one file whatever path
    /// reached it (two local roots may be one directory through a symlink).
    pub fn identity(&self) -> Result<(u64, u64, OsString), DaemonError> {
        let st = nix::sys::stat::fstat(&self.parent)
            .map_err(|e| invalid(format!("cannot look at local_path's directory: {e}")))?;
        // The widths of dev_t and ino_t differ between systems (macOS's dev_t is 32 bits).
        #[allow(clippy::unnecessary_cast)]
        Ok((st.st_dev as u64, st.st_ino as u64, self.name.clone()))
    }
}

/// What an upload reads: a regular file inside the local root, opened once (reached as
/// `destination` reaches its directory, and not through a symlink), so what is copied and
/// hashed is the file that was checked, whatever takes its name later.
pub struct Source {
    pub file: std::fs::File,
    /// Its absolute path, to name the copy's partial file.
    pub path: PathBuf,
    pub size: u64,
}

impl Source {
    /// This very file, to be read again ([`FromStart`]): a copy of its descriptor.
    pub fn again(&self) -> std::io::Result<std::fs::File> {
        self.file.try_clone()
    }
}

/// A file read from its first byte by position (`pread`), whatever the offset its open file
/// shares: on macOS rsync reads an upload's source as `/dev/fd/N`, which is the daemon's own
/// open file, offset included, not a new one as Linux's `/proc/self/fd/N` opens.
pub struct FromStart {
    file: std::fs::File,
    at: u64,
}

impl FromStart {
    pub fn new(file: std::fs::File) -> Self {
        Self { file, at: 0 }
    }
}

impl std::io::Read for FromStart {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// `local_path` as an upload's source: checked as a destination's path is.
pub fn source(root: &Path, local_path: &str) -> Result<Source, DaemonError> {
    let relative = confine(root, local_path)?;
    let (dir, name) = parent(root, &relative, false)?;
    // Not blocking: a FIFO would wait for a writer before its type could be seen.
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
    let fd = openat(&dir, name.as_os_str(), flags, Mode::empty()).map_err(|e| match e {
        Errno::ENOENT => invalid("no such file in the local root"),
        Errno::ELOOP => invalid("local_path is a symlink: name the file itself"),
        e => invalid(format!("cannot open local_path: {e}")),
    })?;
    let file = std::fs::File::from(fd);
    let meta = file
        .metadata()
        .map_err(|e| invalid(format!("cannot look at local_path: {e}")))?;
    if !meta.file_type().is_file() {
        return Err(invalid("local_path is not a regular file"));
    }
    Ok(Source {
        file,
        path: root.join(&relative),
        size: meta.len(),
    })
}

/// The directory holding `relative` (walked from `root` one name at a time, never through a
/// symlink, made when missing and `create`), held open, and the file's name.
fn parent(root: &Path, relative: &Path, create: bool) -> Result<(OwnedFd, OsString), DaemonError> {
    let mut dir = nix::fcntl::open(root, OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| invalid(format!("cannot open the local root: {e}")))?;
    let mut parts: Vec<&std::ffi::OsStr> = relative.iter().collect();
    let name = parts
        .pop()
        .expect("confine gives at least one part")
        .to_os_string();
    for part in parts {
        let next = match openat(&dir, part, DIR_FLAGS, Mode::empty()) {
            Err(Errno::ENOENT) if create => mkdirat(&dir, part, Mode::from_bits_truncate(0o700))
                .or_else(|e| if e == Errno::EEXIST { Ok(()) } else { Err(e) })
                .and_then(|()| openat(&dir, part, DIR_FLAGS, Mode::empty())),
            other => other,
        };
        dir = next.map_err(|e| match e {
            Errno::ELOOP | Errno::ENOTDIR => invalid(
                "local_path goes through a symlink or a file: it must stay inside the local root",
            ),
            Errno::ENOENT => invalid("no such directory in the local root"),
            e => invalid(format!("cannot open a directory of local_path: {e}")),
        })?;
    }
    Ok((dir, name))
}

/// Gives a verified download the mode rsync gives a file it copied whole: the source's
/// permission bits less this process's umask. rsync makes a new file 0600 until its copy
/// completes, so a copy cut off and resumed would otherwise keep 0600.
pub fn give_copied_mode(partial: &Path, source_mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    // Where it cannot be read: the narrowest mode, not a guess.
    let umask = crate::platform::umask().unwrap_or(0o077);
    std::fs::set_permissions(
        partial,
        std::fs::Permissions::from_mode(source_mode & 0o777 & !umask),
    )
}

/// The path inside the root that `local_path` names, checked by its words alone.
pub fn confine(root: &Path, local_path: &str) -> Result<PathBuf, DaemonError> {
    // Path's components drop a trailing `/` or `/.`, which asks for a directory: the file of
    // that name would be read or written instead.
    if local_path.ends_with('/') || local_path.ends_with("/.") {
        return Err(invalid(
            "local_path ends with `/`, naming a directory: transfers copy single files, so \
             name the file (`dir/name`)",
        ));
    }
    let path = Path::new(local_path);
    let relative = match path.is_absolute() {
        true => path
            .strip_prefix(root)
            .map_err(|_| invalid("an absolute local_path must lie inside the local root"))?,
        false => path,
    };
    let mut clean = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            _ => return Err(invalid("local_path must not contain `..`")),
        }
    }
    if clean.as_os_str().is_empty() {
        return Err(invalid("local_path names no file"));
    }
    if clean.iter().any(|part| part == ".sshmcp") {
        return Err(invalid(
            "local_path must not go through a private .sshmcp directory",
        ));
    }
    Ok(clean)
}

impl Destination {
    /// Moves the verified partial into place: never over a file that appeared meanwhile
    /// unless `overwrite`. `verified` is the SHA-256 the partial was verified with; `stop`
    /// says when a copy across file systems is to stop (a cancel).
    pub async fn publish(
        &self,
        partial: &Path,
        overwrite: bool,
        verified: &str,
        stop: tokio_util::sync::CancellationToken,
    ) -> Result<(), DaemonError> {
        match self.move_in(nix::fcntl::AT_FDCWD, partial.as_os_str(), overwrite) {
            // A destination on another file system than the private directory (a mount
            // inside the local root) takes no rename from there. The copy runs on a blocking
            // thread, never by turning a runtime worker into one (`block_in_place`): a worker
            // turned so may retire, and Linux ends the children a thread forked with a
            // parent-death signal (the running rsyncs) when that thread ends.
            Err(Errno::EXDEV) => {
                let this = Self {
                    parent: self.parent.try_clone().map_err(|e| {
                        publish_error(Errno::from_raw(e.raw_os_error().unwrap_or(0)))
                    })?,
                    name: self.name.clone(),
                    final_path: self.final_path.clone(),
                };
                let (partial, verified) = (partial.to_path_buf(), verified.to_string());
                tokio::task::spawn_blocking(move || {
                    this.publish_across(&partial, overwrite, &verified, &|| stop.is_cancelled())
                })
                .await
                .map_err(|e| DaemonError::internal(format!("the publish stopped: {e}")))?
            }
            moved => moved.map_err(publish_error),
        }
    }

    /// Renames `from` (in `from_dir`) to the destination, or links it there where the file
    /// system has no rename that does not replace.
    fn move_in<Fd: std::os::fd::AsFd + Copy>(
        &self,
        from_dir: Fd,
        from: &std::ffi::OsStr,
        overwrite: bool,
    ) -> nix::Result<()> {
        if overwrite {
            return renameat(from_dir, from, &self.parent, self.name.as_os_str());
        }
        match crate::platform::rename_noreplace(from_dir, from, &self.parent, self.name.as_os_str())
        {
            // NFS and some FUSE file systems have no such rename: a link does not replace
            // either.
            Err(Errno::EINVAL) => {
                nix::unistd::linkat(
                    from_dir,
                    from,
                    &self.parent,
                    self.name.as_os_str(),
                    AtFlags::empty(),
                )?;
                let _ = nix::unistd::unlinkat(from_dir, from, UnlinkatFlags::NoRemoveDir);
                Ok(())
            }
            other => other,
        }
    }

    /// Publishes across file systems: the partial is copied into a hidden file beside the
    /// destination, hashed as it is read (it must still be what was verified) and synced,
    /// and that file is moved into place. The partial goes once the file is published, or
    /// when it no longer matches its hash (a retry would take it up again); the hidden file
    /// goes whenever publishing fails.
    fn publish_across(
        &self,
        partial: &Path,
        overwrite: bool,
        verified: &str,
        stop: &dyn Fn() -> bool,
    ) -> Result<(), DaemonError> {
        let stem = partial.file_stem().unwrap_or_default().to_string_lossy();
        let staged = OsString::from(format!(".sshmcp-{stem}.publish"));
        let published =
            self.stage(partial, &staged, stop)
                .and_then(|hash| match hash == verified {
                    true => self
                        .move_in(&self.parent, &staged, overwrite)
                        .map_err(publish_error),
                    false => Err(super::not_published(
                        "the partial changed after its verification",
                        std::fs::remove_file(partial).is_ok(),
                    )),
                });
        match published {
            Ok(()) => {
                // The rename reaches the disk before the only other copy goes.
                let _ = nix::unistd::fsync(&self.parent);
                let _ = std::fs::remove_file(partial);
            }
            Err(_) => {
                let _ = nix::unistd::unlinkat(
                    &self.parent,
                    staged.as_os_str(),
                    UnlinkatFlags::NoRemoveDir,
                );
            }
        }
        published
    }

    /// Copies the partial to `staged` in the destination's directory, with its mode, and
    /// syncs it: the partial goes once it is published, and a write error (a full disk, NFS)
    /// may show only then. Answers the SHA-256 of what it read.
    fn stage(
        &self,
        partial: &Path,
        staged: &OsString,
        stop: &dyn Fn() -> bool,
    ) -> Result<String, DaemonError> {
        use std::os::unix::fs::PermissionsExt;
        let failed = |e: std::io::Error| {
            DaemonError::new(
                ErrorCode::TransferFailed,
                format!("cannot copy the file onto local_path's file system: {e}"),
            )
        };
        let mut from = std::fs::File::open(partial).map_err(failed)?;
        let mode = from.metadata().map_err(failed)?.permissions().mode() & 0o7777;
        // A fresh file, never one found under the name: a leftover of a crash, or a link to
        // another file planted by someone who may write the directory, is unlinked first.
        let _ = nix::unistd::unlinkat(&self.parent, staged.as_os_str(), UnlinkatFlags::NoRemoveDir);
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let to = openat(
            &self.parent,
            staged.as_os_str(),
            flags,
            Mode::S_IRUSR | Mode::S_IWUSR,
        )
        .map_err(|e| failed(e.into()))?;
        let mut to = std::fs::File::from(to);
        let hash = sha256_of(&mut from, Some(&mut to), stop)
            .map_err(failed)?
            .ok_or_else(|| DaemonError::new(ErrorCode::TransferFailed, "cancelled"))?;
        // As `mv` across file systems: a disk that cannot store the mode (vfat) refuses the
        // change, and the file is published with the mode it has.
        let _ = to.set_permissions(std::fs::Permissions::from_mode(mode));
        to.sync_all().map_err(failed)?;
        Ok(hash)
    }
}

/// The SHA-256 of all `from` reads, each piece also written to `to` when there is one; none
/// when `stop` said so first (it is asked before each MiB).
pub fn sha256_of(
    from: &mut impl std::io::Read,
    mut to: Option<&mut std::fs::File>,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<Option<String>> {
    use sha2::{Digest, Sha256};
    use std::io::Write;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        if stop() {
            return Ok(None);
        }
        match from.read(&mut buf)? {
            0 => return Ok(Some(crate::random::hex(&hash.finalize()))),
            n => {
                hash.update(&buf[..n]);
                if let Some(to) = to.as_mut() {
                    to.write_all(&buf[..n])?;
                }
            }
        }
    }
}

fn publish_error(e: Errno) -> DaemonError {
    match e {
        Errno::EEXIST => DaemonError::new(
            ErrorCode::LocalPathExists,
            "local_path appeared during the copy; the verified copy stays as the partial",
        ),
        e => DaemonError::new(
            ErrorCode::TransferFailed,
            format!("cannot publish the file: {e}"),
        ),
    }
}

/// The partial file of a copy, in the private directory: one name per server, remote path
/// and destination, so the same pair resumes where it stopped.
pub fn partial_path(
    root: &Path,
    server: &str,
    remote: &[u8],
    destination: &Path,
) -> std::io::Result<PathBuf> {
    let private = root.join(".sshmcp");
    sshmcp_local::paths::ensure_private_dir(&private)?;
    let dir = private.join("partial");
    sshmcp_local::paths::ensure_private_dir(&dir)?;
    let name = super::pair_tag([
        server.as_bytes(),
        remote,
        destination.as_os_str().as_encoded_bytes(),
    ]);
    Ok(dir.join(format!("{name}.part")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upload's source is hashed whole wherever the offset its open file shares stands
    /// (on macOS, where rsync read it to the end).
    #[test]
    fn a_source_is_hashed_from_its_first_byte_whatever_its_offset() {
        use std::io::{Read, Write};
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"the source's bytes").unwrap();
        let mut rest = Vec::new();
        assert_eq!(
            file.read_to_end(&mut rest).unwrap(),
            0,
            "the offset stands at the end"
        );
        let again = file.try_clone().unwrap();
        let hash = sha256_of(&mut FromStart::new(again), None, &|| false).unwrap();
        let fresh = sha256_of(&mut &b"the source's bytes"[..], None, &|| false).unwrap();
        assert_eq!(hash, fresh);
    }

    #[test]
    fn words_that_leave_the_root_are_refused() {
        let root = Path::new("/r/root");
        for bad in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "/r/rootx/y",
            "",
            ".",
            ".sshmcp/x",
            "./.sshmcp",
            "a/.sshmcp/b",
            "newdir/",
            "a/b/.",
            "/r/root/a/",
        ] {
            assert_eq!(
                confine(root, bad).unwrap_err().code,
                ErrorCode::InvalidLocalPath,
                "{bad:?}"
            );
        }
        assert_eq!(confine(root, "a/./b").unwrap(), PathBuf::from("a/b"));
        assert_eq!(confine(root, "/r/root/a").unwrap(), PathBuf::from("a"));
    }

    #[test]
    fn symlinks_on_the_way_are_refused_and_directories_are_made() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        std::os::unix::fs::symlink(tmp.path(), root.join("out")).unwrap();
        let e = destination(&root, "out/x", false).err().unwrap();
        assert_eq!(e.code, ErrorCode::InvalidLocalPath);
        std::os::unix::fs::symlink("/etc/passwd", root.join("f")).unwrap();
        assert_eq!(
            destination(&root, "f", true).err().unwrap().code,
            ErrorCode::InvalidLocalPath
        );
        let d = destination(&root, "new/dir/file", false).unwrap();
        assert!(root.join("new/dir").is_dir());
        assert_eq!(d.final_path, root.join("new/dir/file"));
        std::fs::write(root.join("new/dir/file"), b"x").unwrap();
        assert_eq!(
            destination(&root, "new/dir/file", false)
                .err()
                .unwrap()
                .code,
            ErrorCode::LocalPathExists
        );
        assert!(destination(&root, "new/dir/file", true).is_ok());
    }

    /// A partial of `bytes` bytes in `tmp`, and its SHA-256.
    fn partial_of(tmp: &Path, bytes: usize) -> (PathBuf, String) {
        use sha2::{Digest, Sha256};
        let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
        let partial = tmp.join("p.part");
        std::fs::write(&partial, &data).unwrap();
        (partial, crate::random::hex(&Sha256::digest(&data)))
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// The publish across file systems (run here on one): the copy is moved in and the
    /// partial goes; a stop keeps the partial, a mismatch removes it, a destination that
    /// appeared is kept with the partial; no hidden file is ever left.
    #[test]
    fn a_publish_through_a_copy_keeps_the_partial_but_on_a_mismatch() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("d")).unwrap();
        let (partial, hash) = partial_of(tmp.path(), 3 << 20);
        let d = destination(&root, "d/file", false).unwrap();

        let calls = std::cell::Cell::new(0);
        let stop_second = || {
            calls.set(calls.get() + 1);
            calls.get() > 1
        };
        let stopped = d.publish_across(&partial, false, &hash, &stop_second);
        assert_eq!(stopped.unwrap_err().code, ErrorCode::TransferFailed);
        assert!(partial.exists());
        assert!(
            names(&root.join("d")).is_empty(),
            "{:?}",
            names(&root.join("d"))
        );

        std::fs::write(root.join("d/file"), b"theirs").unwrap();
        let appeared = d.publish_across(&partial, false, &hash, &|| false);
        assert_eq!(appeared.unwrap_err().code, ErrorCode::LocalPathExists);
        assert!(partial.exists());
        assert_eq!(names(&root.join("d")), ["file"]);
        assert_eq!(std::fs::read(root.join("d/file")).unwrap(), b"theirs");
        std::fs::remove_file(root.join("d/file")).unwrap();

        d.publish_across(&partial, false, &hash, &|| false).unwrap();
        assert!(!partial.exists());
        assert_eq!(names(&root.join("d")), ["file"]);
        assert_eq!(std::fs::read(root.join("d/file")).unwrap().len(), 3 << 20);

        let (partial, _) = partial_of(tmp.path(), 10);
        let mismatch = d
            .publish_across(&partial, true, &hash, &|| false)
            .unwrap_err();
        assert_eq!(mismatch.code, ErrorCode::VerificationFailed);
        assert!(
            mismatch.message.contains("and the copy was removed"),
            "{}",
            mismatch.message
        );
        assert!(!partial.exists());
        assert_eq!(names(&root.join("d")), ["file"]);
        assert_eq!(std::fs::read(root.join("d/file")).unwrap().len(), 3 << 20);
    }

    /// The directory checked is the one published into, even when a symlink takes its name
    /// during the copy.
    #[tokio::test]
    async fn a_swapped_symlink_does_not_move_the_publish() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, outside) = (tmp.path().join("root"), tmp.path().join("outside"));
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let d = destination(&root, "d/file", false).unwrap();
        std::fs::rename(root.join("d"), root.join("d-moved")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("d")).unwrap();
        let partial = tmp.path().join("p");
        std::fs::write(&partial, b"data").unwrap();
        // One file system: a rename, which reads no hash.
        d.publish(&partial, false, "", Default::default())
            .await
            .unwrap();
        assert!(!outside.join("file").exists());
        assert_eq!(std::fs::read(root.join("d-moved/file")).unwrap(), b"data");
    }
}
