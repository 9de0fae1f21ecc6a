//! The daemon's private record of live sessions (`<state dir>/sessions.json`, mode 0600):
//! what a restarted daemon needs to find each master again. It holds key hashes, never keys.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::Session;

/// Rewrites the record atomically (temporary file, then rename).
pub fn write(path: &Path, sessions: &[std::sync::Arc<Session>]) -> io::Result<()> {
    write_doc(path, &document(sessions))
}

fn document(sessions: &[std::sync::Arc<Session>]) -> serde_json::Value {
    let entries: Vec<serde_json::Value> = sessions
        .iter()
        .map(|s| {
            serde_json::json!({
                "session_id": s.id,
                "key_sha256": s.key_hash.to_hex(),
                "target": s.target,
                "server_host": s.server_host,
                "server_port": s.server_port,
                "control_path": s.host.control_path,
                "master_pid": s.master_pid(),
                "state": s.state().as_str(),
                "created_at": sshmcp_proto::time::rfc3339(s.created_at),
            })
        })
        .collect();
    serde_json::json!({ "version": 1, "sessions": entries })
}

/// Each write has a temporary file of its own, so writers never publish each other's halves.
fn write_doc(path: &Path, doc: &serde_json::Value) -> io::Result<()> {
    static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("json.{}.{seq}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(serde_json::to_string_pretty(doc)?.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writers_never_fail_or_tear_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.json");
        std::thread::scope(|scope| {
            for writer in 0..8 {
                let path = &path;
                scope.spawn(move || {
                    for n in 0..40 {
                        let doc = serde_json::json!({"version": 1, "writer": writer, "n": n,
                                                     "pad": "x".repeat(4096)});
                        write_doc(path, &doc).unwrap();
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["n"], 39);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp left"
        );
    }
}
