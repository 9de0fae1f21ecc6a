//! A native client of OpenSSH's control-master ("mux") protocol: opening sessions on a master
//! without forking `ssh -S`, which is three times faster and can never fall back to a fresh
//! connection when the server refuses a channel.

pub mod client;
pub mod wire;

pub use client::{
    ControlEvent, EXCHANGE_TIMEOUT, Forwarding, MuxError, MuxSession, alive_check, close_forward,
    open_forward, open_session, terminate, watch_until_closed,
};
