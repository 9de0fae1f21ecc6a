//! Re-adoption: a starting daemon takes back the sessions the record of the daemon before it
//! names. Ids and key hashes stay as they were, so every key an agent holds keeps working; a
//! session is `ready` again only while its master (named by pid and start time) still runs,
//! and `lost` once that master is confirmed gone. Masters nobody recorded are stopped.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use sshmcp_proto::session::SessionState;

use super::key::{KeyHash, is_session_id};
use super::record::{self, Entry};
use super::{Registry, Session, master};
use crate::local_process::ProcessId;
use crate::mux;

impl Registry {
    /// Reads the record, re-adopts what it names, records the outcome, and stops masters left
    /// in the masters directory that belong to no session (a connect the last daemon did not
    /// finish). Runs before the daemon reports ready, so a client's first call sees them all.
    pub async fn readopt(self: &Arc<Self>) {
        let path = self.settings.record_file();
        let entries = match record::read(&path) {
            Ok(entries) => Some(entries),
            Err((why, aside)) => {
                let aside = aside.map_or("it could not be moved".into(), |p| {
                    format!("moved to {}", p.display())
                });
                tracing::warn!(
                    "session record unusable ({why}); starting without it, {aside}; masters \
                     it may have named are left running"
                );
                None
            }
        };
        let usable = entries.is_some();
        let adoptions = entries
            .into_iter()
            .flatten()
            .map(|entry| async move { self.adopt(entry).await });
        let adopted: Vec<Arc<Session>> = futures::future::join_all(adoptions)
            .await
            .into_iter()
            .flatten()
            .collect();
        let kept: HashSet<String> = adopted.iter().map(|s| s.id.clone()).collect();
        for session in adopted {
            self.sessions().insert(session.id.clone(), session.clone());
            self.spawn_recorder(&session);
            if session.state() == SessionState::Ready {
                self.spawn_watcher(&session);
            }
            for work in session.works() {
                work.resume(&session, self);
            }
        }
        self.persist();
        self.learn_live_host_keys();
        // Without a record, no master can be told from one whose session it lost.
        if usable {
            stop_unrecorded_masters(&self.settings.runtime.masters_dir(), &kept).await;
        }
    }

    /// One recorded session back, or `None` for an entry that cannot be trusted or a session
    /// the last daemon never finished opening or closing (its master, if any, is stopped:
    /// no caller holds a key to it, or its disconnect had begun; its command output goes as
    /// that disconnect would have removed it).
    async fn adopt(&self, mut entry: Entry) -> Option<Arc<Session>> {
        let id = entry.session_id.clone();
        let (Some(key_hash), true) = (KeyHash::from_hex(&entry.key_sha256), is_session_id(&id))
        else {
            tracing::warn!(session = %id.escape_debug(), "recorded session is malformed; dropped");
            return None;
        };
        // The control path is always derived, never read: the record names no file.
        let control_path = self.settings.runtime.masters_dir().join(&id);
        let live_master = match (entry.master_pid, entry.master_start_time) {
            (Some(pid), Some(start)) => {
                Some(ProcessId::recorded(pid, start)).filter(ProcessId::alive)
            }
            // A record from before start times were kept: the master itself must vouch for
            // its pid over its socket.
            (Some(pid), None) => match mux::alive_check(&control_path).await {
                Ok(answered) if answered == pid => ProcessId::of(pid),
                _ => None,
            },
            (None, _) => None,
        };
        let state = match (entry.state.as_str(), live_master) {
            ("ready", Some(_)) => Some(SessionState::Ready),
            ("ready" | "lost", _) => Some(SessionState::Lost),
            (other, _) => {
                tracing::info!(session = %id, state = other, "recorded session was mid-way; stopping its master");
                master::stop(&control_path, live_master).await;
                None
            }
        };
        let created_at = entry.created_at();
        let last_used = entry.last_used_unix_ms.map(super::record::from_unix_ms);
        let session = Session::new(
            id,
            key_hash,
            std::mem::take(&mut entry.target),
            (std::mem::take(&mut entry.server_host), entry.server_port),
            crate::remote::Host::new(control_path, self.settings.standby_channels),
            created_at,
            &*self.tools.make_work,
        );
        if let Some(at) = last_used {
            session.touched_at(at);
        }
        if let Some(master) = live_master {
            let _ = session.host.master.set(master);
        }
        if let Some(key) = entry
            .host_key
            .take()
            .filter(|k| crate::policy::is_fingerprint(k))
        {
            let _ = session.host_key.set(key);
        }
        if !entry.remote_user.is_empty() {
            let _ = session
                .remote_user
                .set(std::mem::take(&mut entry.remote_user));
        }
        let ready = state == Some(SessionState::Ready);
        for work in session.works() {
            work.adopt(&session, &mut entry, ready);
        }
        if state.is_none() {
            // Taken back only to go: the session ends here, and what its tools keep with it
            // (its handles' output files, those no answer named) goes as a disconnect's.
            session.host.closing.cancel();
            return None;
        }
        let now = match ready {
            true => SessionState::Ready,
            false => SessionState::Lost,
        };
        session.transition(SessionState::Starting, now);
        tracing::info!(session = %session.id, target = %session.target, state = now.as_str(), "session re-adopted");
        Some(Arc::new(session))
    }
}

/// Asks every master in `dir` whose session is not in `kept` to exit. Only names a session id
/// can have are touched: ssh's own temporary sockets there are left alone.
async fn stop_unrecorded_masters(dir: &Path, kept: &HashSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let stops = entries.flatten().filter_map(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        let orphan = is_session_id(&name) && !kept.contains(&name);
        orphan.then_some(async move {
            tracing::info!(session = %name, "stopping a master no session owns");
            master::stop(&entry.path(), None).await;
        })
    });
    futures::future::join_all(stops).await;
}
