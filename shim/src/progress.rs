//! Progress notifications (contract section 0): while a call that can last runs, the shim asks
//! the daemon every second what the run has done so far and passes it on as
//! `notifications/progress`: bytes of output as the progress, the last line as the message.
//! Only for a request that carries a progress token.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::pin::Pin;
use std::sync::Arc;

use rmcp::model::{ProgressNotificationParam, ProgressToken, RequestMetaObject};
use rmcp::{Peer, RoleServer};
use sshmcp_proto::DaemonError;
use sshmcp_proto::command::ProgressRequest;
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::session::SessionAuth;

use crate::link::DaemonLink;

/// How often the daemon is asked.
const INTERVAL: Duration = Duration::from_secs(1);
/// Bytes of the last line a message carries.
const MESSAGE_BYTES: usize = 200;

/// Distinguishes this shim's progress keys.
static KEYS: AtomicU64 = AtomicU64::new(0);

/// Where notifications go, when the client asked for them.
pub struct Progress {
    token: ProgressToken,
    peer: Peer<RoleServer>,
}

/// One notification's content.
pub struct Step {
    /// Bytes so far (or a connect's seconds so far).
    pub value: f64,
    pub message: String,
}

impl Progress {
    pub fn asked(meta: &RequestMetaObject, peer: Peer<RoleServer>) -> Option<Self> {
        meta.get_progress_token().map(|token| Self { token, peer })
    }
}

/// A key for the daemon to file the run under, unique among this daemon's callers.
pub fn new_key() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "p{}-{}-{}",
        std::process::id(),
        since.as_nanos(),
        KEYS.fetch_add(1, Ordering::Relaxed)
    )
}

/// A poll of the daemon for the run it files under `key` (a progress key or a handle id).
pub fn of_run(
    daemon: Arc<DaemonLink>,
    auth: SessionAuth,
    key: String,
) -> impl FnMut(u32) -> Pin<Box<dyn Future<Output = Option<Step>> + Send>> {
    move |_| {
        let daemon = daemon.clone();
        let req = ProgressRequest {
            auth: auth.clone(),
            key: key.clone(),
        };
        Box::pin(async move {
            let ctx = context_with_timeout(INTERVAL * 5);
            let seen = daemon
                .call_method("progress", |c| async move { c.progress(ctx, req).await })
                .await;
            seen.ok().flatten().map(|p| Step {
                value: p.bytes as f64,
                message: p.last_line,
            })
        })
    }
}

/// The seconds a call has waited, after `words`.
pub fn clock(words: &'static str) -> impl FnMut(u32) -> std::future::Ready<Option<Step>> {
    move |seconds| {
        std::future::ready(Some(Step {
            value: f64::from(seconds),
            message: format!("{words}: {seconds} s"),
        }))
    }
}

/// Runs `call`; meanwhile, when `progress` is given, sends what `poll` reports each second.
/// Progress values only ever increase (MCP requires it): a value that did not grow since the
/// last notification is raised by a thousandth.
pub async fn follow<T, P, PF>(
    call: impl Future<Output = Result<T, DaemonError>>,
    progress: Option<Progress>,
    mut poll: P,
) -> Result<T, DaemonError>
where
    P: FnMut(u32) -> PF,
    PF: Future<Output = Option<Step>>,
{
    let Some(progress) = progress else {
        return call.await;
    };
    tokio::pin!(call);
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + INTERVAL, INTERVAL);
    let mut last = f64::MIN;
    let mut tick = 0u32;
    loop {
        tokio::select! {
            result = &mut call => return result,
            _ = ticks.tick() => {
                tick += 1;
                let Some(step) = poll(tick).await else { continue };
                // In thousandths, so that raising it adds no float noise (42.001, not
                // 42.001999999999995).
                let value = (step.value.max(last + 0.001) * 1000.0).round() / 1000.0;
                last = value;
                let param = ProgressNotificationParam::new(progress.token.clone(), value)
                    .with_message(cut(step.message));
                let _ = progress.peer.notify_progress(param).await;
            }
        }
    }
}

/// `message` cut to [`MESSAGE_BYTES`] at a character boundary.
fn cut(mut message: String) -> String {
    let kept = sshmcp_proto::text::cut(&message, MESSAGE_BYTES).len();
    message.truncate(kept);
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cut_at_their_limit_on_a_character() {
        assert_eq!(cut("a".repeat(MESSAGE_BYTES)).len(), MESSAGE_BYTES);
        assert_eq!(cut("a".repeat(MESSAGE_BYTES + 1)).len(), MESSAGE_BYTES);
        let cut_in_char = cut(format!("a{}", "é".repeat(MESSAGE_BYTES)));
        assert_eq!(cut_in_char.len(), MESSAGE_BYTES - 1);
    }

    #[test]
    fn keys_differ() {
        assert_ne!(new_key(), new_key());
    }
}
