//! TCP ports no two tests share, in this process or any other.

use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::sync::Mutex;

/// The range every test's TCP ports come from (below Linux's ephemeral ports, 32768 and
/// up, and clear of rc_pingpong's default 18515 and of the ports `lab/bench` and
/// `lab/memcheck` start from). `cargo xtask run` without `--port` takes one from here too.
pub const TCP_PORTS: std::ops::Range<u16> = 21000..23000;

/// One TCP port no other test, in this process or any other, is using (see [`tcp_ports`]).
pub fn tcp_port() -> u16 {
    tcp_ports(1)
}

/// `n` consecutive TCP ports for this test process alone, kept until it exits.
///
/// A port is claimed by binding the abstract Unix socket `rdma-dissect/tcp-port/<port>`:
/// the kernel lets one socket at a time have a name, across every process of the machine
/// (or VM), and drops it when the process ends, however it ends — no lock files to go
/// stale. A claimed port must also be free for a TCP listener at the time.
pub fn tcp_ports(n: u16) -> u16 {
    static CLAIMS: Mutex<Vec<UnixListener>> = Mutex::new(Vec::new());
    let mut claims = CLAIMS.lock().unwrap_or_else(|e| e.into_inner());
    'first: for first in TCP_PORTS.start..=TCP_PORTS.end - n {
        let mut held = Vec::new();
        for port in first..first + n {
            match claim(port) {
                Some(claim) => held.push(claim),
                None => continue 'first,
            }
        }
        claims.extend(held);
        return first;
    }
    panic!("no {n} free consecutive TCP ports left in {TCP_PORTS:?}");
}

fn claim(port: u16) -> Option<UnixListener> {
    let name = SocketAddr::from_abstract_name(format!("rdma-dissect/tcp-port/{port}")).ok()?;
    let claim = UnixListener::bind_addr(&name).ok()?;
    // The steps listen on 0.0.0.0 (rc_pingpong's AI_PASSIVE): the port must be free there.
    TcpListener::bind(("0.0.0.0", port)).ok()?;
    Some(claim)
}
