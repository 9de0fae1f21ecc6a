//! `edit_file`: exact text replaced in a remote text file, atomically (`files::edit`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::files::{EditFileRequest, FileEdited};
use sshmcp_proto::service::tools;

use crate::files::edit::edit;
use crate::operation::Operation;
use crate::session::{Registry, Session};

impl Operation for tools::EditFile {
    fn summary(req: &EditFileRequest) -> String {
        format!(
            "{} {} → {} bytes{}",
            crate::audit::path(&req.path),
            req.old_text.len(),
            req.new_text.len(),
            if req.replace_all { " (all)" } else { "" }
        )
    }

    async fn run(
        req: EditFileRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<FileEdited, DaemonError> {
        edit(&session, req).await
    }
}
