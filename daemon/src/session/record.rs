//! The daemon's private record of live sessions (`<runtime dir>/sessions.json`, mode 0600):
//! what a restarted daemon needs to find each master again. It holds key hashes, never keys.
//! Written atomically (a private temporary file, fsync, rename); read defensively, since a
//! crash, a full disk or another program may have left anything there.

use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::Session;

/// The longest an answer waits for the record to hold what it says.
const RECORD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How one session asks for the record to be written again, and learns when it was: the
/// session's recorder writes after each request, merging those that come during a write.
#[derive(Debug, Default)]
pub struct RecordDue {
    due: tokio::sync::Notify,
    asked: std::sync::atomic::AtomicU64,
    written: tokio::sync::watch::Sender<u64>,
}

impl RecordDue {
    /// Asks for a write; the number to wait for with [`RecordDue::written`].
    pub fn ask(&self) -> u64 {
        let n = self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        self.due.notify_one();
        n
    }

    /// Asks for a write and returns once it is done, or after [`RECORD_WAIT`] (a session
    /// closing meanwhile writes no more records): what an answer says then holds across a
    /// crash right after it.
    pub async fn until_written(&self) {
        let _ = tokio::time::timeout(RECORD_WAIT, self.written(self.ask())).await;
    }

    /// Returns once a write that began after request `n` is done.
    pub async fn written(&self, n: u64) {
        let _ = self.written.subscribe().wait_for(|w| *w >= n).await;
    }

    /// The recorder's side: waits for a request, and returns the newest one so far.
    pub async fn next(&self) -> u64 {
        self.due.notified().await;
        self.asked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The recorder's side: requests up to `n` are written.
    pub fn done(&self, n: u64) {
        self.written.send_replace(n);
    }
}

/// The record's layout; a record of another version is set aside, not guessed at.
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Document {
    version: u32,
    sessions: Vec<Entry>,
}

/// One session as recorded. Only this module reads or writes the file's layout; each tool
/// writes and reads its own part of it (`parts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub session_id: String,
    pub key_sha256: String,
    pub target: String,
    pub server_host: String,
    pub server_port: u16,
    /// The remote login user, learned at connect.
    #[serde(default)]
    pub remote_user: String,
    /// The fingerprint of the host key its master verified, when learned.
    #[serde(default)]
    pub host_key: Option<String>,
    pub master_pid: Option<u32>,
    /// The master's start time (clock ticks since boot): with the pid, the only proof that a
    /// process found later is still this master and not a stranger with a recycled pid.
    #[serde(default)]
    pub master_start_time: Option<u64>,
    pub state: String,
    /// For people reading the file; `created_unix_ms` is what is read back.
    pub created_at: String,
    pub created_unix_ms: u64,
    /// Its last call as of this record's writing (records are written as work comes and
    /// goes, not on every call): a restarted daemon's listing keeps it.
    #[serde(default)]
    pub last_used_unix_ms: Option<u64>,
    /// What the tools keep of the session, each under its own names (`commands`,
    /// `transfers`, `ended_transfers`, `forwards`), written and read by the tools themselves
    /// (`Work::record`, `Work::adopt`): the record does not interpret them.
    #[serde(flatten)]
    pub parts: serde_json::Map<String, serde_json::Value>,
}

/// Milliseconds since the epoch, as the record keeps times.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64
}

pub fn from_unix_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

impl Entry {
    /// The session as recorded, each tool's part written by the tool, `redact` taking keys out
    /// of what is only shown again.
    pub fn of(session: &Session, redact: &dyn Fn(&str) -> String) -> Self {
        let master = session.master();
        let mut entry = Self {
            session_id: session.id.clone(),
            key_sha256: session.key_hash.to_hex(),
            target: session.target.clone(),
            server_host: session.server_host.clone(),
            server_port: session.server_port,
            remote_user: session.remote_user(),
            host_key: session.host_key.get().cloned(),
            master_pid: master.map(|m| m.pid),
            master_start_time: master.map(|m| m.start_time()),
            state: session.state().as_str().to_string(),
            created_at: sshmcp_proto::time::rfc3339(session.created_at),
            created_unix_ms: unix_ms(session.created_at),
            last_used_unix_ms: Some(unix_ms(session.last_used())),
            parts: serde_json::Map::new(),
        };
        session
            .works()
            .iter()
            .for_each(|w| w.record(&mut entry, redact));
        entry
    }

    /// Keeps `value` as the part `name` (see [`Entry::parts`]).
    pub fn put<T: Serialize>(&mut self, name: &str, value: &T) {
        match serde_json::to_value(value) {
            Ok(value) => {
                self.parts.insert(name.into(), value);
            }
            Err(e) => tracing::error!("cannot record the session's {name}: {e}"),
        }
    }

    /// Takes the part `name` back, a list: empty when the record has none. An element this
    /// daemon cannot read is left out alone, said in its log by its place (never by what it
    /// holds, which only the record may keep); the session and the rest are taken back.
    pub fn take<T: serde::de::DeserializeOwned>(&mut self, name: &str) -> Vec<T> {
        let items = match self.parts.remove(name) {
            None => return Vec::new(),
            Some(serde_json::Value::Array(items)) => items,
            Some(_) => {
                tracing::error!(
                    "the record's {name} of session {} is no list: none is taken back",
                    self.session_id
                );
                return Vec::new();
            }
        };
        let mut taken = Vec::with_capacity(items.len());
        for (at, item) in items.into_iter().enumerate() {
            match serde_json::from_value(item) {
                Ok(item) => taken.push(item),
                Err(_) => tracing::error!(
                    "the record's {name} #{at} of session {} is not one this daemon reads: it \
                     is not taken back",
                    self.session_id
                ),
            }
        }
        taken
    }

    pub fn created_at(&self) -> SystemTime {
        from_unix_ms(self.created_unix_ms)
    }
}

/// Rewrites the record atomically (temporary file, fsync, then rename), what is only shown
/// again passed through `redact` by the tool that keeps it: keys are kept only as hashes, and
/// an agent may paste one into a command.
pub fn write(
    path: &Path,
    sessions: &[std::sync::Arc<Session>],
    redact: impl Fn(&str) -> String,
) -> io::Result<()> {
    let sessions: Vec<Entry> = sessions.iter().map(|s| Entry::of(s, &redact)).collect();
    let doc = Document {
        version: VERSION,
        sessions,
    };
    write_bytes(path, serde_json::to_string_pretty(&doc)?.as_bytes())
}

/// Why a record could not be used as it was found.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    #[error("cannot read it: {0}")]
    Unreadable(io::Error),
    #[error("it belongs to uid {0}, not to this user")]
    Foreign(u32),
    #[error("it is not a session record of version {VERSION}: {0}")]
    Malformed(String),
}

/// The recorded sessions; none when there is no record. A record that cannot be used is
/// renamed aside (`sessions.json.unusable-<time>`) and reported, so the daemon starts clean
/// and nothing is lost for a person to look at.
pub fn read(path: &Path) -> Result<Vec<Entry>, (Unusable, Option<PathBuf>)> {
    remove_stale_temporaries(path);
    let set_aside = |why: Unusable| {
        let aside = path.with_extension(format!(
            "json.unusable-{}",
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs()
        ));
        let moved = std::fs::rename(path, &aside).ok().map(|()| aside);
        (why, moved)
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(set_aside(Unusable::Unreadable(e))),
    };
    match std::fs::metadata(path) {
        Ok(meta) if meta.uid() != nix::unistd::geteuid().as_raw() => {
            return Err(set_aside(Unusable::Foreign(meta.uid())));
        }
        Ok(_) => {}
        Err(e) => return Err(set_aside(Unusable::Unreadable(e))),
    }
    match serde_json::from_slice::<Document>(&bytes) {
        Ok(doc) if doc.version == VERSION => Ok(doc.sessions),
        Ok(doc) => Err(set_aside(Unusable::Malformed(format!(
            "version {}",
            doc.version
        )))),
        Err(e) => Err(set_aside(Unusable::Malformed(e.to_string()))),
    }
}

/// Removes the temporary files of writes cut off by a daemon's death (see [`write_bytes`]):
/// the record is read once, when a daemon starts, and no other writes it then (one daemon a
/// runtime directory, and the one before has exited).
fn remove_stale_temporaries(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{name}.");
    for entry in entries.flatten() {
        let file = entry.file_name();
        let stale = file
            .to_str()
            .is_some_and(|f| f.starts_with(&prefix) && f.ends_with(".tmp"));
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Each write has a temporary file of its own, so writers never publish each other's halves.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("json.{}.{seq}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    // The rename itself is durable only once the directory is.
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str) -> Entry {
        Entry {
            session_id: id.into(),
            key_sha256: "ab".repeat(32),
            target: "box".into(),
            server_host: "127.0.0.1".into(),
            server_port: 22,
            remote_user: "me".into(),
            host_key: None,
            master_pid: Some(42),
            master_start_time: Some(7),
            state: "ready".into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            created_unix_ms: 1_767_225_600_000,
            last_used_unix_ms: Some(1_767_225_660_000),
            // Each tool's part as the tool writes it (commands, transfers, forwards).
            parts: serde_json::json!({
                "commands": [{
                    "handle_id": "cmd-0123456789abcdef", "preview": "make",
                    "started_unix_ms": 1_767_225_600_001_u64, "pid": 77, "as_root": false,
                    "output": ["/r/.sshmcp/spool/s/o", "/r/.sshmcp/spool/s/e"],
                    "output_kept": false, "group_left": null, "status": "running",
                    "exit_code": null, "signal": null, "ended_unix_ms": null
                }],
                "transfers": [{
                    "operation_id": "tr-0123456789abcdef", "direction": "upload",
                    "remote_path": {"path": "/tmp/x", "encoding": "utf-8"}, "local_path": "x",
                    "overwrite": true, "local_root": null,
                    "started_unix_ms": 1_767_225_600_002_u64, "total_bytes": 4096, "ended": null
                }],
                "ended_transfers": [],
                "forwards": [{
                    "forward_id": "fw-0123456789abcdef", "kind": "remote",
                    "listen_host": "127.0.0.1", "listen_port": 40000, "opened_port": 0,
                    "target_host": "localhost", "target_port": 8080,
                    "created_unix_ms": 1_767_225_600_003_u64
                }]
            })
            .as_object()
            .unwrap()
            .clone(),
        }
    }

    /// An element of a tool's part this daemon cannot read is left out alone: the rest of
    /// the part and the other parts are still taken back; a part that is no list, or that
    /// the record lacks, is empty.
    #[test]
    fn an_unreadable_element_is_dropped_alone() {
        #[derive(serde::Deserialize)]
        struct Handle {
            handle_id: String,
        }
        let mut entry = entry("s1");
        let commands = entry.parts["commands"].as_array_mut().unwrap();
        commands.insert(0, serde_json::json!({"handle_id": 7}));
        entry
            .parts
            .insert("forwards".into(), serde_json::json!({"not": "a list"}));
        let taken: Vec<Handle> = entry.take("commands");
        let ids: Vec<&str> = taken.iter().map(|h| h.handle_id.as_str()).collect();
        assert_eq!(ids, ["cmd-0123456789abcdef"]);
        assert!(entry.take::<Handle>("forwards").is_empty());
        assert!(entry.take::<Handle>("no_such_part").is_empty());
        assert!(
            !entry.parts.contains_key("commands"),
            "a part is taken once"
        );
        assert_eq!(entry.take::<serde_json::Value>("transfers").len(), 1);
    }

    fn write_doc(path: &Path, sessions: Vec<Entry>) {
        let doc = Document {
            version: VERSION,
            sessions,
        };
        write_bytes(path, serde_json::to_string(&doc).unwrap().as_bytes()).unwrap();
    }

    #[test]
    fn concurrent_writers_never_fail_or_tear_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.json");
        std::thread::scope(|scope| {
            for writer in 0..8 {
                let path = &path;
                scope.spawn(move || {
                    for n in 0..40 {
                        write_doc(path, vec![entry(&format!("s{writer:05}{n:05}")); 8]);
                    }
                });
            }
        });
        let entries = read(&path).unwrap();
        assert_eq!(entries.len(), 8);
        assert!(entries[0].session_id.ends_with("00039"));
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp left"
        );
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.json");
        assert_eq!(read(&path).unwrap(), vec![], "no record: no sessions");
        write_doc(&path, vec![entry("s0123456789")]);
        let back = read(&path).unwrap();
        assert_eq!(back, vec![entry("s0123456789")]);
        assert_eq!(
            back[0].created_at(),
            UNIX_EPOCH + Duration::from_secs(1_767_225_600)
        );
    }

    /// A daemon killed mid-write leaves its temporary file; the next one's read removes it,
    /// and only it.
    #[test]
    fn a_read_removes_the_temporary_files_of_cut_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.json");
        write_doc(&path, vec![entry("s0123456789")]);
        let cut = dir.path().join("sessions.json.4242.7.tmp");
        let aside = dir.path().join("sessions.json.unusable-1767225600");
        let other = dir.path().join("keys.json.4242.0.tmp");
        for file in [&cut, &aside, &other] {
            std::fs::write(file, "{").unwrap();
        }
        assert_eq!(read(&path).unwrap(), vec![entry("s0123456789")]);
        assert!(!cut.exists());
        assert!(aside.exists() && other.exists());
    }

    #[test]
    fn a_torn_or_foreign_version_record_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.json");
        for (text, says) in [
            (r#"{"version": 1, "sessions": [{"session_id": "s01"#, "EOF"),
            (r#"{"version": 9, "sessions": []}"#, "version 9"),
            ("\0\0\0", "expected value"),
        ] {
            std::fs::write(&path, text).unwrap();
            let (why, aside) = read(&path).unwrap_err();
            assert!(why.to_string().contains(says), "{why}");
            let aside = aside.expect("moved aside");
            assert_eq!(
                std::fs::read_to_string(&aside).unwrap(),
                text,
                "kept as found"
            );
            assert!(!path.exists());
            std::fs::remove_file(aside).unwrap();
        }
    }
}
