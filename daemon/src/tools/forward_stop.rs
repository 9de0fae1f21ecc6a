//! `forward_stop`: a forward of the session closed on its master, its port free once this
//! answers (`forwards`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::forward::{ForwardInfo, ForwardStopRequest};
use sshmcp_proto::service::tools;

use crate::forwards::stop;
use crate::operation::{Operation, to_the_end};
use crate::session::{Registry, Session};

/// To its end: a stop dropped after the master closed the listener would leave it listed
/// (and recorded, to be taken back by a new daemon).
impl Operation for tools::ForwardStop {
    fn summary(req: &ForwardStopRequest) -> String {
        req.forward_id.clone()
    }

    async fn run(
        req: ForwardStopRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<ForwardInfo, DaemonError> {
        to_the_end("forward_stop", async move { stop(&session, req).await }).await
    }
}
