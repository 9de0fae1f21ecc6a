//! The MCP tools, one file per group. Each takes its raw arguments (see `args`), calls the
//! daemon, and shapes the answer (see `answer`).

pub mod commands;
pub mod exec;
pub mod files;
pub mod forwards;
pub mod inspect;
pub mod paths;
pub mod session;
pub mod tasks;
pub mod transfers;
