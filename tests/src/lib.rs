//! The end-to-end test harness: a throwaway sshd on 127.0.0.1, non-root test users, one
//! temp root per test with the daemon pointed at it, and an MCP client that drives the real
//! `sshmcp-mcp` binary over stdio.
#![allow(clippy::too_many_lines)] // A test scenario reads as one story.

pub mod bench;
pub mod bins;
pub mod churn;
pub mod disk;
pub mod echo;
pub mod env;
pub mod local_tools;
pub mod mcp;
pub mod netns;
pub mod process;
pub mod ring;
pub mod sshd;
pub mod users;

pub use env::TestEnv;
pub use mcp::McpClient;
pub use sshd::{Sshd, SshdOptions};
