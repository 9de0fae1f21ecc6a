//! The daemon's private record of live sessions (`<state dir>/sessions.json`, mode 0600):
//! what a restarted daemon needs to find each master again. It holds key hashes, never keys.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::Session;

/// Rewrites the record atomically (temporary file, then rename).
pub fn write(path: &Path, sessions: &[std::sync::Arc<Session>]) -> io::Result<()> {
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
    let doc = serde_json::json!({ "version": 1, "sessions": entries });
    let tmp = path.with_extension("json.tmp");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(serde_json::to_string_pretty(&doc)?.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}
