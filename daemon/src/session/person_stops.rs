//! What the person stopped (sessions, forwards), remembered so that an agent that calls on
//! one is told the person did it, not left to take it for a fault and start it again.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::SystemTime;

/// How the person stopped something: the CLI command that did it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum How {
    #[serde(rename = "sshmcp disconnect")]
    Disconnect,
    #[serde(rename = "sshmcp daemon stop")]
    DaemonStop,
    #[serde(rename = "sshmcp kill")]
    Kill,
}

impl How {
    fn as_str(self) -> &'static str {
        match self {
            How::Disconnect => "sshmcp disconnect",
            How::DaemonStop => "sshmcp daemon stop",
            How::Kill => "sshmcp kill",
        }
    }
}

/// The ids of what the person stopped (sessions, forwards), newest last, at most
/// [`Stopped::KEPT`], with when and how (the CLI's command): an agent that calls on one is
/// told that the person did it, not left to take it for a fault and start it again.
#[derive(Default)]
pub struct Stopped(Mutex<VecDeque<StoppedOne>>);

/// One thing the person stopped, as a stop of the daemon hands it to the next daemon.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoppedOne {
    pub id: String,
    pub at_unix_ms: u64,
    pub how: How,
}

impl Stopped {
    const KEPT: usize = 64;

    /// Remembers that the person stopped `id` now, by `how`.
    pub fn remember(&self, id: &str, how: How) {
        let at_unix_ms = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.add(StoppedOne {
            id: id.to_string(),
            at_unix_ms,
            how,
        });
    }

    /// Remembers what an earlier daemon remembered.
    pub fn add(&self, one: StoppedOne) {
        let mut stopped = self.0.lock().unwrap_or_else(|p| p.into_inner());
        stopped.push_back(one);
        while stopped.len() > Self::KEPT {
            stopped.pop_front();
        }
    }

    /// All it remembers, oldest first.
    pub fn all(&self) -> Vec<StoppedOne> {
        let stopped = self.0.lock().unwrap_or_else(|p| p.into_inner());
        stopped.iter().cloned().collect()
    }

    /// What the agent is told of `id` if the person stopped it: when (RFC 3339) and how.
    pub fn told(&self, id: &str) -> Option<String> {
        let stopped = self.0.lock().unwrap_or_else(|p| p.into_inner());
        stopped.iter().rev().find(|one| one.id == id).map(|one| {
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(one.at_unix_ms);
            format!(
                "at {} ({})",
                sshmcp_proto::time::rfc3339(at),
                one.how.as_str()
            )
        })
    }
}
