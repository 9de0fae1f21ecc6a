//! Running commands on a session's master: request checks, channel slots, the remote wrapper,
//! bounded capture, spooling, timeouts and remote kills.

pub mod capture;
pub mod channel;
pub mod request;
pub mod run;
pub mod spool;
pub mod wrapper;

pub use run::{CommandSpec, RunError, run_command};
