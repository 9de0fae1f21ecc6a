//! What a tool run on a session declares once, beside its operation: the operation itself,
//! what is wrong with a request whatever the session, what its trail line says (its answer's
//! part is `audit::Answer`, implemented beside it), and where it runs. Which tool it is and what it takes and answers come from its marker type
//! (`sshmcp_proto::service::tools`); the service runs every one the same way
//! (`DaemonService::operate`: the key, the session's state, the policy, the trail), so a
//! tool's knowledge stays in its own file.

use std::future::Future;
use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::service::ToolMethod;
use sshmcp_proto::session::Authed;

use crate::audit::Answer;
use crate::session::{Registry, Session};

/// Where an operation runs, which decides how its session is found and what the trail keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// On the session's host: the session must be ready, the call is written to the trail,
    /// and a master found gone marks the session lost.
    OnHost,
    /// In the daemon's own state, which a lost session keeps readable: written to the trail
    /// only when the policy refuses it.
    InDaemon,
    /// In the daemon's own state, and written to the trail (it stops something).
    InDaemonWritten,
}

/// A tool's operation on a session.
pub trait Operation: ToolMethod<Request: Authed + Send + 'static, Answer: Answer + Send> {
    const RUNS: Runs = Runs::OnHost;

    /// What is wrong with the request whatever the session: refused before the session is
    /// looked at, and never reaches the trail.
    fn check(_: &Self::Request) -> Result<(), DaemonError> {
        Ok(())
    }

    /// What the call's line in the trail says of the request: never a key, never file
    /// contents (see `audit::command` and `audit::path`). Written by every tool, so none
    /// leaves it empty by forgetting it.
    fn summary(req: &Self::Request) -> String;

    /// The operation, once the call passed the checks.
    fn run(
        req: Self::Request,
        session: Arc<Session>,
        registry: &Registry,
    ) -> impl Future<Output = Result<Self::Answer, DaemonError>> + Send;
}

/// Runs `work` to its end in a task of its own, whatever becomes of the call: one dropped
/// mid-way (its client cancelled or went away) must not cut short the bookkeeping of what the
/// host or the master was already told (a kill's record, a forward's listing). `tool` names
/// it in the error of a task that panicked.
pub async fn to_the_end<T: Send + 'static>(
    tool: &str,
    work: impl Future<Output = Result<T, DaemonError>> + Send + 'static,
) -> Result<T, DaemonError> {
    tokio::spawn(work)
        .await
        .unwrap_or_else(|e| Err(DaemonError::internal(format!("{tool} failed: {e}"))))
}

/// The operation of a tool that lists one kind of a session's own state (`$tool`, answered by
/// `$state::of(session).list()`): command_list, transfer_list, forward_list.
macro_rules! listing {
    ($tool:ident, $state:ident) => {
        impl crate::operation::Operation for sshmcp_proto::service::tools::$tool {
            const RUNS: crate::operation::Runs = crate::operation::Runs::InDaemon;

            fn summary(_: &sshmcp_proto::session::SessionAuth) -> String {
                String::new()
            }

            async fn run(
                _: sshmcp_proto::session::SessionAuth,
                session: std::sync::Arc<crate::session::Session>,
                _: &crate::session::Registry,
            ) -> Result<
                <sshmcp_proto::service::tools::$tool as sshmcp_proto::service::ToolMethod>::Answer,
                sshmcp_proto::DaemonError,
            > {
                Ok($state::of(&session).list())
            }
        }
    };
}
pub(crate) use listing;
