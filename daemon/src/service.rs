//! The daemon's side of the tarpc trait: each call checked, routed to the registry or the exec
//! engine, and converted to wire types.

use std::sync::Arc;

use sshmcp_proto::command::{
    CommandKillRequest, CommandKilled, CommandList, CommandReport, CommandStartRequest,
    CommandStarted, CommandStatusRequest, ProgressRequest, RunProgress,
};
use sshmcp_proto::exec::{ExecRequest, ExecResult, SudoExecRequest};
use sshmcp_proto::files::{
    CopyMoveRequest, EditFileRequest, FileEdited, FileWritten, MakeDirectoryRequest, PathChanged,
    RemovePathRequest, WriteFileRequest,
};
use sshmcp_proto::forward::{ForwardInfo, ForwardList, ForwardStartRequest, ForwardStopRequest};
use sshmcp_proto::inspect::{
    FileRange, FileStat, ListRequest, Listing, ReadRangeRequest, StatRequest,
};
use sshmcp_proto::service::{CAPABILITIES, Daemon, DaemonStatus, Hello, PROTOCOL_VERSION};
use sshmcp_proto::session::{ConnectRequest, Connected, Disconnected, SessionAuth, SessionSummary};
use sshmcp_proto::task::{
    TaskKillRequest, TaskKilled, TaskLaunchRequest, TaskLaunched, TaskReport, TaskStatusRequest,
};
use sshmcp_proto::transfer::TransferDirection::{Download, Upload};
use sshmcp_proto::transfer::{TransferList, TransferReport, TransferRequest, TransferStartRequest};
use sshmcp_proto::{DaemonError, ErrorCode};
use tarpc::context::Context;
use tokio_util::sync::CancellationToken;

use crate::session::registry::connection_lost;
use crate::session::{Registry, Session};
use crate::{commands, exec, files, forwards, inspect, tasks, transfers};

/// The service handed to tarpc; cheap to clone (one per request).
#[derive(Clone)]
pub struct DaemonService {
    pub registry: Arc<Registry>,
    /// Fired to stop the daemon after `shutdown` answered.
    pub stop: CancellationToken,
    pub started_at: Arc<str>,
}

impl Daemon for DaemonService {
    async fn hello(self, _: Context) -> Hello {
        Hello {
            protocol_version: PROTOCOL_VERSION,
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
        }
    }

    async fn status(self, _: Context) -> DaemonStatus {
        let s = &self.registry.settings;
        DaemonStatus {
            pid: std::process::id(),
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: PROTOCOL_VERSION,
            started_at: self.started_at.to_string(),
            socket: s.runtime.socket().display().to_string(),
            state_dir: s.state_dir.display().to_string(),
            log_file: s.log_file().display().to_string(),
            default_local_root: s.local_root.display().to_string(),
            ssh_config: s.ssh_config.as_ref().map(|p| p.display().to_string()),
            sessions: self.registry.session_count() as u32,
            max_sessions: s.max_sessions,
            max_output_bytes: s.max_output_bytes,
            max_transfers: s.max_transfers,
            max_spool_bytes: s.max_spool_bytes,
        }
    }

    /// Starts the daemon's orderly stop (see `lifecycle::run`): it stops accepting, closes
    /// every session and exits. The answer can be lost in that exit, so clients confirm the
    /// stop by the pidfile lock, not by the answer.
    async fn shutdown(self, _: Context) -> Result<(), DaemonError> {
        tracing::info!("shutdown requested");
        self.stop.cancel();
        Ok(())
    }

    async fn connect(self, _: Context, req: ConnectRequest) -> Result<Connected, DaemonError> {
        self.registry.connect(req).await
    }

    async fn disconnect(self, _: Context, session_id: String) -> Result<Disconnected, DaemonError> {
        self.registry.disconnect(&session_id).await
    }

    async fn session_list(self, _: Context) -> Vec<SessionSummary> {
        self.registry.list()
    }

    async fn exec(self, _: Context, req: ExecRequest) -> Result<ExecResult, DaemonError> {
        exec::check(&req)?;
        let auth = req.auth.clone();
        let settings = self.registry.settings.clone();
        self.on_session("exec", &auth, |session| async move {
            exec::exec(&session, &settings, req).await
        })
        .await
    }

    async fn capabilities(self, _: Context) -> Vec<String> {
        CAPABILITIES.iter().map(|c| c.to_string()).collect()
    }

    async fn sudo_exec(self, _: Context, req: SudoExecRequest) -> Result<ExecResult, DaemonError> {
        let auth = req.auth.clone();
        let settings = self.registry.settings.clone();
        self.on_session("sudo_exec", &auth, |session| async move {
            exec::sudo::sudo_exec(&session, &settings, req).await
        })
        .await
    }

    async fn stat(self, _: Context, req: StatRequest) -> Result<FileStat, DaemonError> {
        let auth = req.auth.clone();
        self.on_session("stat", &auth, |session| async move {
            inspect::stat::stat(&session, req).await
        })
        .await
    }

    async fn list_directory(self, _: Context, req: ListRequest) -> Result<Listing, DaemonError> {
        let auth = req.auth.clone();
        self.on_session("list_directory", &auth, |session| async move {
            inspect::list::list(&session, req).await
        })
        .await
    }

    async fn read_file_range(
        self,
        _: Context,
        req: ReadRangeRequest,
    ) -> Result<FileRange, DaemonError> {
        let auth = req.auth.clone();
        let max_output_bytes = self.registry.settings.max_output_bytes;
        self.on_session("read_file_range", &auth, |session| async move {
            inspect::read::read(&session, max_output_bytes, req).await
        })
        .await
    }

    async fn command_start(
        self,
        _: Context,
        req: CommandStartRequest,
    ) -> Result<CommandStarted, DaemonError> {
        let auth = req.auth.clone();
        let settings = self.registry.settings.clone();
        self.on_session("command_start", &auth, |session| async move {
            commands::start(&session, &settings, req).await
        })
        .await
    }

    async fn command_status(
        self,
        _: Context,
        req: CommandStatusRequest,
    ) -> Result<CommandReport, DaemonError> {
        let session = self.registry.authorize_local(&req.auth)?;
        session.touch();
        commands::status(&session, &self.registry.settings, req).await
    }

    async fn command_kill(
        self,
        _: Context,
        req: CommandKillRequest,
    ) -> Result<CommandKilled, DaemonError> {
        let auth = req.auth.clone();
        self.on_session("command_kill", &auth, |session| async move {
            commands::kill::kill(&session, req).await
        })
        .await
    }

    async fn command_list(self, _: Context, auth: SessionAuth) -> Result<CommandList, DaemonError> {
        let session = self.registry.authorize_local(&auth)?;
        session.touch();
        Ok(session.commands.list())
    }

    async fn progress(
        self,
        _: Context,
        req: ProgressRequest,
    ) -> Result<Option<RunProgress>, DaemonError> {
        let session = self.registry.authorize_local(&req.auth)?;
        Ok(session.commands.progress(&req.key))
    }

    async fn task_launch(
        self,
        _: Context,
        req: TaskLaunchRequest,
    ) -> Result<TaskLaunched, DaemonError> {
        let auth = req.auth.clone();
        let max_output_bytes = self.registry.settings.max_output_bytes;
        self.on_session("task_launch", &auth, |session| async move {
            tasks::launch(&session, max_output_bytes, req).await
        })
        .await
    }

    async fn task_status(
        self,
        _: Context,
        req: TaskStatusRequest,
    ) -> Result<TaskReport, DaemonError> {
        let auth = req.auth.clone();
        let max_output_bytes = self.registry.settings.max_output_bytes;
        self.on_session("task_status", &auth, |session| async move {
            tasks::status(&session, max_output_bytes, req).await
        })
        .await
    }

    async fn download_start(
        self,
        _: Context,
        req: TransferStartRequest,
    ) -> Result<TransferReport, DaemonError> {
        let auth = req.auth.clone();
        let (settings, destinations) = (
            self.registry.settings.clone(),
            self.registry.destinations.clone(),
        );
        self.on_session("download_start", &auth, |session| async move {
            transfers::start(&session, &settings, &destinations, Download, req).await
        })
        .await
    }

    async fn write_file(
        self,
        _: Context,
        req: WriteFileRequest,
    ) -> Result<FileWritten, DaemonError> {
        let auth = req.auth.clone();
        self.on_session("write_file", &auth, |session| async move {
            files::write::write(&session, req).await
        })
        .await
    }

    async fn edit_file(self, _: Context, req: EditFileRequest) -> Result<FileEdited, DaemonError> {
        let auth = req.auth.clone();
        self.on_session("edit_file", &auth, |session| async move {
            files::edit::edit(&session, req).await
        })
        .await
    }

    async fn make_directory(
        self,
        _: Context,
        req: MakeDirectoryRequest,
    ) -> Result<PathChanged, DaemonError> {
        let auth = req.auth.clone();
        self.on_session("make_directory", &auth, |session| async move {
            files::paths::make_directory(&session, req).await
        })
        .await
    }

    async fn remove_path(
        self,
        _: Context,
        req: RemovePathRequest,
    ) -> Result<PathChanged, DaemonError> {
        let auth = req.auth.clone();
        self.on_session("remove_path", &auth, |session| async move {
            files::paths::remove_path(&session, req).await
        })
        .await
    }

    async fn copy_path(self, _: Context, req: CopyMoveRequest) -> Result<PathChanged, DaemonError> {
        let auth = req.auth.clone();
        self.on_session("copy_path", &auth, |session| async move {
            files::paths::copy_or_move(&session, req, false).await
        })
        .await
    }

    async fn move_path(self, _: Context, req: CopyMoveRequest) -> Result<PathChanged, DaemonError> {
        let auth = req.auth.clone();
        self.on_session("move_path", &auth, |session| async move {
            files::paths::copy_or_move(&session, req, true).await
        })
        .await
    }

    async fn forward_start(
        self,
        _: Context,
        req: ForwardStartRequest,
    ) -> Result<ForwardInfo, DaemonError> {
        let auth = req.auth.clone();
        let settings = self.registry.settings.clone();
        self.on_session("forward_start", &auth, |session| async move {
            forwards::start(&session, &settings, req).await
        })
        .await
    }

    async fn forward_list(self, _: Context, auth: SessionAuth) -> Result<ForwardList, DaemonError> {
        self.on_session("forward_list", &auth, |session| async move {
            Ok(session.forwards.list())
        })
        .await
    }

    async fn forward_stop(
        self,
        _: Context,
        req: ForwardStopRequest,
    ) -> Result<ForwardInfo, DaemonError> {
        let auth = req.auth.clone();
        self.on_session("forward_stop", &auth, |session| async move {
            forwards::stop(&session, req).await
        })
        .await
    }

    async fn upload_start(
        self,
        _: Context,
        req: TransferStartRequest,
    ) -> Result<TransferReport, DaemonError> {
        let auth = req.auth.clone();
        let (settings, destinations) = (
            self.registry.settings.clone(),
            self.registry.destinations.clone(),
        );
        self.on_session("upload_start", &auth, |session| async move {
            transfers::start(&session, &settings, &destinations, Upload, req).await
        })
        .await
    }

    async fn transfer_status(
        self,
        _: Context,
        req: TransferRequest,
    ) -> Result<TransferReport, DaemonError> {
        let session = self.registry.authorize_local(&req.auth)?;
        session.transfers.status(&req.operation_id)
    }

    async fn transfer_cancel(
        self,
        _: Context,
        req: TransferRequest,
    ) -> Result<TransferReport, DaemonError> {
        let session = self.registry.authorize_local(&req.auth)?;
        session.transfers.cancel(&req.operation_id)
    }

    async fn transfer_list(
        self,
        _: Context,
        auth: SessionAuth,
    ) -> Result<TransferList, DaemonError> {
        let session = self.registry.authorize_local(&auth)?;
        Ok(session.transfers.list())
    }

    async fn task_kill(self, _: Context, req: TaskKillRequest) -> Result<TaskKilled, DaemonError> {
        let auth = req.auth.clone();
        self.on_session("task_kill", &auth, |session| async move {
            tasks::kill(&session, req).await
        })
        .await
    }
}

impl DaemonService {
    /// The one path of every tool that works on a session: check the key and the session's
    /// state, run the operation, and when it found the master gone, mark the session lost.
    async fn on_session<T, F, Fut>(
        &self,
        tool: &'static str,
        auth: &SessionAuth,
        op: F,
    ) -> Result<T, DaemonError>
    where
        F: FnOnce(Arc<Session>) -> Fut,
        Fut: Future<Output = Result<T, DaemonError>>,
    {
        let session = self.registry.authorize(auth)?;
        session.touch();
        let started = std::time::Instant::now();
        let outcome = op(session.clone()).await;
        session.touch();
        let outcome = outcome.map_err(|e| match e.code {
            ErrorCode::ConnectionLost => connection_lost(&session),
            _ => e,
        });
        tracing::debug!(
            tool,
            session = %session.id,
            outcome = outcome.as_ref().err().map_or("ok", |e| e.code.as_str()),
            seconds = started.elapsed().as_secs_f64(),
            "call done"
        );
        outcome
    }
}
