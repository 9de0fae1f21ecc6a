//! `make_directory`: a remote directory made, one already there no error (`files::paths`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::files::{MakeDirectoryRequest, PathChanged};
use sshmcp_proto::service::tools;

use crate::files::paths::make_directory;
use crate::operation::Operation;
use crate::session::{Registry, Session};

impl Operation for tools::MakeDirectory {
    fn summary(req: &MakeDirectoryRequest) -> String {
        crate::audit::path(&req.path)
    }

    async fn run(
        req: MakeDirectoryRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<PathChanged, DaemonError> {
        make_directory(&session, req).await
    }
}
