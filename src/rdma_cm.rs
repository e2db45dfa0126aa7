//! The connection manager's events, outside the verbs: the endpoint they arrive on, waiting
//! for the next one with a deadline, tracing it, and explaining what went wrong — a reject
//! and its reason, an address that is not this machine's, the loopback route. What
//! [`crate::poll`] is for a CQ, this is for a CM event channel. Stage 10 uses it.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::trace;
use crate::verbs::rdma_cm::sys::{
    RDMA_CM_EVENT_CONNECT_REQUEST, RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_REJECTED,
};
use crate::verbs::{self, names, CmEvent, CmId, EventChannel, Qp};

/// An event channel and the id that connects; on the server, the listening id as well.
/// Fields drop in order: the connection's id, the listener, then the channel.
pub struct Endpoint {
    /// The connection's id: the client's own, or the server's child id of the request.
    pub id: Rc<CmId>,
    /// The server's listening id.
    pub listen: Option<Rc<CmId>>,
    /// Where the CM reports every event of both.
    pub channel: Rc<EventChannel>,
}

/// Traces the QP's state as the device reports it: the CM moves it without telling us.
pub fn trace_state(qp: &Qp, when: &str) -> Result<()> {
    let state = qp.query(verbs::IBV_QP_STATE)?.qp_state;
    trace::event("ibv_query_qp")
        .kv("qp_state", format!("IBV_QPS_{}", names::state_name(state)))
        .kv("when", when)
        .emit();
    Ok(())
}

impl Endpoint {
    /// The ids an event may be about.
    pub fn ids(&self) -> Vec<&CmId> {
        [Some(&self.id), self.listen.as_ref()].into_iter().flatten().map(|id| &**id).collect()
    }
}

/// Traces a CM event: which id, which event, its status; for a connection request (the
/// client's offer) and the client's ESTABLISHED (the server's answer, from its
/// ConnectReply), the READs each side will take.
pub fn trace_event(ep: &Endpoint, event: &CmEvent) {
    let mut line =
        trace::event("rdma_get_cm_event").kv("id", event.id).kv("event", &event.name).kv("status", event.status);
    let client = ep.listen.is_none();
    if event.kind == RDMA_CM_EVENT_CONNECT_REQUEST || (client && event.kind == RDMA_CM_EVENT_ESTABLISHED) {
        line = line
            .kv("responder_resources", event.conn.responder_resources)
            .kv("initiator_depth", event.conn.initiator_depth);
    }
    line.emit();
}

/// Waits at most `timeout` for the next CM event, which must be `want`.
pub fn await_event(ep: &Endpoint, want: u32, timeout: Duration) -> Result<CmEvent> {
    if !ep.channel.ready(timeout)? {
        return Err(Error::new("rdma_get_cm_event")
            .cause(format!(
                "no CM event within {} s (waiting for {})",
                timeout.as_secs(),
                verbs::rdma_cm::event_name(want)
            ))
            .fix("start the other side (the server first); check -a and -p on both"));
    }
    let event = ep.channel.get_event(&ep.ids())?;
    trace_event(ep, &event);
    if event.kind != want {
        return Err(unexpected(&event, &verbs::rdma_cm::event_name(want)));
    }
    Ok(event)
}

/// An event other than the one awaited, explained.
pub fn unexpected(event: &CmEvent, wanted: &str) -> Error {
    let err =
        Error::new(format!("rdma_get_cm_event: {} (status {}) while waiting for {wanted}", event.name, event.status));
    match event.kind {
        RDMA_CM_EVENT_REJECTED => {
            let reason = reject_reason(event.status);
            err.cause(format!(
                "the peer's CM rejected the connection request, reason {} ({reason}): {}",
                event.status,
                if event.status == 8 {
                    "no one listens on that address and port (an InfiniBand CM names a listener by \
                     service ID, made of the port space and port: none matched)"
                } else {
                    "see the reason"
                }
            ))
            .fix("start the server first, on the same -a and -p")
        }
        RDMA_CM_EVENT_DISCONNECTED => err.cause("the peer disconnected").fix("read the peer's output"),
        _ => err.cause("see the status: a negative errno or the transport's reason"),
    }
}

/// The InfiniBand CM's reject reasons (IBTA vol. 1, table "REJ reason codes") a student
/// meets; a RoCE CM uses the same table.
fn reject_reason(status: i32) -> &'static str {
    match status {
        1 => "no QP",
        2 => "no EE context",
        3 => "no resources",
        4 => "timeout",
        5 => "unsupported request",
        6 => "invalid communication ID",
        7 => "invalid communication instance",
        8 => "invalid service ID",
        9 => "invalid transport type",
        10 => "stale connection",
        28 => "consumer-defined reject",
        _ => "see the REJ reason codes",
    }
}

/// `rdma_bind_addr`'s failures, explained.
pub fn explain_bind(err: Error, addr: SocketAddr) -> Error {
    match err.errno() {
        Some(libc::EADDRINUSE) => err
            .cause(format!("another CM id listens on port {} already (an rping -s, a server of ours)", addr.port()))
            .fix("stop it, or pick another -p on both sides"),
        Some(libc::EADDRNOTAVAIL) => err
            .cause(format!("no netdev of this machine has the address {}", addr.ip()))
            .fix("give the address of the RDMA device's netdev (rdma link show; ip -br addr): 192.0.2.1 in the lab VM"),
        Some(libc::ENODEV) => err
            .cause(format!("{} is the address of a netdev that no RDMA device sits on", addr.ip()))
            .fix("give the address of the RDMA device's netdev (rdma link show; ip -br addr): 192.0.2.1 in the lab VM"),
        _ => err,
    }
}

/// `rdma_resolve_route`'s failures, explained: the loopback pitfall first.
pub fn explain_route(err: Error, addr: SocketAddr) -> Error {
    if err.errno() == Some(libc::ENODEV) && addr.ip().is_loopback() {
        return err
            .cause(format!(
                "{} is the loopback address: the CM resolves it (it binds a loopback address to a local \
                 device), but on RoCE a route must leave through the netdev the RDMA device sits on, and \
                 the loopback route goes through `lo`, which carries none",
                addr.ip()
            ))
            .fix("use the address of the RDMA device's netdev, on both sides: -a 192.0.2.1 in the lab VM");
    }
    err
}
