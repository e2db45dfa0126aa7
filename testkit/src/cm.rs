//! Step 10's address and redaction. rdma_cm speaks IP: both sides take the server's address
//! (`-a`), which must be the RDMA device's own, and a client that connects before the
//! server's id listens is rejected, not refused-and-retried, so the runner
//! ([`crate::runner`]) starts it only once the kernel lists a listening CM id on the port.
//! rping (Debian's `rdmacm-utils`) runs the same way.

use std::process::Command;

use rdma_dissect::role::Role;
use regex::Regex;

use super::redact::{apply, Pass};
use super::{device, redact, Device, Picks};

/// Debian's rping, the peer step 10 speaks to.
pub const RPING: &str = "rping";

/// The device's netdev address, which step 10 and rping take as `-a`: on RoCE the IPv4
/// address behind the chosen GID (`::ffff:a.b.c.d`, the RoCE v2 GID of an IPv4 address);
/// on iWARP, whose one GID comes from the MAC, the netdev's own.
pub fn cm_addr() -> String {
    addr_of(device())
}

/// `dev`'s address for rdma_cm (see [`cm_addr`]).
fn addr_of(dev: &Device) -> String {
    if let Some(addr) = &dev.netdev_addr {
        return addr.clone();
    }
    let gid = dev.gid().to_string();
    gid.strip_prefix("::ffff:")
        .unwrap_or_else(|| panic!("GID {gid} (RDMA_GID_INDEX) is not an IPv4 address's RoCE v2 GID: rdma_cm needs one"))
        .to_string()
}

/// True when a CM id listens on `addr:port` (`rdma resource show cm_id`: `state LISTEN …
/// src-addr ADDR:PORT`).
pub fn cm_listening(addr: &str, port: u16) -> bool {
    let Ok(out) = Command::new("rdma").args(["resource", "show", "cm_id"]).output() else { return false };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.contains("state LISTEN") && l.contains(&format!("src-addr {addr}:{port} ")))
}

/// [`redact`] for step 10, then [`redact_cm_values`].
pub fn redact_cm(text: &str, role: Option<Role>, run: &Picks, dev: &Device) -> String {
    redact_cm_values(&redact(text, role, run, dev), dev)
}

/// What only the CM shows, in a text [`redact`] has seen: the run's address and port
/// (`192.0.2.1:21000` → `[CM_ADDR]:[CM_PORT]`; any other IPv4 address keeps its address,
/// `127.0.0.1:[CM_PORT]`); what the kernel's CM chooses differently from one kernel to the
/// next (the [`RULES`](crate::RULES) of [`Pass::Cm`]: `timeout=[CM_TIMEOUT]`, and
/// `…|IBV_ACCESS_REMOTE_ATOMIC[|FLUSH]` at INIT); and the path MTU the CM took from the
/// netdev (`path_mtu=[ACTIVE_MTU]`, where stage 05's is the `-m` flag).
pub fn redact_cm_values(text: &str, dev: &Device) -> String {
    let own = addr_of(dev);
    let addr = Regex::new(r"\b(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})(:\d+)?\b").unwrap();
    let text = addr.replace_all(text, |c: &regex::Captures| {
        let ip = if c[1] == own { "[CM_ADDR]" } else { &c[1] };
        format!("{ip}{}", if c.get(2).is_some() { ":[CM_PORT]" } else { "" })
    });
    let text = apply(Pass::Cm, &text);
    let mtu = format!("path_mtu={}", dev.fact("active_mtu"));
    text.replace(&mtu, "path_mtu=[ACTIVE_MTU]")
}
