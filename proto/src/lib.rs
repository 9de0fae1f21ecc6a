//! The one API boundary of sshmcp: the tarpc service, its wire types and error codes, the
//! protocol version, the runtime paths, and the connect-or-start client used by the shim and
//! the CLI. Nothing here knows about OpenSSH; the daemon converts its internals at this edge.

pub mod audit;
pub mod client;
pub mod command;
pub mod error;
pub mod exec;
pub mod files;
pub mod forward;
pub mod inspect;
pub mod limits;
pub mod overview;
pub mod paths;
pub mod platform;
pub mod policy;
pub mod service;
pub mod session;
pub mod task;
pub mod text;
pub mod time;
pub mod tool;
pub mod transfer;

pub use error::{DaemonError, ErrorCode};
pub use service::{Daemon, DaemonClient, DaemonStatus, Hello, PROTOCOL_VERSION};
