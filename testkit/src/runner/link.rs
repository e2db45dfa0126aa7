//! The link of two runners across hosts ([`super::Run::across`]): how the client's runner
//! learns that the server on the other host is ready, and each that the other has ended.

use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::watch::Proc;

/// The TCP port of the two runners' own connection in a run across hosts: the one after the
/// run's port. The server's runner accepts it once its server is ready; the client's runner starts
/// its client once connected; each closes it when its process has ended, which the other
/// watches. (Probing the server's own port would take the one connection it accepts.)
pub fn peer_link_port(port: u16) -> Result<u16, String> {
    port.checked_add(1).ok_or_else(|| format!("port {port}: the runners' link needs the port after it"))
}

/// The server's runner's side of the peer link, listening once its server is ready.
pub(super) fn link_listener(port: u16) -> Result<TcpListener, String> {
    let listener =
        TcpListener::bind(("0.0.0.0", port)).map_err(|e| format!("the runners' link on port {port}: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| format!("the runners' link on port {port}: {e}"))?;
    Ok(listener)
}

/// Accepts the client's runner, once the server is ready: None when the deadline passes or
/// the server exits first (then there is nobody to link to, and the run ends as the
/// server does).
pub(super) fn accept_link(listener: &TcpListener, server: &mut Proc, deadline: Instant) -> Option<TcpStream> {
    loop {
        match listener.accept() {
            Ok((stream, _)) => return stream.set_nonblocking(false).is_ok().then_some(stream),
            Err(_) if Instant::now() < deadline && server.child.try_wait().ok().flatten().is_none() => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(_) => return None,
        }
    }
}

/// The client's runner's side of the peer link: connects to the server's runner, retrying
/// until the deadline (it accepts only once its server is ready).
pub(super) fn link_to(host: &str, port: u16, deadline: Instant) -> Result<TcpStream, String> {
    let addrs: Vec<_> = (host, port).to_socket_addrs().map_err(|e| format!("{host}: {e}"))?.collect();
    loop {
        match addrs.iter().find_map(|a| TcpStream::connect_timeout(a, Duration::from_secs(1)).ok()) {
            Some(stream) => return Ok(stream),
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            None => return Err(format!("the server's runner on {host} never said its server was ready (port {port})")),
        }
    }
}
