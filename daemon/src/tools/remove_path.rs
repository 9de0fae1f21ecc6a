//! `remove_path`: a remote file, symlink or directory removed (`files::paths`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::files::{PathChanged, RemovePathRequest};
use sshmcp_proto::service::tools;

use crate::files::paths::remove_path;
use crate::operation::Operation;
use crate::session::{Registry, Session};

impl Operation for tools::RemovePath {
    fn summary(req: &RemovePathRequest) -> String {
        format!(
            "{}{}",
            crate::audit::path(&req.path),
            if req.recursive { " (recursive)" } else { "" }
        )
    }

    async fn run(
        req: RemovePathRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<PathChanged, DaemonError> {
        remove_path(&session, req).await
    }
}
