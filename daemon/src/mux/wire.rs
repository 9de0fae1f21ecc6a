//! The byte layout of the mux protocol (OpenSSH `PROTOCOL.mux`, as `mux.c` really reads it):
//! building client packets and splitting the master's replies.

/// Client and master message types.
pub const MSG_HELLO: u32 = 0x0000_0001;
pub const C_NEW_SESSION: u32 = 0x1000_0002;
pub const C_ALIVE_CHECK: u32 = 0x1000_0004;
pub const C_TERMINATE: u32 = 0x1000_0005;
pub const C_OPEN_FWD: u32 = 0x1000_0006;
pub const C_CLOSE_FWD: u32 = 0x1000_0007;
pub const S_OK: u32 = 0x8000_0001;
pub const S_PERMISSION_DENIED: u32 = 0x8000_0002;
pub const S_FAILURE: u32 = 0x8000_0003;
pub const S_EXIT_MESSAGE: u32 = 0x8000_0004;
pub const S_ALIVE: u32 = 0x8000_0005;
pub const S_SESSION_OPENED: u32 = 0x8000_0006;
pub const S_REMOTE_PORT: u32 = 0x8000_0007;
pub const S_TTY_ALLOC_FAIL: u32 = 0x8000_0008;
/// Forwarding types of OPEN_FWD and CLOSE_FWD.
pub const FWD_LOCAL: u32 = 1;
pub const FWD_REMOTE: u32 = 2;
pub const FWD_DYNAMIC: u32 = 3;
pub const MUX_VERSION: u32 = 4;

/// A packet the master sent, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Hello {
        version: u32,
    },
    Ok {
        request_id: u32,
    },
    SessionOpened {
        request_id: u32,
        session_id: u32,
    },
    /// `MUX_S_FAILURE` or `MUX_S_PERMISSION_DENIED`, with the master's reason.
    Refused {
        request_id: u32,
        reason: String,
    },
    ExitMessage {
        session_id: u32,
        status: u32,
    },
    Alive {
        request_id: u32,
        pid: u32,
    },
    /// The port the server allocated for a remote forward asked with listen port 0.
    RemotePort {
        request_id: u32,
        port: u32,
    },
    TtyAllocFail,
    Unknown {
        kind: u32,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed mux packet: {0}")]
pub struct WireError(&'static str);

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s);
}

fn packet(body: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    put_u32(&mut out, body.len() as u32);
    out.extend_from_slice(&body);
    out
}

/// The client's HELLO (it carries no request id).
pub fn hello() -> Vec<u8> {
    let mut body = Vec::new();
    put_u32(&mut body, MSG_HELLO);
    put_u32(&mut body, MUX_VERSION);
    packet(body)
}

/// NEW_SESSION without tty, X11 or agent forwarding, no escape character, running `command`
/// through the remote login shell. The "bool" flags are u32 on the wire whatever the text says.
pub fn new_session(request_id: u32, command: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(64 + command.len());
    put_u32(&mut body, C_NEW_SESSION);
    put_u32(&mut body, request_id);
    put_string(&mut body, b"");
    for flag in [0u32, 0, 0, 0] {
        put_u32(&mut body, flag);
    }
    put_u32(&mut body, u32::MAX);
    put_string(&mut body, b"");
    put_string(&mut body, command);
    packet(body)
}

/// A request carrying only its type and request id (ALIVE_CHECK, TERMINATE).
pub fn simple_request(kind: u32, request_id: u32) -> Vec<u8> {
    let mut body = Vec::new();
    put_u32(&mut body, kind);
    put_u32(&mut body, request_id);
    packet(body)
}

/// OPEN_FWD or CLOSE_FWD (`kind`) of one forwarding: its type, where it listens, where it
/// connects (`socks` and port 0 for a dynamic forward, as `ssh -D` sends it).
pub fn forward(
    kind: u32,
    request_id: u32,
    forwarding: u32,
    listen: (&str, u32),
    connect: (&str, u32),
) -> Vec<u8> {
    let mut body = Vec::new();
    put_u32(&mut body, kind);
    put_u32(&mut body, request_id);
    put_u32(&mut body, forwarding);
    put_string(&mut body, listen.0.as_bytes());
    put_u32(&mut body, listen.1);
    put_string(&mut body, connect.0.as_bytes());
    put_u32(&mut body, connect.1);
    packet(body)
}

/// Accumulates bytes read from the control socket and splits them into packets: the master
/// may put several packets into one read, or one packet across reads.
#[derive(Default)]
pub struct PacketBuffer {
    buf: Vec<u8>,
}

/// Packets larger than this are not something a master sends; refusing them bounds memory.
const MAX_PACKET: usize = 256 * 1024;

impl PacketBuffer {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Whether no byte is waiting to be decoded.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The next complete packet, if one is buffered.
    pub fn next_reply(&mut self) -> Result<Option<Reply>, WireError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes(self.buf[..4].try_into().expect("4 bytes")) as usize;
        if len > MAX_PACKET {
            return Err(WireError("packet too large"));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let body: Vec<u8> = self.buf.drain(..4 + len).skip(4).collect();
        decode(&body).map(Some)
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u32(&mut self) -> Result<u32, WireError> {
        if self.0.len() < 4 {
            return Err(WireError("truncated integer"));
        }
        let (head, rest) = self.0.split_at(4);
        self.0 = rest;
        Ok(u32::from_be_bytes(head.try_into().expect("4 bytes")))
    }

    fn string(&mut self) -> Result<String, WireError> {
        let len = self.u32()? as usize;
        if self.0.len() < len {
            return Err(WireError("truncated string"));
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(String::from_utf8_lossy(head).into_owned())
    }
}

fn decode(body: &[u8]) -> Result<Reply, WireError> {
    let mut r = Reader(body);
    let kind = r.u32()?;
    Ok(match kind {
        MSG_HELLO => Reply::Hello { version: r.u32()? },
        S_OK => Reply::Ok {
            request_id: r.u32()?,
        },
        S_SESSION_OPENED => Reply::SessionOpened {
            request_id: r.u32()?,
            session_id: r.u32()?,
        },
        S_FAILURE | S_PERMISSION_DENIED => Reply::Refused {
            request_id: r.u32()?,
            reason: r.string()?,
        },
        S_EXIT_MESSAGE => Reply::ExitMessage {
            session_id: r.u32()?,
            status: r.u32()?,
        },
        S_ALIVE => Reply::Alive {
            request_id: r.u32()?,
            pid: r.u32()?,
        },
        S_REMOTE_PORT => Reply::RemotePort {
            request_id: r.u32()?,
            port: r.u32()?,
        },
        S_TTY_ALLOC_FAIL => Reply::TtyAllocFail,
        kind => Reply::Unknown { kind },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_layout_matches_protocol_mux() {
        let p = forward(C_OPEN_FWD, 3, FWD_LOCAL, ("127.0.0.1", 8080), ("db", 5432));
        let mut want = Vec::new();
        for v in [C_OPEN_FWD, 3, FWD_LOCAL, 9] {
            want.extend(v.to_be_bytes());
        }
        want.extend(b"127.0.0.1");
        want.extend(8080u32.to_be_bytes());
        want.extend(2u32.to_be_bytes());
        want.extend(b"db");
        want.extend(5432u32.to_be_bytes());
        assert_eq!(&p[..4], &(want.len() as u32).to_be_bytes());
        assert_eq!(&p[4..], &want[..]);
        let mut buf = PacketBuffer::default();
        let mut reply = Vec::new();
        for v in [12u32, S_REMOTE_PORT, 3, 40000] {
            reply.extend(v.to_be_bytes());
        }
        buf.push(&reply);
        assert_eq!(
            buf.next_reply(),
            Ok(Some(Reply::RemotePort {
                request_id: 3,
                port: 40000
            }))
        );
    }

    #[test]
    fn new_session_layout_matches_mux_c() {
        let p = new_session(7, b"true");
        // length, type, rid, reserved "", 4 u32 flags, escape, term "", command
        assert_eq!(&p[..4], &((p.len() - 4) as u32).to_be_bytes());
        assert_eq!(&p[4..8], &C_NEW_SESSION.to_be_bytes());
        assert_eq!(&p[8..12], &7u32.to_be_bytes());
        assert_eq!(&p[12..16], &0u32.to_be_bytes());
        assert_eq!(&p[16..32], &[0u8; 16]);
        assert_eq!(&p[32..36], &u32::MAX.to_be_bytes());
        assert_eq!(&p[36..40], &0u32.to_be_bytes());
        assert_eq!(&p[40..44], &4u32.to_be_bytes());
        assert_eq!(&p[44..], b"true");
    }

    #[test]
    fn splits_coalesced_and_partial_packets() {
        let mut wire = hello();
        let mut opened = Vec::new();
        for v in [S_SESSION_OPENED, 1, 2] {
            put_u32(&mut opened, v);
        }
        wire.extend(packet(opened));
        let mut buf = PacketBuffer::default();
        buf.push(&wire[..6]);
        assert_eq!(buf.next_reply(), Ok(None));
        buf.push(&wire[6..]);
        assert_eq!(buf.next_reply(), Ok(Some(Reply::Hello { version: 4 })));
        assert_eq!(
            buf.next_reply(),
            Ok(Some(Reply::SessionOpened {
                request_id: 1,
                session_id: 2
            }))
        );
        assert_eq!(buf.next_reply(), Ok(None));
    }

    #[test]
    fn decodes_refusal_reason() {
        let mut body = Vec::new();
        put_u32(&mut body, S_FAILURE);
        put_u32(&mut body, 1);
        put_string(&mut body, b"Session open refused by peer");
        let mut buf = PacketBuffer::default();
        buf.push(&packet(body));
        assert_eq!(
            buf.next_reply(),
            Ok(Some(Reply::Refused {
                request_id: 1,
                reason: "Session open refused by peer".into()
            }))
        );
    }

    #[test]
    fn rejects_oversized_packets() {
        let mut buf = PacketBuffer::default();
        buf.push(&u32::MAX.to_be_bytes());
        assert!(buf.next_reply().is_err());
    }
}
