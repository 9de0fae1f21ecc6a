//! `list_directory`: a remote directory a page at a time, its entries without what the agent
//! can join itself (the inspection tools about files and the host are derived, see
//! `derived`).

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::described;
use sshmcp_proto::exec::Encoding;
use sshmcp_proto::inspect::{INSPECT_DEADLINE, ListRequest, Listing};
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::service::tools;
use tokio_util::sync::CancellationToken;

use super::unless_cancelled;

use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    pub session_id: String,
    pub session_key: String,
    /// Remote path.
    pub path: String,
    /// `path`'s encoding.
    pub path_encoding: Option<Encoding>,
    /// Entries to skip; default 0.
    pub offset: Option<u64>,
    /// Page size; default 200.
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

#[tool_router(router = inspect_router, vis = "pub(crate)")]
impl Shim {
    /// List a remote directory by name, a page at a time; not recursive (or by pattern: exec
    /// `find`). Answer: `entries` (`name`, `type`, `size`, `mode`, `mtime`, `link_target`, as stat;
    /// dotfiles too, no `.`/`..`), `total`, `truncated` if more follow (then ask at `offset` +
    /// entries returned). Errors: `invalid_remote_type` (not a directory),
    /// `remote_permission_denied` (sudo_exec), `host_tool_missing` (use exec).
    #[tool(
        input_schema = schema_for_input::<ListArgs>().expect("object schema"),
        output_schema = answer::schema_optional(
            schema_for_output::<Answer<Listing>>(),
            "DirEntry",
            &["path"],
        ),
        annotations(title = "List a remote directory", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    pub async fn list_directory(
        &self,
        raw: JsonObject,
        cancel: CancellationToken,
    ) -> CallToolResult {
        answer::respond_trimmed(
            async {
                let a: ListArgs = args::decode(raw)?;
                let req = ListRequest {
                    auth: described::auth(a.session_id, a.session_key),
                    path: described::remote_path(a.path, a.path_encoding),
                    offset: a.offset.unwrap_or(0),
                    limit: a.limit,
                };
                let ctx = context_with_timeout(INSPECT_DEADLINE);
                let call = self.daemon.run::<tools::ListDirectory>(ctx, req);
                unless_cancelled(call, cancel).await
            }
            .await,
            without_derivable_paths,
        )
    }
}

/// An entry whose name and directory are UTF-8 needs no `path`: the agent joins the directory
/// it listed and the name. Only a path that must travel as base64 stays.
fn without_derivable_paths(listing: &mut JsonObject) {
    let Some(entries) = listing.get_mut("entries").and_then(|e| e.as_array_mut()) else {
        return;
    };
    for entry in entries.iter_mut().filter_map(|e| e.as_object_mut()) {
        let utf8 = |field: &str| entry.get(field).and_then(|e| e.as_str()) == Some("utf-8");
        if utf8("name_encoding") && utf8("path_encoding") {
            entry.remove("path");
            entry.remove("path_encoding");
        }
    }
}
