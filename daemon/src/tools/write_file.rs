//! `write_file`: a whole remote file written atomically (`files::write`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::files::{FileWritten, WriteFileRequest};
use sshmcp_proto::service::tools;

use crate::files::write::write;
use crate::operation::Operation;
use crate::session::{Registry, Session};

impl Operation for tools::WriteFile {
    fn summary(req: &WriteFileRequest) -> String {
        format!(
            "{} {} bytes",
            crate::audit::path(&req.path),
            req.content.len()
        )
    }

    async fn run(
        req: WriteFileRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<FileWritten, DaemonError> {
        write(&session, req).await
    }
}
