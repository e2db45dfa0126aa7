//! TCP ports no two tests share, in this process or any other.

use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Mutex;

/// The range every test's TCP ports come from (below Linux's ephemeral ports, 32768 and
/// up, and clear of rc_pingpong's default 18515 and of the ports `lab/bench` and
/// `lab/memcheck` start from). `cargo xtask run` without `--port` takes one from here too.
pub const TCP_PORTS: std::ops::Range<u16> = 21000..23000;

/// One TCP port no other test, in this process or any other, is using (see [`tcp_ports`]).
pub fn tcp_port() -> u16 {
    tcp_ports(1)
}

/// `n` consecutive TCP ports for this test process alone, kept until it exits or gives
/// them back ([`release`]).
///
/// A port is claimed by binding the abstract Unix socket `rdma-dissect/tcp-port/<port>`:
/// the kernel lets one socket at a time have a name, across every process of the machine
/// (or VM), and drops it when the process ends, however it ends — no lock files to go
/// stale. A claimed port must also be free for a TCP listener at the time. The search
/// starts after the ports this process claimed last, so a port given back is taken again
/// only once the range has come round: long after its connections' TIME_WAIT.
pub fn tcp_ports(n: u16) -> u16 {
    let mut claims = CLAIMS.lock().unwrap_or_else(|e| e.into_inner());
    let starts = TCP_PORTS.end - n - TCP_PORTS.start + 1;
    let next = NEXT.load(Ordering::SeqCst);
    'first: for i in 0..starts {
        let first = TCP_PORTS.start + (next + i) % starts;
        let mut held = Vec::new();
        for port in first..first + n {
            match claim(port) {
                Some(claim) => held.push((port, claim)),
                None => continue 'first,
            }
        }
        claims.extend(held);
        NEXT.store((first - TCP_PORTS.start + n) % starts, Ordering::SeqCst);
        return first;
    }
    panic!("no {n} free consecutive TCP ports left in {TCP_PORTS:?}");
}

/// Gives back this process's claim on `port` (its run has ended): a process that runs
/// more than the range holds (a class's grader, with a run per student and step) goes on.
pub fn release(port: u16) {
    CLAIMS.lock().unwrap_or_else(|e| e.into_inner()).retain(|(p, _)| *p != port);
}

/// The ports this process holds, and the socket that holds each.
static CLAIMS: Mutex<Vec<(u16, UnixListener)>> = Mutex::new(Vec::new());
/// Where the next search starts, from the range's start.
static NEXT: AtomicU16 = AtomicU16::new(0);

fn claim(port: u16) -> Option<UnixListener> {
    let name = SocketAddr::from_abstract_name(format!("rdma-dissect/tcp-port/{port}")).ok()?;
    let claim = UnixListener::bind_addr(&name).ok()?;
    // The steps listen on 0.0.0.0 (rc_pingpong's AI_PASSIVE): the port must be free there.
    TcpListener::bind(("0.0.0.0", port)).ok()?;
    Some(claim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_given_back_is_not_the_next_one_taken() {
        let first = tcp_port();
        release(first);
        assert_ne!(tcp_port(), first);
    }

    #[test]
    fn a_process_that_gives_its_ports_back_never_runs_out() {
        let len = usize::from(TCP_PORTS.end - TCP_PORTS.start);
        for _ in 0..len + 100 {
            release(tcp_port());
        }
    }
}
