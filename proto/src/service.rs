//! The tarpc service between clients (shim, CLI) and the daemon, and the transport both ends
//! build over the Unix socket.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tarpc::tokio_serde::formats::Bincode;
use tarpc::tokio_util::codec::LengthDelimitedCodec;

use crate::command::{
    CommandKillRequest, CommandKilled, CommandList, CommandReport, CommandStartRequest,
    CommandStarted, CommandStatusRequest, OutputRequest, ProgressRequest, RunProgress, Stopped,
};
use crate::error::DaemonError;
use crate::exec::{ExecRequest, ExecResult, SudoExecRequest};
use crate::files::{
    CopyMoveRequest, EditFileRequest, FileEdited, FileWritten, MakeDirectoryRequest, PathChanged,
    RemovePathRequest, WriteFileRequest,
};
use crate::forward::{ForwardInfo, ForwardList, ForwardStartRequest, ForwardStopRequest};
use crate::inspect::{
    FileRange, FileStat, HostInfo, HostInfoRequest, ListRequest, Listing, ReadRangeRequest,
    StatRequest,
};
use crate::overview::Overview;
use crate::policy::PolicyReport;
use crate::session::{ConnectRequest, Connected, Disconnected, SessionAuth, SessionSummary};
use crate::task::{
    TaskKillRequest, TaskKilled, TaskLaunchRequest, TaskLaunched, TaskReport, TaskStatusRequest,
};
use crate::transfer::{
    TransferList, TransferReport, TransferRequest, TransferStartRequest, TransferStatusRequest,
};

/// Bumped only for a change that breaks existing clients or daemons: a changed method or wire
/// type. New tools never bump it: their methods are appended to the trait (existing variants
/// keep their wire index) and named in [`capabilities`], so a newer client asks an older daemon
/// only for what it offers, and users never have to drop their sessions for an upgrade. `hello`
/// stays the first method with an unchanged signature and answer forever, so any two versions
/// can compare numbers.
pub const PROTOCOL_VERSION: u32 = 9;

/// The name the person's CLI introduces itself by: the trail names it, and a session it
/// closes is remembered as the person's doing, which the agent is then told.
pub const PERSON_CLIENT: &str = "the person (sshmcp)";

/// What a command's or a transfer's report says in `stopped_by` when the person stopped it
/// (`sshmcp kill`): an agent must not take it for the host's doing and start it again.
pub const STOPPED_BY_PERSON: &str = "person";

/// The daemon's methods beyond `hello`, `status`, `shutdown` and `capabilities` that are no
/// agent's tool: the shim's progress and introduction, and the CLI's policy, overview,
/// output and stop.
pub const INTERNAL_METHODS: &[&str] = &[
    "progress",
    "introduce",
    "policy",
    "reload_policy",
    "overview",
    "output",
    "stop_by_id",
];

/// What this daemon serves beyond `hello`, `status`, `shutdown` and `capabilities`: every tool
/// of [`Tool`](crate::tool::Tool) and the [`INTERNAL_METHODS`]. A client checks a name here
/// before calling it.
pub fn capabilities() -> Vec<&'static str> {
    crate::tool::Tool::all()
        .map(crate::tool::Tool::name)
        .chain(INTERNAL_METHODS.iter().copied())
        .collect()
}

/// Largest frame either end accepts. Output capture is bounded far below this by
/// `--max-output-bytes`; the margin only keeps one oversized answer from killing the connection.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// The answer to `hello`. Its layout is frozen (see [`PROTOCOL_VERSION`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol_version: u32,
    pub daemon_version: String,
    pub pid: u32,
}

/// What `sshmcp daemon status` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub pid: u32,
    pub daemon_version: String,
    pub protocol_version: u32,
    pub started_at: String,
    pub socket: String,
    pub state_dir: String,
    pub log_file: String,
    pub default_local_root: String,
    pub ssh_config: Option<String>,
    pub sessions: u32,
    pub max_sessions: u32,
    pub max_output_bytes: u64,
    pub max_transfers: u32,
    pub max_spool_bytes: u64,
}

/// Every method of the daemon, in wire order, a line each; a tool's line also gives its
/// [`Tool`](crate::tool::Tool) variant, group and [`Reach`](crate::tool::Reach). A tool's MCP
/// side is its `Described` declaration beside its wire types (`described.rs`), and a `tool`
/// line's operation is the daemon's `tools/<name>.rs` (ARCHITECTURE.md, "Adding a tool").
/// The tarpc trait, the tool table, each tool's [`ToolMethod`], the shim's MCP tools and the
/// daemon's dispatch are all made from this list, so a tool is declared here once. Each `tool` method's request carries its session (`session::Authed`) and is run
/// as the daemon's operation for that tool; `fn` methods the daemon answers by hand (the
/// session tools among them: a connect has no session yet). Methods are only ever appended:
/// their place is their index on the wire.
#[doc(hidden)]
#[macro_export]
macro_rules! daemon_methods {
    ($callback:ident) => {
        $callback! {
            /// Version probe; must remain the first method.
            fn hello() -> Hello;
            fn status() -> DaemonStatus;
            /// Closes every session and stops the daemon once this answer is sent.
            fn shutdown() -> Result<(), DaemonError>;
            fn connect(req: ConnectRequest) -> Result<Connected, DaemonError>
                => Connect in Sessions, ChangesNothing;
            fn disconnect(session_id: String) -> Result<Disconnected, DaemonError>
                => Disconnect in Sessions, ChangesNothing;
            fn session_list() -> Vec<SessionSummary>
                => SessionList in Sessions, ChangesNothing;
            tool exec(req: ExecRequest) -> Result<ExecResult, DaemonError>
                => Exec in Commands, Changes;
            /// The daemon's [`capabilities`]. Methods are only ever appended below this line.
            fn capabilities() -> Vec<String>;
            tool sudo_exec(req: SudoExecRequest) -> Result<ExecResult, DaemonError>
                => SudoExec in Commands, Root;
            tool stat(req: StatRequest) -> Result<FileStat, DaemonError>
                => Stat in Inspect, ChangesNothing;
            tool list_directory(req: ListRequest) -> Result<Listing, DaemonError>
                => ListDirectory in Inspect, ChangesNothing;
            tool read_file_range(req: ReadRangeRequest) -> Result<FileRange, DaemonError>
                => ReadFileRange in Inspect, ChangesNothing;
            tool command_start(req: CommandStartRequest) -> Result<CommandStarted, DaemonError>
                => CommandStart in Commands, Changes;
            tool command_status(req: CommandStatusRequest) -> Result<CommandReport, DaemonError>
                => CommandStatus in Commands, ChangesNothing;
            tool command_kill(req: CommandKillRequest) -> Result<CommandKilled, DaemonError>
                => CommandKill in Commands, Changes;
            tool command_list(auth: SessionAuth) -> Result<CommandList, DaemonError>
                => CommandList in Commands, ChangesNothing;
            /// What a run followed by `key` has done so far; None when no such run is going.
            fn progress(req: ProgressRequest) -> Result<Option<RunProgress>, DaemonError>;
            tool task_launch(req: TaskLaunchRequest) -> Result<TaskLaunched, DaemonError>
                => TaskLaunch in Tasks, Changes;
            tool task_status(req: TaskStatusRequest) -> Result<TaskReport, DaemonError>
                => TaskStatus in Tasks, ChangesNothing;
            tool task_kill(req: TaskKillRequest) -> Result<TaskKilled, DaemonError>
                => TaskKill in Tasks, Changes;
            tool download_start(req: TransferStartRequest) -> Result<TransferReport, DaemonError>
                => DownloadStart in Transfers, ChangesNothing;
            tool transfer_status(req: TransferStatusRequest) -> Result<TransferReport, DaemonError>
                => TransferStatus in Transfers, ChangesNothing;
            // Stopping a copy, a forward or a session changes nothing on the host.
            tool transfer_cancel(req: TransferRequest) -> Result<TransferReport, DaemonError>
                => TransferCancel in Transfers, ChangesNothing;
            tool transfer_list(auth: SessionAuth) -> Result<TransferList, DaemonError>
                => TransferList in Transfers, ChangesNothing;
            tool upload_start(req: TransferStartRequest) -> Result<TransferReport, DaemonError>
                => UploadStart in Transfers, Changes;
            tool write_file(req: WriteFileRequest) -> Result<FileWritten, DaemonError>
                => WriteFile in Files, Changes;
            tool edit_file(req: EditFileRequest) -> Result<FileEdited, DaemonError>
                => EditFile in Files, Changes;
            tool make_directory(req: MakeDirectoryRequest) -> Result<PathChanged, DaemonError>
                => MakeDirectory in Files, Changes;
            tool remove_path(req: RemovePathRequest) -> Result<PathChanged, DaemonError>
                => RemovePath in Files, Changes;
            tool copy_path(req: CopyMoveRequest) -> Result<PathChanged, DaemonError>
                => CopyPath in Files, Changes;
            tool move_path(req: CopyMoveRequest) -> Result<PathChanged, DaemonError>
                => MovePath in Files, Changes;
            tool forward_start(req: ForwardStartRequest) -> Result<ForwardInfo, DaemonError>
                => ForwardStart in Forwards, Changes;
            tool forward_list(auth: SessionAuth) -> Result<ForwardList, DaemonError>
                => ForwardList in Forwards, ChangesNothing;
            tool forward_stop(req: ForwardStopRequest) -> Result<ForwardInfo, DaemonError>
                => ForwardStop in Forwards, ChangesNothing;
            /// Names the MCP client this connection serves (its name and version from
            /// `initialize`), for the audit trail.
            fn introduce(client: String);
            /// The policy in force, and which live sessions each entry matches.
            fn policy() -> PolicyReport;
            /// Reads the config file's policy again; a file that does not parse leaves the old
            /// one in force and answers why.
            fn reload_policy() -> Result<PolicyReport, DaemonError>;
            /// Every session with its running commands, transfers under way and forwards.
            fn overview() -> Overview;
            tool host_info(req: HostInfoRequest) -> Result<HostInfo, DaemonError>
                => HostInfo in Inspect, ChangesNothing;
            /// The person's read of a command handle's output (`sshmcp output`), needing no key.
            fn output(req: OutputRequest) -> Result<CommandReport, DaemonError>;
            /// The person's stop of a command, transfer or forward (`sshmcp kill`), needing no
            /// key.
            fn stop_by_id(id: String) -> Result<Stopped, DaemonError>;
        }
    };
}

/// Makes the tarpc trait and each tool's [`ToolMethod`] from [`daemon_methods`]'s list.
macro_rules! daemon_trait {
    ($(
        $(#[$doc:meta])*
        $form:ident $name:ident($($arg:ident: $ty:ty),*) $(-> $answer:ty)?
            $(=> $tool:ident in $group:ident, $reach:ident)?;
    )*) => {
        #[tarpc::service]
        pub trait Daemon {
            $($(#[$doc])* async fn $name($($arg: $ty),*) $(-> $answer)?;)*
        }

        /// A marker type for each tool, named after its [`Tool`](crate::tool::Tool) variant.
        pub mod tools {
            $(tool_marker!($form $($tool)?);)*
        }

        $(tool_method!($form $name($($arg: $ty),*) $(-> $answer)? $(=> $tool)?);)*

        /// Shows `visitor` every tool, whose MCP side is derived from its
        /// [`Described`](crate::described::Described) declaration.
        #[cfg(feature = "schema")]
        pub fn visit_described(visitor: &mut impl crate::described::Visitor) {
            $($(visitor.visit::<tools::$tool>();)?)*
        }
    };
}

macro_rules! tool_marker {
    (tool $tool:ident) => {
        pub struct $tool;
    };
    (fn $tool:ident) => {
        pub struct $tool;
    };
    (fn) => {};
}

/// A tool's [`ToolMethod`], for a line that takes one request and answers a `Result`
/// (`session_list`'s, which takes none, is written beside its types).
macro_rules! tool_method {
    (tool $name:ident($arg:ident: $request:ty) -> $answer:ty => $tool:ident) => {
        impl ToolMethod for tools::$tool {
            const TOOL: crate::tool::Tool = crate::tool::Tool::$tool;
            type Request = $request;
            type Answer = <$answer as Outcome>::Answer;

            fn send(
                client: &DaemonClient,
                ctx: tarpc::context::Context,
                req: $request,
            ) -> impl std::future::Future<Output = Result<$answer, tarpc::client::RpcError>>
                   + Send
                   + '_ {
                client.$name(ctx, req)
            }
        }
    };
    (tool $($line:tt)*) => {
        compile_error!(concat!(
            "a `tool` line takes one request and answers `Result<_, DaemonError>` => Variant in \
             Group, Reach: ",
            stringify!($($line)*)
        ));
    };
    (fn $name:ident($arg:ident: $request:ty) -> $answer:ty => $tool:ident) => {
        tool_method!(tool $name($arg: $request) -> $answer => $tool);
    };
    (fn $($rest:tt)*) => {};
}

/// What a tool takes and answers on the wire, and its call.
pub trait ToolMethod {
    const TOOL: crate::tool::Tool;
    type Request;
    type Answer;

    /// Sends the call to the daemon with `client`.
    fn send(
        client: &DaemonClient,
        ctx: tarpc::context::Context,
        req: Self::Request,
    ) -> impl std::future::Future<
        Output = Result<Result<Self::Answer, DaemonError>, tarpc::client::RpcError>,
    > + Send
    + '_;
}

/// A method's answer type when it succeeds.
pub trait Outcome {
    type Answer;
}

impl<T> Outcome for Result<T, DaemonError> {
    type Answer = T;
}

crate::daemon_methods!(daemon_trait);

/// The codec on the wire. Bincode is not self-describing: wire types avoid
/// `skip_serializing_if`, `flatten`, untagged enums and `serde_json::Value`.
pub type Codec<Item, SinkItem> = Bincode<Item, SinkItem>;

/// Frames a connected Unix stream the way both ends expect.
pub fn framed(
    stream: tokio::net::UnixStream,
) -> tarpc::tokio_util::codec::Framed<tokio::net::UnixStream, LengthDelimitedCodec> {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME_BYTES)
        .new_framed(stream)
}

/// A call context whose deadline is `d` from now. tarpc's default is 10 s, and a deadline more
/// than about two years away panics inside tarpc, so callers pass real bounds.
pub fn context_with_timeout(d: Duration) -> tarpc::context::Context {
    let mut ctx = tarpc::context::current();
    ctx.deadline = Instant::now() + d.min(Duration::from_secs(7 * 86_400));
    ctx
}

#[cfg(test)]
mod tests {
    use std::fmt::Debug;
    use std::pin::Pin;

    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use tarpc::tokio_serde::{Deserializer, Serializer};
    use tarpc::tokio_util::bytes::BytesMut;

    use super::*;
    use crate::ErrorCode;
    use crate::command::{CommandState, CommandSummary, KillResult, StreamChunk};
    use crate::exec::{ByteRange, Encoding, Handoff, StreamOutput};
    use crate::inspect::{DirEntry, FileType, RemotePath};
    use crate::session::{ConnectTarget, RemoteFacts, SessionAuth, SessionState};
    use crate::task::{LogTail, TaskState};
    use crate::transfer::{TransferDirection, TransferError, TransferState};

    thread_local! {
        /// The encodings [`roundtrip`] made, in order, one line each: the wire's golden bytes.
        static ENCODED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    /// Encodes and decodes `value` with the wire codec; bincode mistakes (skipped fields,
    /// untagged enums) show up here instead of in production. The encoding is kept for the
    /// golden bytes (see [`the_wire_is_what_its_protocol_version_says`]).
    fn roundtrip<T: Serialize + DeserializeOwned + PartialEq + Debug + Unpin>(value: T) {
        let bytes = encoded(&value);
        let mut codec = Codec::<T, T>::default();
        let back: T = Pin::new(&mut codec)
            .deserialize(&BytesMut::from(&bytes[..]))
            .expect("decode");
        assert_eq!(back, value);
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let line = format!("{}: {hex}", std::any::type_name::<T>());
        ENCODED.with(|lines| lines.borrow_mut().push(line));
    }

    fn encoded<T: Serialize + DeserializeOwned + Unpin>(value: &T) -> Vec<u8> {
        let mut codec = Codec::<T, T>::default();
        Pin::new(&mut codec)
            .serialize(value)
            .expect("encode")
            .to_vec()
    }

    fn stream(truncated: bool) -> StreamOutput {
        StreamOutput {
            data: "héllo".into(),
            encoding: if truncated {
                Encoding::Base64
            } else {
                Encoding::Utf8
            },
            captured_bytes: 6,
            total_bytes: if truncated { 600 } else { 6 },
            truncated,
            omitted: truncated.then_some(ByteRange { start: 3, end: 597 }),
            spool_path: truncated.then(|| "/r/.sshmcp/spool/x".into()),
            spool_truncated: truncated,
            next_offset: truncated.then_some(600),
        }
    }

    /// Every wire type, as a sample of each: its round trip, and its bytes against the golden
    /// bytes of this protocol version (`golden/protocol-N.txt`). bincode is not
    /// self-describing: a field added, removed or moved, or an enum variant added anywhere
    /// but where no older peer can meet it, makes an older client or daemon misread this one.
    /// So a golden file, once committed, only ever grows by lines at its end (samples of new
    /// tools' types, appended at the end here); any other change of the bytes needs
    /// `PROTOCOL_VERSION` bumped, and then `SSHMCP_UPDATE_GOLDEN=1` writes the new version's
    /// file. The same variable appends new samples' lines to the current one. A version no
    /// landed release has spoken yet (no daemon of it runs anywhere) may still change: its
    /// file is then deleted and written again.
    #[test]
    fn the_wire_is_what_its_protocol_version_says() {
        ENCODED.with(|lines| lines.borrow_mut().clear());
        every_wire_type_roundtrips();
        let now: Vec<String> = ENCODED.with(|lines| lines.borrow().clone());
        let golden = format!("protocol-{PROTOCOL_VERSION}.txt");
        check_golden(
            &golden,
            &now,
            &format!(
                "the wire changed under protocol {PROTOCOL_VERSION}; bump PROTOCOL_VERSION, then \
                 run this test with SSHMCP_UPDATE_GOLDEN=1"
            ),
        );
    }

    /// Every method's place in the trait is its index on the wire (tarpc's request and
    /// response enums follow the trait's order), so the list only ever grows at its end.
    #[test]
    fn methods_keep_their_place_on_the_wire() {
        macro_rules! signatures {
            ($(
                $(#[$doc:meta])*
                $form:ident $name:ident($($arg:ident: $ty:ty),*) $(-> $answer:ty)?
                    $(=> $tool:ident in $group:ident, $reach:ident)?;
            )*) => {
                [$(concat!(
                    stringify!($name), "(", $(stringify!($ty), ",",)* ")" $(, " -> ", stringify!($answer))?
                )),*]
            };
        }
        let now: Vec<String> = crate::daemon_methods!(signatures)
            .iter()
            .enumerate()
            .map(|(n, signature)| format!("{n}: {signature}"))
            .collect();
        check_golden(
            "methods.txt",
            &now,
            "a method was moved, removed or changed: an older client or daemon would call \
             another; append new methods at the end of daemon_methods! instead",
        );
    }

    /// Holds `now` to the golden file `golden/name`: its lines may only grow at the end, and
    /// only with `SSHMCP_UPDATE_GOLDEN=1`, which writes them.
    fn check_golden(name: &str, now: &[String], changed: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("golden")
            .join(name);
        let update = std::env::var_os("SSHMCP_UPDATE_GOLDEN").is_some();
        let golden = std::fs::read_to_string(&path).unwrap_or_default();
        let golden: Vec<&str> = golden.lines().collect();
        for (n, (was, is)) in golden.iter().zip(now).enumerate() {
            assert_eq!(was, is, "line {} of {}: {changed}", n + 1, path.display());
        }
        assert!(
            golden.len() <= now.len(),
            "lines were removed: {} has {} lines, the test {}",
            path.display(),
            golden.len(),
            now.len()
        );
        if golden.len() < now.len() {
            assert!(
                update,
                "{} lacks the last {} lines: run this test with SSHMCP_UPDATE_GOLDEN=1",
                path.display(),
                now.len() - golden.len()
            );
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, now.join("\n") + "\n").unwrap();
        }
    }

    /// The tools a daemon names change with every tool added: checked, not golden.
    #[test]
    fn the_capabilities_roundtrip() {
        let names: Vec<String> = capabilities().iter().map(|c| c.to_string()).collect();
        let bytes = encoded(&names);
        let mut codec = Codec::<Vec<String>, Vec<String>>::default();
        let back: Vec<String> = Pin::new(&mut codec)
            .deserialize(&BytesMut::from(&bytes[..]))
            .expect("decode");
        assert_eq!(back, names);
    }

    // One sample of every wire type: a list, not logic.
    #[allow(clippy::too_many_lines)]
    fn every_wire_type_roundtrips() {
        roundtrip(Hello {
            protocol_version: PROTOCOL_VERSION,
            daemon_version: "0.1.0".into(),
            pid: 7,
        });
        roundtrip(DaemonStatus {
            pid: 1,
            daemon_version: "0.1.0".into(),
            protocol_version: 1,
            started_at: "2026-11-30T00:00:00.000Z".into(),
            socket: "/s".into(),
            state_dir: "/st".into(),
            log_file: "/st/l".into(),
            default_local_root: "/r".into(),
            ssh_config: None,
            sessions: 0,
            max_sessions: 32,
            max_output_bytes: 65_536,
            max_transfers: 4,
            max_spool_bytes: 1 << 30,
        });
        for target in [
            ConnectTarget::Alias {
                alias: "box".into(),
            },
            ConnectTarget::Direct {
                host: "h".into(),
                user: "u".into(),
                port: Some(22),
            },
            ConnectTarget::Direct {
                host: "h".into(),
                user: "u".into(),
                port: None,
            },
        ] {
            roundtrip(ConnectRequest {
                target,
                connect_timeout: Some(1.5),
            });
        }
        let connected = Connected {
            session_id: "s1".into(),
            session_key: "k".into(),
            target: "box".into(),
            server_host: "h".into(),
            server_port: 22,
            state: SessionState::Ready,
            master_pid: 9,
            remote: RemoteFacts {
                uname: "Linux".into(),
                os_pretty_name: None,
                user: "u".into(),
                home: "/home/u".into(),
            },
        };
        roundtrip(Ok::<_, DaemonError>(connected));
        for state in [
            SessionState::Starting,
            SessionState::Ready,
            SessionState::Lost,
            SessionState::Closing,
            SessionState::Closed,
        ] {
            roundtrip(Disconnected {
                session_id: "s".into(),
                state,
            });
        }
        roundtrip(vec![SessionSummary {
            session_id: "s".into(),
            state: SessionState::Lost,
            target: "t".into(),
            server_host: "h".into(),
            server_port: 2,
            master_pid: None,
            remote_user: "u".into(),
            created_at: "c".into(),
            last_used_at: "l".into(),
            active_commands: 3,
            active_transfers: 0,
            active_forwards: 2,
        }]);
        roundtrip(ExecRequest {
            auth: SessionAuth {
                session_id: "s".into(),
                session_key: "k".into(),
            },
            command: "echo".into(),
            cwd: Some("/tmp".into()),
            timeout: None,
            spool_output: true,
            local_root: None,
            handoff: Handoff {
                after: Some(1.5),
                progress_key: Some("p".into()),
            },
        });
        roundtrip(SudoExecRequest {
            auth: SessionAuth {
                session_id: "s".into(),
                session_key: "k".into(),
            },
            command: "id -u".into(),
            cwd: None,
            timeout: Some(3.0),
            local_root: Some("/r".into()),
            handoff: Handoff::default(),
        });
        let auth = SessionAuth {
            session_id: "s".into(),
            session_key: "k".into(),
        };
        let path = RemotePath {
            path: "/tmp/a b".into(),
            encoding: Encoding::Utf8,
        };
        roundtrip(StatRequest {
            auth: auth.clone(),
            path: path.clone(),
            follow_symlinks: true,
        });
        roundtrip(ListRequest {
            auth: auth.clone(),
            path: path.clone(),
            offset: 5,
            limit: None,
        });
        roundtrip(ReadRangeRequest {
            auth: auth.clone(),
            path,
            offset: 0,
            length: 10,
        });
        roundtrip(Ok::<_, DaemonError>(FileStat {
            file_type: FileType::Symlink,
            size: 2,
            mode: "0777".into(),
            uid: 1,
            gid: 2,
            owner: "o".into(),
            group: "g".into(),
            mtime: "m".into(),
            atime: "a".into(),
            ctime: "c".into(),
            link_target: Some("/x".into()),
            link_target_encoding: Some(Encoding::Utf8),
        }));
        roundtrip(Ok::<_, DaemonError>(Listing {
            entries: vec![DirEntry {
                name: "/w==".into(),
                name_encoding: Encoding::Base64,
                path: "L2Qv/w==".into(),
                path_encoding: Encoding::Base64,
                file_type: FileType::CharDevice,
                size: 0,
                mode: "0600".into(),
                mtime: "m".into(),
                link_target: None,
                link_target_encoding: None,
            }],
            total: 1,
            offset: 0,
            truncated: false,
        }));
        roundtrip(Ok::<_, DaemonError>(FileRange {
            data: "aGk=".into(),
            encoding: Encoding::Base64,
            offset: 3,
            bytes_read: 2,
            file_size: 5,
            eof: true,
        }));
        for truncated in [false, true] {
            roundtrip(Ok::<_, DaemonError>(ExecResult {
                exit_code: (!truncated).then_some(3),
                signal: truncated.then(|| "TERM".into()),
                duration: 0.25,
                timed_out: truncated,
                stdout: stream(truncated),
                stderr: stream(!truncated),
                handed_off: truncated.then_some(true),
                handle_id: truncated.then(|| "cmd-1".into()),
                pid: truncated.then_some(42),
                stopped_by: truncated.then(|| STOPPED_BY_PERSON.into()),
            }));
        }
        roundtrip(CommandStartRequest {
            auth: auth.clone(),
            command: "make".into(),
            cwd: None,
            timeout: Some(2.0),
            local_root: Some("/r".into()),
        });
        roundtrip(Ok::<_, DaemonError>(CommandStarted {
            handle_id: "cmd-1".into(),
            id: "cmd-1".into(),
            pid: Some(7),
            status: CommandState::Running,
            started_at: "t".into(),
        }));
        roundtrip(CommandStatusRequest {
            auth: auth.clone(),
            handle_id: "cmd-1".into(),
            wait_seconds: Some(0.5),
            stdout_offset: Some(3),
            stderr_offset: None,
            max_bytes: Some(9),
        });
        let chunk = StreamChunk {
            data: "x".into(),
            encoding: Encoding::Utf8,
            offset: 1,
            next_offset: 2,
            total_bytes: 5,
            truncated: true,
        };
        for status in [
            CommandState::Running,
            CommandState::Completed,
            CommandState::TimedOut,
            CommandState::Killed,
            CommandState::Lost,
        ] {
            roundtrip(Ok::<_, DaemonError>(CommandReport {
                handle_id: "cmd-1".into(),
                pid: None,
                status,
                exit_code: Some(1),
                signal: Some("TERM".into()),
                started_at: "a".into(),
                ended_at: Some("b".into()),
                stopped_by: Some(crate::service::STOPPED_BY_PERSON.into()),
                stdout: chunk.clone(),
                stderr: chunk.clone(),
            }));
        }
        roundtrip(CommandKillRequest {
            auth: auth.clone(),
            handle_id: "cmd-1".into(),
            signal: Some(9),
            force: Some(true),
            wait_seconds: None,
        });
        for result in [
            KillResult::NotRunning,
            KillResult::Killed,
            KillResult::AlreadyExited,
            KillResult::FailedToKill,
            KillResult::InvalidPid,
            KillResult::Error,
        ] {
            roundtrip(Ok::<_, DaemonError>(CommandKilled {
                handle_id: "cmd-1".into(),
                pid: Some(3),
                result,
                signal: 15,
                force_kill_used: false,
                timestamp: "t".into(),
            }));
        }
        roundtrip(Ok::<_, DaemonError>(CommandList {
            commands: vec![CommandSummary {
                handle_id: "cmd-1".into(),
                preview: "make".into(),
                status: CommandState::Completed,
                exit_code: Some(0),
                started_at: "a".into(),
                ended_at: None,
            }],
        }));
        roundtrip(TaskLaunchRequest {
            auth: auth.clone(),
            command: "make".into(),
            cwd: Some("/src".into()),
        });
        roundtrip(Ok::<_, DaemonError>(TaskLaunched {
            pid: 9,
            stdout_log: "/h/.sshmcp/tasks/9.out".into(),
            stderr_log: "/h/.sshmcp/tasks/9.err".into(),
            started_at: "t".into(),
        }));
        roundtrip(TaskStatusRequest {
            auth: auth.clone(),
            pid: -3,
            tail_bytes: Some(10),
            wait_seconds: Some(2.5),
        });
        for state in [TaskState::Running, TaskState::Exited, TaskState::NotFound] {
            roundtrip(Ok::<_, DaemonError>(TaskReport {
                pid: 9,
                state,
                exit_code: Some(0),
                stdout_log: Some("o".into()),
                stderr_log: None,
                stdout: Some(LogTail {
                    data: "x".into(),
                    encoding: Encoding::Base64,
                    size: 9,
                }),
                stderr: None,
            }));
        }
        roundtrip(TaskKillRequest {
            auth: auth.clone(),
            pid: 9,
            signal: None,
            force: Some(false),
            wait_seconds: Some(2.0),
        });
        roundtrip(Ok::<_, DaemonError>(TaskKilled {
            pid: 9,
            result: KillResult::NotRunning,
            signal: 15,
            force_kill_used: false,
            timestamp: "t".into(),
        }));
        roundtrip(TransferStartRequest {
            auth: auth.clone(),
            remote_path: RemotePath {
                path: "/a".into(),
                encoding: Encoding::Utf8,
            },
            local_path: "b".into(),
            overwrite: true,
            local_root: None,
        });
        roundtrip(TransferRequest {
            auth: auth.clone(),
            operation_id: "tr-1".into(),
        });
        roundtrip(TransferStatusRequest {
            auth: auth.clone(),
            operation_id: "tr-1".into(),
            wait_seconds: None,
        });
        let report = TransferReport {
            operation_id: "tr-1".into(),
            direction: TransferDirection::Upload,
            local_path: "/r/a".into(),
            remote_path: "/w==".into(),
            remote_path_encoding: crate::exec::Encoding::Base64,
            state: TransferState::Failed,
            bytes_transferred: 1,
            reused_bytes: Some(1),
            total_bytes: 2,
            rate: 0.5,
            eta: Some(2.0),
            sha256: None,
            final_path: Some("/r/b".into()),
            error: Some(TransferError {
                code: "transfer_failed".into(),
                message: "m".into(),
            }),
            started_at: "a".into(),
            ended_at: None,
            stopped_by: None,
        };
        roundtrip(Ok::<_, DaemonError>(report.clone()));
        roundtrip(Ok::<_, DaemonError>(TransferList {
            transfers: vec![report],
        }));
        roundtrip(ProgressRequest {
            auth: auth.clone(),
            key: "k".into(),
        });
        roundtrip(Ok::<_, DaemonError>(Some(RunProgress {
            bytes: 4,
            last_line: "l".into(),
        })));
        use crate::forward::ForwardKind;
        for kind in [
            ForwardKind::Local,
            ForwardKind::Remote,
            ForwardKind::Dynamic,
        ] {
            roundtrip(ForwardStartRequest {
                auth: auth.clone(),
                kind,
                listen_port: 0,
                listen_host: Some("::1".into()),
                target_host: None,
                target_port: Some(5432),
            });
        }
        let forward = ForwardInfo {
            forward_id: "fw-1".into(),
            kind: ForwardKind::Remote,
            listen_host: "127.0.0.1".into(),
            listen_port: 40000,
            target_host: Some("db".into()),
            target_port: Some(5432),
            created_at: "c".into(),
        };
        roundtrip(Ok::<_, DaemonError>(forward.clone()));
        roundtrip(Ok::<_, DaemonError>(ForwardList {
            forwards: vec![forward],
        }));
        roundtrip(ForwardStopRequest {
            auth: auth.clone(),
            forward_id: "fw-1".into(),
        });
        roundtrip(Err::<(), _>(
            DaemonError::new(ErrorCode::AlreadyConnected, "m").with_details(
                crate::error::ErrorDetails {
                    session_id: Some("s1".into()),
                    sha256: Some("ab".into()),
                    forward_id: Some("fwd-1".into()),
                    count: Some(2),
                    started: Some(true),
                    stdout: Some(crate::exec::StreamOutput {
                        data: "so far\n".into(),
                        encoding: crate::exec::Encoding::Utf8,
                        captured_bytes: 7,
                        total_bytes: 7,
                        truncated: false,
                        omitted: None,
                        spool_path: None,
                        spool_truncated: false,
                        next_offset: None,
                    }),
                    stderr: None,
                },
            ),
        ));
        for code in ErrorCode::ALL {
            roundtrip(Err::<(), _>(DaemonError::new(code, "m")));
        }
        // Every code at once, so a code added at the end changes a line too.
        roundtrip(ErrorCode::ALL.to_vec());
        let entry = crate::policy::PolicyEntryView {
            patterns: vec!["prod-*".into()],
            read_only: true,
            sudo: false,
            deny: vec!["forward_start".into()],
            sessions: vec!["s1".into()],
            host_keys: vec!["SHA256:k".into()],
            sessions_by_key: vec!["s2".into()],
        };
        roundtrip(PolicyReport {
            source: Some("/c.toml".into()),
            entries: vec![entry],
            reload_error: None,
        });
        use crate::overview::{AuditCounts, SessionView};
        roundtrip(Overview {
            pid: 4,
            taken_at: "t".into(),
            sessions: vec![SessionView {
                session: SessionSummary {
                    session_id: "s".into(),
                    state: SessionState::Ready,
                    target: "t".into(),
                    server_host: "h".into(),
                    server_port: 22,
                    master_pid: Some(3),
                    remote_user: "u".into(),
                    created_at: "c".into(),
                    last_used_at: "l".into(),
                    active_commands: 0,
                    active_transfers: 0,
                    active_forwards: 0,
                },
                commands: vec![],
                execs: vec![crate::overview::ExecView {
                    id: "cmd-3".into(),
                    tool: "exec".into(),
                    preview: "make".into(),
                    started_at: "t".into(),
                    bytes: 3,
                    last_line: "ok".into(),
                }],
                transfers: vec![],
                forwards: vec![],
                policy: vec!["prod-* (by name)".into()],
            }],
            audit: Some(AuditCounts {
                written: 1,
                lost: 0,
            }),
        });
        use crate::inspect::FileSystemSpace;
        roundtrip(HostInfoRequest {
            auth: auth.clone(),
            paths: vec!["/srv".into()],
        });
        roundtrip(Ok::<_, DaemonError>(HostInfo {
            os: Some("Debian GNU/Linux 12 (bookworm)".into()),
            kernel: Some("Linux 6.1.0".into()),
            arch: Some("x86_64".into()),
            cpus: Some(2),
            memory_total: Some(1 << 30),
            memory_available: None,
            load: Some(vec![0.5, 0.25, 0.125]),
            uptime: Some(12.5),
            filesystems: vec![FileSystemSpace {
                path: "/srv".into(),
                mount: Some("/".into()),
                total_bytes: Some(1 << 40),
                free_bytes: None,
            }],
        }));
        roundtrip(OutputRequest {
            id: "cmd-1".into(),
            wait_seconds: Some(1.0),
            stdout_offset: Some(3),
            stderr_offset: None,
            max_bytes: Some(4096),
        });
        roundtrip(Ok::<_, DaemonError>(Stopped {
            id: "fwd-1".into(),
            kind: "forward".into(),
            session_id: "s1".into(),
            outcome: "closed".into(),
        }));
    }

    #[test]
    fn session_auth_debug_hides_the_key() {
        let auth = SessionAuth {
            session_id: "s1".into(),
            session_key: "SECRET".into(),
        };
        let shown = format!("{auth:?}");
        assert!(shown.contains("s1") && !shown.contains("SECRET"));
    }

    #[test]
    fn every_error_code_is_documented() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/errors.md"))
                .expect("docs/errors.md");
        for code in ErrorCode::ALL {
            assert!(
                doc.contains(&format!("| `{code}` |")),
                "docs/errors.md lacks {code}"
            );
        }
    }
}
