//! The contract's fixed limits and defaults, shared so the daemon enforces exactly what the
//! shim documents.

/// Largest command text `exec` accepts, in UTF-8 bytes.
pub const MAX_COMMAND_BYTES: usize = 1_048_576;
/// Smallest and largest `exec` timeout, in seconds.
pub const MIN_TIMEOUT_SECS: f64 = 0.1;
pub const MAX_TIMEOUT_SECS: f64 = 86_400.0;
/// The `exec` timeout when the caller gives none.
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;
/// Longest accepted `connect_timeout`, in seconds.
pub const MAX_CONNECT_TIMEOUT_SECS: f64 = 3_600.0;
/// The connect timeout when the caller gives none: long enough for a passphrase dialog or a
/// hardware-key touch, short enough that a dead host does not hold the authentication slot,
/// and under the minute after which many MCP clients give up on a call (a connect cut off
/// there leaves a session whose key the agent never saw).
pub const DEFAULT_CONNECT_TIMEOUT_SECS: f64 = 45.0;

/// Default daemon settings (section 6); each can be changed by flag, environment or file.
pub const DEFAULT_MAX_SESSIONS: u32 = 32;
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 65_536;
pub const DEFAULT_MAX_TRANSFERS: u32 = 4;
/// Bytes one spooled stream may take on the local disk.
pub const DEFAULT_MAX_SPOOL_BYTES: u64 = 1 << 30;
