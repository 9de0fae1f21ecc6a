//! The one API boundary of sshmcp: the tarpc service, its wire types and error codes, the
//! protocol version, the table of tools, the formats the daemon writes for the CLI (the audit
//! trail), and, behind the `schema` feature only the shim enables, what MCP clients are shown
//! of each tool (`described`). Finding or starting the daemon, paths and processes are
//! `sshmcp-local`'s. Nothing here knows about OpenSSH; the daemon converts its internals at
//! this edge.

pub mod audit;
pub mod command;
#[cfg(feature = "schema")]
pub mod described;
pub mod error;
pub mod exec;
pub mod files;
pub mod forward;
pub mod inspect;
pub mod limits;
pub mod overview;
pub mod policy;
pub mod service;
pub mod session;
pub mod signal;
pub mod task;
pub mod text;
pub mod time;
pub mod tool;
pub mod transfer;

pub use error::{DaemonError, ErrorCode};
pub use service::{Daemon, DaemonClient, DaemonStatus, Hello, PROTOCOL_VERSION};
