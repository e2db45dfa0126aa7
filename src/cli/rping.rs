//! Step 10's flags: `rping`'s, not rc_pingpong's (rdma-core's `librdmacm/examples/rping.c`).
//!
//! rping's `-c` is "client" and `-s` "server", where rc_pingpong's are "check" and "size";
//! its size is `-S`, its count `-C`, and the server's address is given with `-a` on both
//! sides. Step 10 speaks rping's protocol to rping, so it takes rping's flags, with its
//! defaults: port 7174, 64 bytes, and a count of 0 meaning "until interrupted". Not taken:
//! `-I` (a source address), `-P` (a server serving many clients, one thread each), `-q`
//! (a QP created and moved by hand: step 10 shows what the CM would set instead, see
//! [`crate::stages::rdma_cm`]) and `-d` (rping's debug prints: the trace is ours).

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::{ArgGroup, Args};

use super::values::parse_timeout;
use super::StepArgs;
use crate::role::Role;

/// rping's smallest `-S`: `RPING_MIN_BUFSIZE`, `sizeof(stringify(INT_MAX)) +
/// sizeof("rdma-ping-%d: ")`, which comes to 8 + 15 bytes: `INT_MAX` is not defined where
/// rping.c stringifies it, so it stays the word (Debian's rping refuses `-S 22` and takes
/// `-S 23`; its message says the range ends at 65536, its check at 65535).
pub const RPING_MIN_SIZE: u32 = 23;
/// rping's largest `-S`: `RPING_BUFSIZE - 1`.
pub const RPING_MAX_SIZE: u32 = 64 * 1024 - 1;

/// `rping`'s flags (step 10).
#[derive(Args, Debug, Clone, PartialEq, Eq)]
// One of -s and -c, and -a, are required — but not by `--break help`, which lists the
// cases without running one (step::Cli adds `--break`).
#[command(group(ArgGroup::new("role").args(["server", "client"])))]
pub struct RpingArgs {
    /// Server side: listen on -a's address and port, serve one client
    #[arg(short = 's')]
    pub server: bool,

    /// Client side: connect to the server at -a
    #[arg(short = 'c', required_unless_present_any = ["server", "break"])]
    pub client: bool,

    /// Address: the server's (on both sides). On RoCE, an address of the RDMA device's
    /// netdev (192.0.2.1 in the lab VM), not 127.0.0.1
    #[arg(short = 'a', value_name = "ADDR", required_unless_present = "break")]
    pub addr: Option<String>,

    /// Port (the server listens on it, the client connects to it)
    #[arg(short = 'p', value_name = "PORT", default_value = "7174", value_parser = parse_cm_port)]
    pub port: u16,

    /// Pings to do (client; the server serves until the client disconnects); 0 = forever
    #[arg(short = 'C', value_name = "COUNT", default_value = "0")]
    pub count: u32,

    /// Ping data size in bytes, the same on both sides
    #[arg(short = 'S', value_name = "SIZE", default_value = "64", value_parser = parse_ping_size)]
    pub size: u32,

    /// Print the ping data of every iteration (rping's `ping data: ...` lines)
    #[arg(short = 'v')]
    pub verbose: bool,

    /// Validate the ping data (client: what came back is what went out; server: what it
    /// read is rping's pattern)
    #[arg(short = 'V')]
    pub validate: bool,

    /// Seconds to wait for any one thing: a CM event, a completion. rping waits forever
    #[arg(long = "timeout", value_name = "SECONDS", default_value = "20", value_parser = parse_timeout)]
    pub timeout: Duration,
}

impl RpingArgs {
    /// `-s` makes the server; otherwise (`-c`) this is the client.
    pub fn role(&self) -> Role {
        if self.server {
            Role::Server
        } else {
            Role::Client
        }
    }

    /// `-a`/`-p` as a socket address (rping's `getaddrinfo`: a name or a numeric address).
    pub fn sockaddr(&self) -> crate::error::Result<SocketAddr> {
        let addr = self.addr.as_deref().unwrap_or_default();
        (addr, self.port).to_socket_addrs().ok().and_then(|mut addrs| addrs.next()).ok_or_else(|| {
            crate::error::Error::new(format!("resolving -a {addr}"))
                .cause("it is neither an IPv4/IPv6 address nor a name this machine resolves")
                .fix("give the server's IP address, e.g. -a 192.0.2.1 in the lab VM")
        })
    }
}

fn parse_cm_port(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(0) | Err(_) => {
            Err(format!("{s} is not a port the client can know: give 1..=65535 (rping's default is 7174)"))
        }
        Ok(p) => Ok(p),
    }
}

fn parse_ping_size(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|_| format!("{s} is not a size in bytes"))?;
    if !(RPING_MIN_SIZE..=RPING_MAX_SIZE).contains(&v) {
        return Err(format!(
            "rping's sizes are {RPING_MIN_SIZE} to {RPING_MAX_SIZE}: the data starts with \"rdma-ping-N: \" and \
             ends with a NUL, and rping's buffers are at most 64 KiB"
        ));
    }
    Ok(v)
}

impl StepArgs for RpingArgs {
    /// Why this footer: the address is the lesson's first trap (the CM finds the device by
    /// the IP address, and 127.0.0.1 belongs to no RDMA device), and rping is the peer.
    fn after_help(bin: &str) -> String {
        format!(
            "Both roles on one machine with Soft-RoCE (the lab VM: lab/run, or lab/shell):\n\
             \x20 server:  cargo run --bin {bin} -- -s -a 192.0.2.1\n\
             \x20 client:  cargo run --bin {bin} -- -c -a 192.0.2.1 -C 10 -V\n\
             -a is an address of the RDMA device's netdev (rdma link show; ip addr): the CM \
             resolves it to the device. 127.0.0.1 belongs to lo, which has no RDMA device.\n\
             Either side may be Debian's rping (package rdmacm-utils), with the same flags: \
             rping -s -a 192.0.2.1 / rping -c -a 192.0.2.1 -C 10 -V -v."
        )
    }
    fn peer_role(&self) -> Option<Role> {
        Some(self.role())
    }
}
