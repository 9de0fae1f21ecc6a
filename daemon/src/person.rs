//! What the person at the CLI may do with no session key (the daemon's user is theirs, as for
//! `disconnect`): find a command handle, an `exec` call under way (or that answered in the
//! last minute), a transfer or a forward by its id, or a unique prefix of one, in any session
//! (`sshmcp output`, `sshmcp kill`).

use std::sync::Arc;

use sshmcp_proto::{DaemonError, ErrorCode};

use crate::session::{Registry, Session};

/// What an id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Command,
    /// An `exec` or `sudo_exec` call, by the id its handle takes if it is handed off.
    Exec,
    Transfer,
    Forward,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Command | Kind::Exec => "command",
            Kind::Transfer => "transfer",
            Kind::Forward => "forward",
        }
    }
}

/// The command, transfer or forward `given` names, its whole id, and its session: an id
/// itself, or the one id it begins; a prefix several begin is refused, naming them.
pub fn find(registry: &Registry, given: &str) -> Result<(Kind, String, Arc<Session>), DaemonError> {
    let mut ids: Vec<(Kind, String, Arc<Session>)> = Vec::new();
    for session in registry.oldest_first() {
        let commands = crate::commands::Commands::of(&session)
            .list()
            .commands
            .into_iter();
        let transfers = crate::transfers::Transfers::of(&session)
            .list()
            .transfers
            .into_iter();
        let forwards = crate::forwards::Forwards::of(&session)
            .list()
            .forwards
            .into_iter();
        let handles: Vec<String> = commands.map(|c| c.handle_id).collect();
        // A call being handed off is briefly both: the handle it became is what stays.
        let execs = crate::commands::Commands::of(&session)
            .under_way
            .ids()
            .into_iter();
        let execs: Vec<String> = execs.filter(|id| !handles.contains(id)).collect();
        ids.extend(
            handles
                .into_iter()
                .map(|id| (Kind::Command, id, session.clone())),
        );
        ids.extend(
            execs
                .into_iter()
                .map(|id| (Kind::Exec, id, session.clone())),
        );
        ids.extend(transfers.map(|t| (Kind::Transfer, t.operation_id, session.clone())));
        ids.extend(forwards.map(|f| (Kind::Forward, f.forward_id, session.clone())));
    }
    if let Some(exact) = ids.iter().position(|(_, id, _)| id == given) {
        return Ok(ids.swap_remove(exact));
    }
    let mut matching: Vec<(Kind, String, Arc<Session>)> = ids
        .into_iter()
        .filter(|(_, id, _)| !given.is_empty() && id.starts_with(given))
        .collect();
    match matching.len() {
        1 => Ok(matching.remove(0)),
        0 => Err(DaemonError::new(
            ErrorCode::CommandNotFound,
            format!("no command, transfer or forward of any session has the id {given}"),
        )),
        n => Err(DaemonError::invalid_arguments(format!(
            "{given} begins {n} ids ({}): give more of it",
            matching
                .iter()
                .map(|(_, id, _)| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}
