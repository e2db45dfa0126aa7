//! The TCP side channel: `pp_client_exch_dest` / `pp_server_exch_dest`, made robust.
//!
//! # The protocol, as rc_pingpong runs it
//!
//! ```text
//!   client                                   server
//!   ------                                   ------
//!                                            bind(0.0.0.0:18515), listen, accept ONE peer
//!   connect(host:18515)  ───────────────────▶
//!   write 52-byte address  ─────────────────▶ read 52 bytes, sscanf
//!                                            ibv_modify_qp INIT→RTR→RTS  (pp_connect_ctx)
//!   read 52 bytes, sscanf  ◀───────────────── write its 52-byte address
//!   write "done\0" (5 bytes) ───────────────▶ read, expect 5 bytes
//!   close                                    close
//!   ibv_modify_qp INIT→RTR→RTS, first SEND
//! ```
//!
//! The client speaks first. The server connects its QP *before* replying, so when the client
//! learns the server's address the server is already able to receive; `"done"` tells the
//! server the client has its address. In code, the server does
//! `accept → recv → (connect QP) → send → recv_done`, the client
//! `connect → send → recv → send_done`.
//!
//! # What we add over the C code
//!
//! rc_pingpong does one `read()` per message and treats anything but a full message as an
//! error; TCP may legally deliver fewer bytes, so we loop. It also blocks forever — on a
//! server that accepted and then hung, or a client started before its server (the C client
//! fails at once with "Couldn't connect"). Here every wait is bounded by one timeout (the
//! steps' `--timeout`), a refused connect is retried until then, and every failure is an
//! [`ExchangeError`] that says what happened and what to try.

use crate::wire::{Done, Message, WireError};
use std::fmt;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Which side of the TCP exchange we are. rc_pingpong decides by whether a host was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// No host argument: listen on `-p`, accept one client, reply after connecting the QP.
    Server,
    /// A host argument: connect to it, speak first, send `"done"` last. Also the side that
    /// posts the first SEND of the ping-pong.
    Client {
        /// As given on the command line: a name or an address.
        host: String,
    },
}

/// The other side of the exchange: our role, the TCP port (`-p`) and how long to wait
/// for it (`--timeout`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub role: Role,
    pub port: u16,
    pub timeout: Duration,
}

/// How often a refused connect or a pending accept is retried: short enough that a client
/// started just before its server connects promptly, long enough not to spin.
const RETRY_INTERVAL: Duration = Duration::from_millis(50);

/// A bound, listening server socket that has not accepted its peer yet.
///
/// Split from [`Connection::accept`] so a caller (or a test using port 0) can learn the real
/// port before blocking in accept.
#[derive(Debug)]
pub struct Listener {
    listener: TcpListener,
    port: u16,
}

impl Listener {
    /// Bind the wildcard address on `port`, as rc_pingpong does.
    ///
    /// rc_pingpong calls `getaddrinfo(NULL, port, AI_PASSIVE, AF_UNSPEC)` and binds the first
    /// result that works; glibc lists `0.0.0.0` before `::`, so the C server listens on IPv4
    /// only. We do the same, falling back to `::` on an IPv6-only host. `SO_REUSEADDR` (which
    /// the C code sets so a restarted server need not wait out TIME_WAIT) is set by
    /// `std::net::TcpListener::bind` on Unix.
    pub fn bind(port: u16) -> Result<Listener, ExchangeError> {
        let v4 = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
        let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
        let listener = match TcpListener::bind(v4) {
            Ok(l) => l,
            // Fall back only when IPv4 itself is missing: "port in use" or "permission
            // denied" would not be fixed by IPv6, and silently listening on `::` alone
            // would hide them.
            Err(e4) if matches!(e4.kind(), ErrorKind::AddrInUse | ErrorKind::PermissionDenied) => {
                return Err(ExchangeError::Bind { port, source: e4 })
            }
            Err(e4) => TcpListener::bind(v6).map_err(|_| ExchangeError::Bind { port, source: e4 })?,
        };
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(port);
        Ok(Listener { listener, port })
    }

    /// The port actually bound (differs from the requested one only when that was 0).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Wait up to `timeout` for one client, then stop listening (the C code `close`s the
    /// listening socket right after `accept`: one server serves one client).
    pub fn accept(self, timeout: Duration) -> Result<Connection, ExchangeError> {
        let io = |source| ExchangeError::Io { peer: None, op: "accept", source };
        // std has no accept-with-timeout; a non-blocking listener polled every RETRY_INTERVAL
        // is simple and portable. (Production code would use poll(2)/epoll.)
        self.listener.set_nonblocking(true).map_err(io)?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    // Linux does not inherit O_NONBLOCK through accept(), but be explicit:
                    // reads below rely on blocking-with-timeout semantics.
                    stream.set_nonblocking(false).map_err(io)?;
                    return Connection::new(stream, peer, timeout);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(ExchangeError::AcceptTimeout { port: self.port, waited: timeout });
                    }
                    std::thread::sleep(RETRY_INTERVAL.min(deadline - now));
                }
                Err(e) => return Err(io(e)),
            }
        }
    }
}

/// One TCP connection to the peer, every read and write bounded by the same timeout.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    timeout: Duration,
}

impl Connection {
    fn new(stream: TcpStream, peer: SocketAddr, timeout: Duration) -> Result<Connection, ExchangeError> {
        // Messages are tiny and latency matters more than packet count; also makes a
        // message's bytes leave in one segment, as the C peer's single read() expects.
        let _ = stream.set_nodelay(true);
        stream.set_write_timeout(Some(timeout)).map_err(|source| ExchangeError::Io {
            peer: Some(peer),
            op: "setsockopt(SO_SNDTIMEO)",
            source,
        })?;
        Ok(Connection { stream, peer, timeout })
    }

    /// Server role: listen on `port` (all IPv4 addresses, like rc_pingpong) and accept one
    /// client, waiting at most `timeout`.
    pub fn accept(port: u16, timeout: Duration) -> Result<Connection, ExchangeError> {
        Listener::bind(port)?.accept(timeout)
    }

    /// Client role: resolve `host` (name or address, via `getaddrinfo` like the C client),
    /// try each address in order, and retry while *refused* until `timeout` has passed.
    ///
    /// Retrying is the difference from rc_pingpong that makes "start both sides at once"
    /// (scripts, tests, two terminals) work. Only `ECONNREFUSED` is retried: it means the host
    /// is up but nothing listens yet. Anything else (no route, a firewall dropping SYNs) will
    /// not fix itself, and is reported at once or when the connect itself times out.
    pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<Connection, ExchangeError> {
        let addrs: Vec<SocketAddr> = match (host, port).to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => return Err(ExchangeError::Resolve { host: host.to_owned(), source: Some(e) }),
        };
        if addrs.is_empty() {
            return Err(ExchangeError::Resolve { host: host.to_owned(), source: None });
        }
        let deadline = Instant::now() + timeout;
        loop {
            let mut last_err = None;
            for addr in &addrs {
                let remaining = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
                match TcpStream::connect_timeout(addr, remaining) {
                    Ok(stream) => return Connection::new(stream, *addr, timeout),
                    Err(e) => last_err = Some(e),
                }
            }
            let e = last_err.expect("addrs is not empty");
            if e.kind() != ErrorKind::ConnectionRefused && e.kind() != ErrorKind::Interrupted {
                return Err(ExchangeError::Connect { host: host.to_owned(), port, source: e });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ExchangeError::NothingListening { host: host.to_owned(), port, waited: timeout });
            }
            std::thread::sleep(RETRY_INTERVAL.min(deadline - now));
        }
    }

    /// The peer's address (for the trace: which client connected).
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The timeout every wait on this connection is bounded by.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Write one message in a single `write_all` (the C reader does a single `read()`).
    pub fn send<M: Message>(&mut self, msg: &M) -> Result<(), ExchangeError> {
        msg.check().map_err(|error| ExchangeError::Unsendable { what: M::NAME, error })?;
        let bytes = msg.encode();
        debug_assert_eq!(bytes.len(), M::LEN);
        self.stream.write_all(&bytes).and_then(|()| self.stream.flush()).map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => ExchangeError::Timeout {
                peer: self.peer,
                what: M::NAME,
                got: 0,
                expected: M::LEN,
                waited: self.timeout,
                sending: true,
            },
            ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => {
                ExchangeError::Closed { peer: self.peer, what: M::NAME, expected: M::LEN, sending: true }
            }
            _ => ExchangeError::Io { peer: Some(self.peer), op: "write", source: e },
        })
    }

    /// Read exactly `M::LEN` bytes and decode them.
    ///
    /// Loops over short reads; the whole message must arrive within the timeout. Detects the
    /// peer closing before the message (`Closed`), in the middle of it (`Short`), and — when
    /// the extra bytes have already arrived — a message longer than `M::LEN` (`OverLong`),
    /// e.g. 09's 78-byte message sent to a 52-byte reader. Bytes the peer sends later cannot
    /// be told apart from a next message, so that check is best-effort.
    pub fn recv<M: Message>(&mut self) -> Result<M, ExchangeError> {
        let mut buf = vec![0u8; M::LEN];
        let mut got = 0;
        let deadline = Instant::now() + self.timeout;
        while got < M::LEN {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let timeout_err = |got| ExchangeError::Timeout {
                peer: self.peer,
                what: M::NAME,
                got,
                expected: M::LEN,
                waited: self.timeout,
                sending: false,
            };
            if remaining.is_zero() {
                return Err(timeout_err(got));
            }
            self.stream.set_read_timeout(Some(remaining)).map_err(|source| ExchangeError::Io {
                peer: Some(self.peer),
                op: "setsockopt(SO_RCVTIMEO)",
                source,
            })?;
            match self.stream.read(&mut buf[got..]) {
                Ok(0) if got == 0 => {
                    return Err(ExchangeError::Closed {
                        peer: self.peer,
                        what: M::NAME,
                        expected: M::LEN,
                        sending: false,
                    })
                }
                Ok(0) => {
                    buf.truncate(got);
                    return Err(ExchangeError::Short {
                        peer: self.peer,
                        what: M::NAME,
                        expected: M::LEN,
                        received: buf,
                    });
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                    return Err(timeout_err(got))
                }
                Err(e) if e.kind() == ErrorKind::ConnectionReset || e.kind() == ErrorKind::ConnectionAborted => {
                    buf.truncate(got);
                    return Err(if got == 0 {
                        ExchangeError::Closed { peer: self.peer, what: M::NAME, expected: M::LEN, sending: false }
                    } else {
                        ExchangeError::Short { peer: self.peer, what: M::NAME, expected: M::LEN, received: buf }
                    });
                }
                Err(e) => return Err(ExchangeError::Io { peer: Some(self.peer), op: "read", source: e }),
            }
        }
        let extra = self.pending_bytes();
        if !extra.is_empty() {
            return Err(ExchangeError::OverLong {
                peer: self.peer,
                what: M::NAME,
                expected: M::LEN,
                received: buf,
                extra,
            });
        }
        M::decode(&buf).map_err(|error| ExchangeError::Malformed {
            peer: self.peer,
            what: M::NAME,
            error,
            received: buf,
        })
    }

    /// Bytes that have already arrived beyond the message just read (peeked, not consumed).
    /// In this protocol nothing may follow a message until we answer it, so any is a fault.
    fn pending_bytes(&self) -> Vec<u8> {
        let mut extra = [0u8; 64];
        if self.stream.set_nonblocking(true).is_err() {
            return Vec::new();
        }
        let n = self.stream.peek(&mut extra).unwrap_or(0); // WouldBlock: nothing pending; 0: EOF
        let _ = self.stream.set_nonblocking(false);
        extra[..n].to_vec()
    }

    /// Client, last step: `write(sockfd, "done", sizeof "done")` — 5 bytes, NUL included.
    pub fn send_done(&mut self) -> Result<(), ExchangeError> {
        self.send(&Done)
    }

    /// Server, last step: wait for the client's `"done\0"`.
    pub fn recv_done(&mut self) -> Result<(), ExchangeError> {
        self.recv::<Done>().map(|Done| ())
    }
}

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
