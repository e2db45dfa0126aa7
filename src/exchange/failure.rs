//! What can go wrong on the side channel: [`ExchangeError`], and for each case the likely
//! cause and the fix, in the words the steps print.

use crate::wire::{Message, WireError};
use std::fmt;
use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::time::Duration;

/// Everything that can go wrong on the side channel, each with its likely cause and fix.
#[derive(Debug)]
pub enum ExchangeError {
    /// The server could not listen on its port.
    Bind { port: u16, source: io::Error },
    /// No client connected within the timeout.
    AcceptTimeout { port: u16, waited: Duration },
    /// The client could not turn `host` into an address.
    Resolve { host: String, source: Option<io::Error> },
    /// Every connect attempt was refused until the timeout: no server on that port.
    NothingListening { host: String, port: u16, waited: Duration },
    /// Connecting failed for another reason (unreachable, timed out, …).
    Connect { host: String, port: u16, source: io::Error },
    /// The peer did not complete a message (`got` of `expected` bytes) within the timeout;
    /// `sending` when it was our write that could not go out.
    Timeout { peer: SocketAddr, what: &'static str, got: usize, expected: usize, waited: Duration, sending: bool },
    /// The peer closed (or reset) the connection before sending/accepting any of the message.
    Closed { peer: SocketAddr, what: &'static str, expected: usize, sending: bool },
    /// The peer sent part of a message and then closed.
    Short { peer: SocketAddr, what: &'static str, expected: usize, received: Vec<u8> },
    /// More bytes followed a complete message before we answered it.
    OverLong { peer: SocketAddr, what: &'static str, expected: usize, received: Vec<u8>, extra: Vec<u8> },
    /// A complete message arrived but is not in rc_pingpong's format.
    Malformed { peer: SocketAddr, what: &'static str, error: WireError, received: Vec<u8> },
    /// We were asked to send a value the format cannot carry (a bug in the caller).
    Unsendable { what: &'static str, error: WireError },
    /// Any other socket error, with the operation that failed.
    Io { peer: Option<SocketAddr>, op: &'static str, source: io::Error },
}

/// The TCP side channel's errors already say what happened and what to try; they become
/// the cause of a failed "address exchange". (The impl lives here, not in `error`, so that
/// the root error type imports nothing of the crate's.)
impl From<ExchangeError> for crate::error::Error {
    fn from(err: ExchangeError) -> Self {
        crate::error::Error::new("the TCP address exchange").cause(err.to_string())
    }
}

impl std::error::Error for ExchangeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExchangeError::Bind { source, .. }
            | ExchangeError::Connect { source, .. }
            | ExchangeError::Io { source, .. } => Some(source),
            ExchangeError::Resolve { source: Some(source), .. } => Some(source),
            ExchangeError::Malformed { error, .. } | ExchangeError::Unsendable { error, .. } => Some(error),
            _ => None,
        }
    }
}

fn secs(d: &Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

impl fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ExchangeError::*;
        match self {
            Bind { port, source } => {
                write!(f, "couldn't listen on TCP port {port}: {source}")?;
                if source.kind() == ErrorKind::AddrInUse {
                    write!(f, " — another server (an earlier run, or ibv_rc_pingpong) is still listening there; stop it, or use another -p on both sides")?;
                } else if source.kind() == ErrorKind::PermissionDenied {
                    write!(f, " — ports below 1024 need root; use the default 18515")?;
                }
                Ok(())
            }
            AcceptTimeout { port, waited } => write!(
                f,
                "no client connected to TCP port {port} within {} — start the client (the same \
                 step with this machine's address, e.g. 127.0.0.1, and the same -p) in another \
                 terminal, or raise --timeout",
                secs(waited)
            ),
            Resolve { host, source } => {
                write!(f, "couldn't resolve host '{host}'")?;
                if let Some(e) = source {
                    write!(f, ": {e}")?;
                }
                write!(f, " — check the spelling, or give an IP address such as 127.0.0.1")
            }
            NothingListening { host, port, waited } => write!(
                f,
                "nothing is listening on {host}:{port} (connection refused for {}) — start the \
                 server first (the same step with no host argument), and check that both sides \
                 use the same -p",
                secs(waited)
            ),
            Connect { host, port, source } => {
                write!(f, "couldn't connect to {host}:{port}: {source}")?;
                match source.kind() {
                    ErrorKind::TimedOut | ErrorKind::WouldBlock => {
                        write!(f, " — no answer at all: is the host up, and does a firewall drop TCP port {port}?")
                    }
                    _ => write!(f, " — check the host address and that it is reachable (ping it)"),
                }
            }
            Timeout { peer, what, expected, waited, sending: true, .. } => write!(
                f,
                "couldn't send our {expected}-byte {what} to {peer} within {} — the peer \
                 accepted but does not read; is the other side stuck?",
                secs(waited)
            ),
            Timeout { peer, what, got: 0, expected, waited, sending: false } => write!(
                f,
                "the peer {peer} is connected but sent nothing for {} while we waited for its \
                 {expected}-byte {what} — is the other side stuck (e.g. in an ibv_modify_qp that \
                 failed without closing), or is it an ibv_rc_pingpong of a different version / a \
                 different protocol? (--timeout to wait longer)",
                secs(waited)
            ),
            Timeout { peer, what, got, expected, waited, sending: false } => {
                write!(
                    f,
                    "the peer {peer} sent only {got} of the {expected} bytes of its {what}, then \
                     nothing for {}",
                    secs(waited)
                )?;
                if *got == crate::wire::Dest::LEN && *expected == crate::wire::RdmaDest::LEN {
                    write!(
                        f,
                        " — 52 bytes is rc_pingpong's message: is the peer ibv_rc_pingpong or one \
                         of steps 05-08, while this side is 09_rdma_write? Run 09 on both sides"
                    )
                } else {
                    write!(f, " — both sides must run the same step (same message format)")
                }
            }
            Closed { peer, what, expected, sending: false } => write!(
                f,
                "the peer {peer} closed the connection before sending its {expected}-byte {what} \
                 — look at the other side's error (did its device setup or ibv_modify_qp fail?)"
            ),
            Closed { peer, what, expected, sending: true } => write!(
                f,
                "the peer {peer} closed the connection before we could send our {expected}-byte \
                 {what} — look at the other side's error"
            ),
            Short { peer, what, expected, received } => write!(
                f,
                "the peer {peer} closed the connection after {} of the {expected} bytes of its \
                 {what} (received \"{}\") — it is not speaking rc_pingpong's format, or it \
                 crashed mid-message",
                received.len(),
                received.escape_ascii()
            ),
            OverLong { peer, what, expected, received, extra } => {
                write!(
                    f,
                    "the peer {peer} sent more than the {expected} bytes of its {what}: \"{}\" was \
                     followed by \"{}\"",
                    received.escape_ascii(),
                    extra.escape_ascii()
                )?;
                if *expected == crate::wire::Dest::LEN {
                    write!(f, " — is the peer 09_rdma_write (78-byte messages)? Both sides must run the same step")
                } else {
                    write!(f, " — both sides must run the same step (same message format)")
                }
            }
            Malformed { peer, what, error, received } => write!(
                f,
                "the {what} from the peer {peer} is not in rc_pingpong's format: {error}; \
                 received \"{}\" — is the peer an ibv_rc_pingpong-compatible program on the \
                 right port?",
                received.escape_ascii()
            ),
            Unsendable { what, error } => write!(f, "refusing to send our {what}: {error}"),
            Io { peer, op, source } => {
                write!(f, "{op} failed")?;
                if let Some(p) = peer {
                    write!(f, " on the connection to {p}")?;
                }
                write!(f, ": {source}")
            }
        }
    }
}
