//! `transfer_cancel`: a transfer stopped, its partial kept for a resume (`transfers`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::service::tools;
use sshmcp_proto::transfer::{TransferReport, TransferRequest};

use crate::operation::Runs;
use crate::session::{Registry, Session};
use crate::transfers::Transfers;

impl crate::operation::Operation for tools::TransferCancel {
    const RUNS: Runs = Runs::InDaemonWritten;

    fn summary(req: &TransferRequest) -> String {
        req.operation_id.clone()
    }

    async fn run(
        req: TransferRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<TransferReport, DaemonError> {
        Transfers::of(&session).cancel(&req.operation_id).await
    }
}
