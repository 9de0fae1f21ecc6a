//! What sshmcp's three binaries share on the user's machine, beside the wire (`sshmcp-proto`):
//! where the runtime and state directories are and that they are private (`paths`), what the
//! system says of a local process (`platform`), which rsync transfers run (`rsync`: the
//! daemon runs it, doctor reports it), and the client that finds the daemon or
//! starts it (`client`, used by the MCP server and the CLI).

pub mod client;
pub mod paths;
pub mod platform;
pub mod rsync;
