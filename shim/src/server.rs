//! The MCP server: the tools of `tools` that `--tools` keeps, the instructions that teach an
//! agent the workflow, and the local root this shim sends with its calls.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};
use sshmcp_proto::tool::Tool;

use crate::link::DaemonLink;

#[derive(Clone)]
pub struct Shim {
    pub daemon: Arc<DaemonLink>,
    /// The local root the person configured for this agent, if any; else the daemon's.
    pub local_root: Option<PathBuf>,
    tool_router: ToolRouter<Self>,
    /// The tools `tool_router` routes, as a request may need to know (see `Here`).
    exposed: Arc<[Tool]>,
}

impl Shim {
    /// A shim exposing the tools `tools` (see `toolset`).
    pub fn new(
        daemon: DaemonLink,
        local_root: Option<PathBuf>,
        tools: &BTreeSet<&'static str>,
    ) -> Self {
        let mut tool_router = crate::tools::router();
        let hidden: Vec<String> = tool_router
            .map
            .keys()
            .filter(|name| !tools.contains(name.as_ref()))
            .map(|name| name.to_string())
            .collect();
        for name in hidden {
            tool_router.remove_route(&name);
        }
        let root = tool_root_sentence(local_root.as_deref());
        for route in tool_router.map.values_mut() {
            let tool = &mut route.attr;
            let mut input = (*tool.input_schema).clone();
            crate::slim::input(&mut input);
            name_root_at_local_path(&mut input, &root);
            tool.input_schema = Arc::new(input);
            if let Some(annotations) = tool.annotations.as_mut() {
                crate::slim::annotations(annotations);
            }
            if let Some(schema) = &tool.output_schema {
                let mut schema = (**schema).clone();
                crate::slim::output(&mut schema);
                crate::lean::schema(&mut schema);
                tool.output_schema = Some(Arc::new(schema));
            }
            let described = crate::slim::unwrapped(tool.description.as_deref().unwrap_or(""));
            tool.description = Some(within_client_limit(described).into());
        }
        let exposed = Tool::all()
            .filter(|tool| tool_router.has_route(tool.name()))
            .collect();
        Self {
            daemon: Arc::new(daemon),
            local_root,
            tool_router,
            exposed,
        }
    }

    /// The tools this server exposes (see `--tools`).
    pub fn exposed(&self) -> Arc<[Tool]> {
        self.exposed.clone()
    }

    pub fn local_root_arg(&self) -> Option<String> {
        self.local_root.as_ref().map(|p| p.display().to_string())
    }

    /// The instructions for the exposed tools: the local root first, then each paragraph
    /// whose tools are all exposed (every tool describes itself; these teach the workflow).
    fn instructions(&self) -> String {
        let mut text = format!(
            "sshmcp works on remote hosts over SSH with the user's OpenSSH config and keys. \
             {}\n",
            root_sentence(self.local_root.as_deref())
        );
        for (paragraph, tools) in PARAGRAPHS {
            if tools
                .iter()
                .all(|tool| self.tool_router.has_route(tool.name()))
            {
                text.push_str(paragraph);
                text.push('\n');
            }
        }
        text.push_str(ANSWERS);
        let also: Vec<&str> = ALSO
            .iter()
            .filter(|(tool, _)| self.tool_router.has_route(tool.name()))
            .map(|(_, named)| *named)
            .collect();
        let also = match also.is_empty() {
            true => String::new(),
            false => format!("Also: {}.", also.join(", ")),
        };
        // A long local root leaves less room: the limits' line goes first, then the line
        // naming the tools the paragraphs leave out, never the failures' codes before them.
        for line in [LIMITS, also.as_str()] {
            if !line.is_empty() && text.len() + 1 + line.len() <= CLIENT_TEXT_LIMIT {
                text.push('\n');
                text.push_str(line);
            }
        }
        within_client_limit(text)
    }
}

/// What clients keep of a tool's description and of the instructions (Claude Code cuts each
/// at it).
const CLIENT_TEXT_LIMIT: usize = 2048;

/// `text` whole when it fits a client, else up to its last whole sentence that does: only a
/// local root of hundreds of bytes makes a text this long, and a cut of the client's own
/// would end mid-word.
fn within_client_limit(mut text: String) -> String {
    if text.len() <= CLIENT_TEXT_LIMIT {
        return text;
    }
    let mut end = CLIENT_TEXT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    // A sentence ends with a full stop before a space or a line's end: a `.` inside a path
    // (the root's own) ends none.
    let sentence_end = text[..end]
        .rmatch_indices('.')
        .map(|(at, _)| at)
        .find(|&at| matches!(text.as_bytes().get(at + 1), None | Some(b' ' | b'\n')))
        .map_or(0, |at| at + 1);
    text.truncate(sentence_end);
    text
}

/// The sentence that says where the local root is: downloads, uploads and kept output live
/// there, and every `local_path` is relative to it.
fn root_sentence(local_root: Option<&std::path::Path>) -> String {
    format!(
        "Local root (this machine's folder for downloads, uploads and kept output; \
         `local_path` is relative to it): {}.",
        root_named(local_root)
    )
}

/// What a tool that takes a `local_path` says of the local root, for clients that drop the
/// instructions: where the field is described, so the description does not repeat the
/// instructions.
fn tool_root_sentence(local_root: Option<&std::path::Path>) -> String {
    format!("Relative to the local root, {}.", root_named(local_root))
}

/// Begins the description of a tool's `local_path`, if it takes one, with `root`.
fn name_root_at_local_path(input: &mut rmcp::model::JsonObject, root: &str) {
    let field = input
        .get_mut("properties")
        .and_then(|p| p.get_mut("local_path"))
        .and_then(serde_json::Value::as_object_mut);
    if let Some(field) = field {
        let said = field
            .get("description")
            .and_then(|d| d.as_str())
            .unwrap_or("");
        let described = format!("{root} {said}").trim_end().to_string();
        field.insert("description".into(), described.into());
    }
}

/// The local root in force: as given, else the daemon's default.
fn root_named(local_root: Option<&std::path::Path>) -> String {
    local_root
        .map(std::path::Path::to_path_buf)
        .or_else(sshmcp_local::paths::default_local_root)
        .map_or_else(
            || "the daemon's default".to_string(),
            |root| root.display().to_string(),
        )
}

/// The instructions' paragraphs, each with the tools it names: a paragraph is left out when
/// one of them is not exposed.
const PARAGRAPHS: &[(&str, &[Tool])] = &[
    (
        "1) `connect` (an `alias` from ~/.ssh/config, or `host` + `user`) answers \
         `session_id` and `session_key` (shown once): pass both to the session's tools. \
         2) `disconnect` when done.",
        &[Tool::Connect, Tool::Disconnect, Tool::SessionList],
    ),
    (
        "`exec` runs one /bin/sh command (a fresh shell each call: use `cwd`, not `cd`); \
         `ok: true` means it ran: read `exit_code` (or \
         `timed_out`).",
        &[Tool::Exec],
    ),
    (
        "Work past a minute (clients give up): `exec` with `handoff_after`, or \
         `command_start`, then `command_status` (`command_kill` stops it).",
        &[
            Tool::Exec,
            Tool::CommandStart,
            Tool::CommandStatus,
            Tool::CommandKill,
        ],
    ),
    (
        "`task_launch` starts a process that outlives the session (`task_status`, \
         `task_kill`).",
        &[Tool::TaskLaunch, Tool::TaskStatus, Tool::TaskKill],
    ),
    (
        "Read files with `stat`, `list_directory`, `read_file_range`, not `cat`.",
        &[Tool::Stat, Tool::ListDirectory, Tool::ReadFileRange],
    ),
    (
        "Change them with `write_file`, `edit_file`, `make_directory`, `copy_path`, \
         `move_path`, `remove_path`, not `echo` or `sed`.",
        &[
            Tool::WriteFile,
            Tool::EditFile,
            Tool::MakeDirectory,
            Tool::CopyPath,
            Tool::MovePath,
            Tool::RemovePath,
        ],
    ),
    (
        "`download_start` / `upload_start` copy files between host and local root as jobs \
         (`transfer_status`).",
        &[Tool::DownloadStart, Tool::UploadStart, Tool::TransferStatus],
    ),
];

/// The tools the paragraphs leave unnamed, each with what it is for: named in one line.
const ALSO: &[(Tool, &str)] = &[
    (Tool::SudoExec, "`sudo_exec` (root)"),
    (Tool::ForwardStart, "`forward_start` (ports)"),
    (Tool::HostInfo, "`host_info` (OS, disks)"),
];

/// What every agent needs to know of answers, failures and limits, whatever tools it has.
const ANSWERS: &str = "Remote paths are absolute or relative to home (no `~`); one that is \
    not UTF-8 goes base64, with `*_encoding`: `base64`.\n\
    Answers leave out fields at defaults (null, false, empty, 0, \
    `utf-8`), never `ok` or `exit_code`. Failures \
    (`ok: false`) carry an `error.code` to act on: \
    `session_not_found` (connect again), `invalid_session_key` (lost the key? `disconnect` needs \
    none, then connect), `session_not_ready` (retry shortly), `connection_lost` \
    (if session_list says lost: read your handles' output, disconnect, connect; \
    `error.started`: it had begun, check it before a rerun), `channels_busy` (nothing ran: \
    retry once other work ends), \
    `policy_denied` (the user forbids it there: ask them; no workarounds).";

/// The daemon's default limits: what the instructions leave out first when a long local root
/// leaves no room.
const LIMITS: &str = "One session per host:port, whatever the user. Defaults: 32 \
    sessions; 7 channels a session, shared by commands and transfers (4 transfers at most); \
    64 KiB of a stream per answer.";

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolset;

    fn shim(tools: Option<&str>) -> Shim {
        let root = PathBuf::from("/home/someone-with-a-long-name/projects/agents/sshmcp-files");
        Shim::new(
            DaemonLink::new(Some("/run/sshmcp-test".into())),
            Some(root),
            &toolset::select(tools).unwrap(),
        )
    }

    #[test]
    fn the_groups_hold_every_tool_the_routers_serve() {
        let served: BTreeSet<String> = crate::tools::router()
            .map
            .keys()
            .map(|k| k.to_string())
            .collect();
        let grouped: BTreeSet<String> = toolset::select(None)
            .unwrap()
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(served, grouped);
    }

    /// Clients cut the instructions at 2,048 bytes: all of them fit, and the local root comes
    /// within the first 400.
    #[test]
    fn the_instructions_fit_a_client_and_say_the_local_root_first() {
        let text = shim(None).instructions();
        assert!(text.len() <= 2048, "{} bytes: {text}", text.len());
        let root = text.find("/home/someone-with-a-long-name").unwrap();
        assert!(root < 400, "the root at byte {root}");
        assert!(
            text.contains(LIMITS) && text.ends_with("`host_info` (OS, disks)."),
            "a root of this length leaves room: {text}"
        );
    }

    /// Local roots of 141 and 250 bytes (the instructions' limits' line and the line naming
    /// other tools give way, the failures' codes stay) and of 2,033 and 3,000: the
    /// instructions and every description still fit a client, and end on a whole sentence.
    #[test]
    fn a_long_local_root_still_fits_a_client() {
        for length in [141, 250, 2033, 3000] {
            // Names with a `.` in them: a cut must not end inside the path.
            let name = "project.d/";
            let path = format!("/{}", name.repeat(length / name.len() + 1));
            let root = PathBuf::from(&path[..length]);
            let shim = Shim::new(
                DaemonLink::new(None),
                Some(root.clone()),
                &toolset::select(None).unwrap(),
            );
            let text = shim.instructions();
            assert!(text.len() <= 2048, "{length}: {} bytes", text.len());
            assert!(text.ends_with('.'), "{length}: {text}");
            let root_text = root.display().to_string();
            assert!(
                text.contains(&root_text) || !text.contains("project"),
                "{length}: the text ends inside the root: {text}"
            );
            // Up to a root of 250 bytes, the failures' codes stay whole.
            if length <= 250 {
                let at = text.find(&root.display().to_string()).unwrap();
                assert!(at < 400, "the root at byte {at}");
                assert!(text.contains("`policy_denied`"), "{text}");
                assert!(!text.contains("Defaults:"), "{text}");
            }
            for tool in shim.tool_router.list_all() {
                let described = tool.description.as_deref().unwrap_or("");
                assert!(described.len() <= 2048, "{length}: {}", tool.name);
            }
        }
    }

    /// Under every group, `read-only` and each tool alone, every tool the instructions name
    /// is published.
    #[test]
    fn the_instructions_name_only_exposed_tools() {
        let every = toolset::select(None).unwrap();
        let groups = sshmcp_proto::tool::Group::ALL.iter().map(|g| g.name());
        let lists = groups
            .chain(["read-only", "exec,inspect"])
            .chain(every.iter().copied());
        for list in lists {
            let shim = shim(Some(list));
            let text = shim.instructions();
            for word in text.split('`').skip(1).step_by(2) {
                let hidden = every.contains(word) && !shim.tool_router.has_route(word);
                assert!(!hidden, "--tools {list}: `{word}` is hidden: {text}");
            }
        }
        let text = shim(Some("exec,inspect")).instructions();
        assert!(text.contains("`exec` runs one"), "{text}");
        assert!(text.contains("`read_file_range`"), "{text}");
    }

    #[test]
    fn tools_with_a_local_path_name_the_local_root() {
        let shim = shim(None);
        let upload = shim.tool_router.get("upload_start").unwrap();
        let local_path = &upload.input_schema["properties"]["local_path"]["description"];
        let described = local_path.as_str().unwrap();
        assert!(
            described.starts_with("Relative to the local root, /home/someone-with-a-long-name/"),
            "{described}"
        );
        let exec = shim.tool_router.get("exec").unwrap();
        assert!(!exec.description.as_deref().unwrap().contains("Local root"));
    }
}
