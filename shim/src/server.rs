//! The MCP server: the tool routers of `tools/`, the instructions that teach an agent the
//! workflow, and the local root this shim sends with its calls.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};

use crate::link::DaemonLink;

#[derive(Clone)]
pub struct Shim {
    pub daemon: Arc<DaemonLink>,
    /// The local root the person configured for this agent, if any; else the daemon's.
    pub local_root: Option<PathBuf>,
    tool_router: ToolRouter<Self>,
}

impl Shim {
    pub fn new(daemon: DaemonLink, local_root: Option<PathBuf>) -> Self {
        Self {
            daemon: Arc::new(daemon),
            local_root,
            tool_router: Self::session_router()
                + Self::exec_router()
                + Self::commands_router()
                + Self::tasks_router()
                + Self::transfers_router()
                + Self::files_router()
                + Self::paths_router()
                + Self::forwards_router()
                + Self::inspect_router(),
        }
    }

    pub fn local_root_arg(&self) -> Option<String> {
        self.local_root.as_ref().map(|p| p.display().to_string())
    }

    fn instructions(&self) -> String {
        let root = match &self.local_root {
            Some(root) => format!(
                "The local root (the folder on this machine that downloads, uploads and \
                 command output use) for this agent is {}.",
                root.display()
            ),
            None => match sshmcp_proto::paths::default_local_root() {
                Some(root) => format!(
                    "The local root (the folder on this machine that downloads, uploads and \
                     command output use) is the daemon's default, normally {}.",
                    root.display()
                ),
                None => "The local root is the daemon's default.".to_string(),
            },
        };
        let read_only = sshmcp_proto::policy::READ_ONLY_TOOLS
            .iter()
            .map(|tool| format!("`{tool}`"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "sshmcp works on remote machines over SSH with the user's OpenSSH configuration, \
             keys and agent.\n\
             1) `connect` (an `alias` from ~/.ssh/config, or `host` + `user`) answers a \
             `session_id` and a `session_key`, shown only this once: pass both to the session's \
             tools. 2) `exec` runs one /bin/sh command (a fresh shell each call: use `cwd`, not \
             `cd`); `ok: true` means it ran, `exit_code` says how (or `timed_out`). \
             `sudo_exec` runs as root where sudo needs no password. \
             3) `disconnect` when done; `session_list` shows every session.\n\
             Failures (`ok: false`) carry a stable `error.code` to act on. Any session tool \
             may answer `session_not_found` or `invalid_session_key` (a wrong id or key; for \
             a lost key, `disconnect` that session, which needs no key, then connect again), `session_not_ready` (retry shortly) or `connection_lost` \
             (read your command handles, then disconnect and connect again). Any tool may \
             answer `policy_denied`: the user forbids it on that host. Do not retry or work \
             around it (such as `sudo` through `exec`): ask the user. A read-only host keeps \
             only {read_only}.\n\
             Long work (clients often give up on a call after a minute): `exec` with \
             `handoff_after` when a command may be slow, `command_start` when it surely is, \
             then `command_status` (`command_kill` stops it); `task_launch` for a process \
             that must outlive the session (`task_status`, `task_kill`).\n\
             Files: `stat`, `list_directory`, `read_file_range` to look; `write_file`, \
             `edit_file`, `make_directory`, `copy_path`, `move_path`, `remove_path` to change \
             (not `cat` or `echo` through `exec`); \
             `download_start` / `upload_start` to copy whole files between the host and the \
             local root in the background (poll `transfer_status`). Ports: `forward_start`, \
             for a client running on this machine.\n\
             Limits (defaults): one session per server, 32 sessions; 8 channels per session, \
             of which commands, transfers and copying, moving or removing trees hold at most 7 \
             (the eighth stays for the other tools); command text up to 1 MiB; `exec` and \
             `sudo_exec` stop a command after 60 s (`timeout` up to 86400, no limit with \
             `handoff_after`); each answer keeps \
             64 KiB of each output stream, a command handle up to 1 GiB per stream; 4 \
             transfers per session.\n{root}"
        )
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Shim {
    /// Runs a tool, naming the client for the daemon's audit trail first: rmcp gives the name
    /// from the request's `_meta` (the per-request protocol generation never sends
    /// `initialize`), else from `initialize`.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.daemon.name_client(|| {
            context
                .client_info()
                .map(|client| (client.name, client.version))
        });
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("sshmcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions())
    }
}
