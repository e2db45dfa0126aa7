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

use crate::wire::{Done, Message};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

mod failure;

pub use failure::ExchangeError;

/// The other side of the exchange: the host to connect to (none: we are the server and
/// wait for it, rc_pingpong's rule), the TCP port (`-p`) and how long to wait for it
/// (`--timeout`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// As given on the command line: a name or an address. `None` on the server.
    pub host: Option<String>,
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
        self.recv_checked(true)
    }

    /// [`Connection::recv`] for a protocol's last message, after which the peer may send
    /// something this side does not read (perftest 6.06 writes `"done"` right behind its
    /// last keys, and later versions nothing): bytes that follow are not a fault.
    pub fn recv_last<M: Message>(&mut self) -> Result<M, ExchangeError> {
        self.recv_checked(false)
    }

    fn recv_checked<M: Message>(&mut self, nothing_after: bool) -> Result<M, ExchangeError> {
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
        let extra = if nothing_after { self.pending_bytes() } else { Vec::new() };
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
