//! `transfer_status`: a transfer's report, waiting for its end if asked (`transfers`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::service::tools;
use sshmcp_proto::transfer::{TransferReport, TransferStatusRequest};

use crate::operation::Runs;
use crate::session::{Registry, Session};
use crate::transfers::Transfers;

impl crate::operation::Operation for tools::TransferStatus {
    const RUNS: Runs = Runs::InDaemon;

    fn summary(req: &TransferStatusRequest) -> String {
        req.operation_id.clone()
    }

    async fn run(
        req: TransferStatusRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<TransferReport, DaemonError> {
        let wait = crate::commands::check_wait(req.wait_seconds)?;
        Transfers::of(&session)
            .status(&req.operation_id, wait)
            .await
    }
}
