//! `forward_start`: a listener on the session's master through its mux protocol, recorded in
//! the session's forwards (`forwards`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::forward::{ForwardInfo, ForwardKind, ForwardStartRequest};
use sshmcp_proto::service::tools;

use crate::forwards::start;
use crate::operation::{Operation, to_the_end};
use crate::session::{Registry, Session};

impl Operation for tools::ForwardStart {
    fn summary(req: &ForwardStartRequest) -> String {
        let listen = format!(
            "{}:{}",
            req.listen_host.as_deref().unwrap_or("127.0.0.1"),
            req.listen_port
        );
        match req.kind {
            ForwardKind::Dynamic => format!("dynamic {listen}"),
            kind => format!(
                "{} {listen} → {}:{}",
                kind.as_str(),
                req.target_host.as_deref().unwrap_or("?"),
                req.target_port.unwrap_or(0)
            ),
        }
    }

    /// In a task of its own: a caller that goes away mid-call must not leave the master
    /// listening for a forward no list shows (it is listed, and stoppable).
    async fn run(
        req: ForwardStartRequest,
        session: Arc<Session>,
        registry: &Registry,
    ) -> Result<ForwardInfo, DaemonError> {
        // A forward is recorded as asked (closing it needs its exact words), and no key may
        // be kept but as its hash: a session key is no host to forward to anyway.
        let target = req.target_host.as_deref().unwrap_or_default();
        if registry.redact_keys(target) != target {
            return Err(DaemonError::invalid_arguments(
                "target_host is a session key, not a host name",
            ));
        }
        let settings = registry.settings.clone();
        to_the_end("forward_start", async move {
            start(&session, &settings, req).await
        })
        .await
    }
}
