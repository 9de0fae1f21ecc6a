//! The MCP server: the tool routers of `tools/`, the instructions that teach an agent the
//! workflow, and the local root this shim sends with its calls.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool_handler};

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
        format!(
            "sshmcp runs commands on remote machines over SSH, using the user's OpenSSH \
             configuration, keys and agent.\n\
             Workflow: 1) `connect` with an `alias` (a Host of ~/.ssh/config) or `host` + `user`; \
             keep the returned `session_id` and `session_key` (the key is shown only once). \
             2) `exec` with both to run non-interactive /bin/sh commands; each call is a fresh \
             shell, so pass `cwd` instead of `cd`; `sudo_exec` for root. To look at files \
             use `stat`, `list_directory` and `read_file_range` (structured, any bytes in \
             names; they need GNU coreutils and findutils on the host, and say `internal_error` \
             naming what is missing) rather than parsing the output of ls or cat. \
             3) `disconnect` when done. \
             `session_list` shows every session (never keys).\n\
             Every answer has `ok`; `ok: true` from `exec` means the command ran, and its \
             `exit_code` says whether it succeeded. Failures carry `error.code`, a stable \
             identifier to act on; \
             any tool that takes a session may also answer `invalid_session_key`, \
             `session_not_found`, `session_not_ready` (retry shortly) or `connection_lost`. \
             A lost key cannot be recovered, and a session that answers `connection_lost` does \
             not come back: read its command handles first (`command_status` still answers), \
             then disconnect it and connect again.\n\
             Long work: many clients give up on a call after about a minute. A command \
             that is usually quick but may be slow: `exec` with `handoff_after` (e.g. 30); \
             if it still runs then, it becomes a command handle. One known to be long (a \
             build, a test suite, a dev server): `command_start`. Follow a handle with \
             `command_status` (pass back `next_offset`; `wait_seconds` to long-poll) and stop \
             it with `command_kill`. Handles and their output end with the session: read \
             them before `disconnect`. A process that must outlive the session (a server \
             you leave up): `task_launch`, then `task_status` / `task_kill` with its PID.\n\
             Files: `download_start` copies a remote file into the local root and \
             `upload_start` one from the local root to the host, each as a job (keep its \
             `operation_id`, poll `transfer_status`); never move file contents through \
             command output. `write_file` writes a small file whole and `edit_file` \
             replaces an exact text in one, atomically (pass `expected_sha256` so another \
             writer's change is never overwritten); `make_directory`, `remove_path`, \
             `copy_path`, `move_path` change paths; none needs quoting, unlike `echo`, \
             `sed -i` or `mv` through `exec`. They act as the session's user, never sudo: \
             root's files need `sudo_exec`.\n\
             Ports: `forward_start` opens a forward on the session's own connection (`local` \
             to reach a service only the host can, `remote` to let the host reach one of \
             this machine's, `dynamic` for a SOCKS5 proxy); \"this machine\" is the one \
             running sshmcp. It lasts until `forward_stop` or `disconnect`.\n\
             Limits (the defaults; the user may change them): one session per server, 32 \
             sessions; a command of at most 1 MiB, 60 s (`timeout` up to 86400; none for \
             `command_start` or with `handoff_after`); 64 KiB of each output stream in an \
             answer (head and tail), all of it up to 1 GiB for a handle; `write_file` 1 MiB, \
             `edit_file` 64 MiB; 4 transfers at once per session.\n{root}"
        )
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Shim {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("sshmcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions())
    }
}
