//! sshmcpd: the per-user daemon that owns every OpenSSH master and serves the sshmcp API on a
//! Unix socket. `main.rs` parses settings and claims the instance; [`lifecycle::run`] serves.

pub mod audit;
pub mod commands;
pub mod config;
pub mod exec;
pub mod files;
pub mod forwards;
pub mod inspect;
#[cfg(test)]
mod layers;
pub mod lifecycle;
pub mod local_process;
pub mod logfile;
pub mod mux;
pub mod operation;
pub mod person;
pub mod platform;
pub mod policy;
#[cfg(test)]
mod programs;
pub mod random;
pub mod remote;
pub mod request;
pub mod server;
pub mod service;
pub mod session;
pub mod tasks;
pub mod tools;
pub mod transfers;
