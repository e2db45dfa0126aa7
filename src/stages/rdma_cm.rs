//! Stage 10: connect with the connection manager, and RDMA READ — `rping` taken apart.
//!
//! C reference: none in `rc_pingpong.c`, which connects by hand. The program is rdma-core's
//! `librdmacm/examples/rping.c` (Debian's `rping`, package `rdmacm-utils`):
//! `rping_bind_server` / `rping_bind_client` and `rping_cma_event_handler` (the CM), the
//! `cm_id->verbs` and `rdma_create_qp` of `rping_setup_qp`, `rping_accept` /
//! `rping_connect_client`, the RDMA READ of `rping_test_server`, and `rping_disconnect`.
//! The rest of rping, its buffers and its ping loop, is [`crate::rping`]; its PD, CQ and
//! QP are stages 02 and 04's, its SENDs and receive stage 07's.
//!
//! **What the CM does.** Stages 05 and 06 needed a TCP socket to swap QP numbers, PSNs and
//! GIDs, and three `ibv_modify_qp` calls whose attributes we chose. With rdma_cm, the IP
//! address is the only thing a program names: `rdma_resolve_addr` finds the device and port
//! whose netdev reaches it (and the GID for it), `rdma_resolve_route` the path (on RoCE: the
//! neighbour's MAC, the path MTU of the netdev), and `rdma_connect` sends a *ConnectRequest*
//! — a management datagram to the peer's QP1, carrying our QPN, starting PSN, and how many
//! RDMA READs we accept and issue at once. The server's `rdma_accept` answers with a
//! *ConnectReply*; the client's library moves its QP to RTR and RTS and sends *ReadyToUse*.
//! The QP transitions are librdmacm's, in user space, with the attributes `rdma_init_qp_attr`
//! returns: [`show_cm_transitions`] prints them next to the masks stages 04–06 set by hand.
//!
//! **Why iWARP needs it.** On iWARP the connection is a TCP connection, set up by the
//! kernel's iWARP CM, which hands the QP its socket: there is no RTR a program could reach
//! with its own `ibv_modify_qp`. RoCE and InfiniBand let a program connect by hand; iWARP
//! does not, so portable programs use rdma_cm.
//!
//! **RDMA READ.** The server reads the client's buffer: one-sided, like 09's WRITE, but the
//! data flows to the *initiator*. A READ needs the target's MR registered with
//! `IBV_ACCESS_REMOTE_READ`, and *responder resources* at the target (`max_dest_rd_atomic`,
//! which the CM sets from `responder_resources`) and initiator depth at the reader
//! (`max_rd_atomic`, from `initiator_depth`): READs in flight take an entry each, because the
//! responder must remember every one until its response has been acknowledged.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::poll::{wait_spinning, Awaited::Send};
use crate::rdma_cm::{await_event, explain_bind, explain_route, trace_state, Endpoint};
use crate::stages::create_qp::{Queues, INIT_MASK};
use crate::stages::modify_qp_rtr::RTR_MASK;
use crate::stages::modify_qp_rts::RTS_MASK;
use crate::trace::{self, Hex64, Key};
use crate::verbs::rdma_cm::sys::{
    RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_CONNECT_REQUEST, RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_ESTABLISHED,
    RDMA_CM_EVENT_ROUTE_RESOLVED,
};
use crate::verbs::{
    ibv_qp_attr_mask, ibv_qp_init_attr, ibv_send_wr, ibv_send_wr_rdma, ibv_send_wr_wr, ibv_sge, names, rdma_conn_param,
    CmId, Context, Cq, EventChannel, Mr, Pd, Qp, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_MAX_QP_RD_ATOMIC,
    IBV_SEND_SIGNALED, IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE,
};
use crate::wire::rping::RpingInfo;

/// rping's timeout for address and route resolution, in milliseconds.
pub const RESOLVE_TIMEOUT_MS: i32 = 2000;
/// rping's listen backlog.
pub const BACKLOG: i32 = 3;
/// `wr_id` of the server's RDMA READ.
pub const READ_WRID: u64 = 3;
/// `wr_id` of the server's RDMA WRITE.
pub const WRITE_WRID: u64 = 4;

// ANCHOR: stage
/// Server: an event channel, an id bound to `addr` and listening, then the first
/// connection request, whose new id ("child") the connection will use.
/// (`rping_bind_server`, then the CONNECT_REQUEST case of `rping_cma_event_handler`.)
pub fn listen(addr: SocketAddr, timeout: Duration) -> Result<Endpoint> {
    let channel = EventChannel::create()?;
    let listen = CmId::create(&channel, "listen")?;
    listen.bind_addr(addr).map_err(|e| explain_bind(e, addr))?;
    trace::event("rdma_bind_addr").kv("id", listen.name()).kv("addr", addr).emit();
    // ANCHOR: hole_cm_listen HOLE: listen for connection requests on the bound id, with rping's backlog (rdma_listen)
    listen.listen(BACKLOG)?;
    // ANCHOR_END: hole_cm_listen
    trace::event("rdma_listen").kv("id", listen.name()).kv("backlog", BACKLOG).emit();
    let mut ep = Endpoint { id: Rc::clone(&listen), listen: Some(listen), channel };
    let request = await_event(&ep, RDMA_CM_EVENT_CONNECT_REQUEST, timeout)?;
    ep.id = request.new_id.ok_or_else(|| Error::new("rdma_get_cm_event").cause("a CONNECT_REQUEST without an id"))?;
    Ok(ep)
}

/// Client: an event channel, an id, and `addr` resolved to a device and a route.
/// (`rping_bind_client`, and the ADDR_RESOLVED case of `rping_cma_event_handler`.)
pub fn resolve(addr: SocketAddr, timeout: Duration) -> Result<Endpoint> {
    let channel = EventChannel::create()?;
    let id = CmId::create(&channel, "client")?;
    let ep = Endpoint { id, listen: None, channel };
    ep.id.resolve_addr(addr, RESOLVE_TIMEOUT_MS)?;
    trace::event("rdma_resolve_addr")
        .kv("id", ep.id.name())
        .kv("dst", addr)
        .kv("timeout_ms", RESOLVE_TIMEOUT_MS)
        .emit();
    await_event(&ep, RDMA_CM_EVENT_ADDR_RESOLVED, timeout)?;
    // ANCHOR: hole_resolve_route HOLE: the address is resolved: now resolve the route to it, with rping's timeout (rdma_resolve_route; explain_route explains a failure)
    ep.id.resolve_route(RESOLVE_TIMEOUT_MS).map_err(|e| explain_route(e, addr))?;
    // ANCHOR_END: hole_resolve_route
    trace::event("rdma_resolve_route").kv("id", ep.id.name()).kv("timeout_ms", RESOLVE_TIMEOUT_MS).emit();
    await_event(&ep, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout)?;
    Ok(ep)
}

/// The device the CM bound `ep.id` to (`cm_id->verbs`), which librdmacm opened: rping
/// creates every verbs object of the connection on it. Its link is watched from here on,
/// as stage 01 watches the device it opens, so that a failed completion is explained by
/// what happened to the link.
pub fn cm_verbs(ep: &Endpoint) -> Result<Rc<Context>> {
    let ctx = Context::of_cm_id(&ep.id)?;
    let port_num = ep.id.port_num();
    trace::event("cm_id->verbs").kv("id", ep.id.name()).kv("device", ctx.name()).kv("port_num", port_num).emit();
    // Not a verb (src/link.rs). The CM gives our GID, not its index, which is what names
    // the port's interface in sysfs: the index is looked up there.
    crate::link::watch(ctx.name(), port_num, crate::link::gid_index(ctx.name(), port_num, ep.id.sgid()));
    Ok(ctx)
}

// ANCHOR: create_qp
/// Stage 04's QP creator for the connection: `rdma_create_qp` on `id` creates the QP on
/// the id's device and moves it to INIT itself, with the attributes `rdma_init_qp_attr`
/// gives ([`show_cm_transitions`] prints them).
pub fn cm_create_qp(id: &Rc<CmId>) -> impl FnOnce(&Rc<Pd>, &Rc<Cq>, ibv_qp_init_attr) -> Result<Qp> + '_ {
    move |pd, cq, init_attr| {
        // ANCHOR: hole_cm_create_qp HOLE(Qp): let the CM create the QP on the id, in the PD, with init_attr (rdma_create_qp: `Qp` in src/verbs/qp.rs)
        let qp = Qp::create_cm(id, pd, cq, init_attr)?;
        // ANCHOR_END: hole_cm_create_qp
        trace_state(&qp, "after rdma_create_qp")?;
        Ok(qp)
    }
}
// ANCHOR_END: create_qp

/// rping's connection parameters (`rping_init_conn_param`): one READ in flight each way,
/// and the largest retry counts.
pub fn rping_conn_param() -> rdma_conn_param {
    rdma_conn_param {
        private_data: std::ptr::null(),
        private_data_len: 0,
        responder_resources: 1,
        initiator_depth: 1,
        flow_control: 0,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: 0,
        qp_num: 0,
    }
}

// ANCHOR: connect
/// Client: `rdma_connect` with `param`, then ESTABLISHED: by then librdmacm has moved the
/// QP to RTR and RTS on the ConnectReply and sent ReadyToUse (`rping_connect_client`).
pub fn connect(ep: &Endpoint, qp: &Qp, param: &rdma_conn_param, timeout: Duration) -> Result<()> {
    trace::event("rdma_connect")
        .kv("id", ep.id.name())
        .kv("responder_resources", param.responder_resources)
        .kv("initiator_depth", param.initiator_depth)
        .kv("retry_count", param.retry_count)
        .kv("rnr_retry_count", param.rnr_retry_count)
        .emit();
    ep.id.connect(param)?;
    await_event(ep, RDMA_CM_EVENT_ESTABLISHED, timeout)?;
    trace_state(qp, "after ESTABLISHED")
}

/// Server: `rdma_accept(id, NULL)` — librdmacm moves the QP to RTR and RTS *before* it
/// sends the ConnectReply — then ESTABLISHED, when the client's ReadyToUse arrives
/// (`rping_accept`).
pub fn accept(ep: &Endpoint, qp: &Qp, timeout: Duration) -> Result<()> {
    ep.id.accept()?;
    trace::event("rdma_accept").kv("id", ep.id.name()).kv("conn_param", "NULL").emit();
    trace_state(qp, "after rdma_accept")?;
    await_event(ep, RDMA_CM_EVENT_ESTABLISHED, timeout)?;
    Ok(())
}
// ANCHOR_END: connect

// ANCHOR: transitions
/// What the CM did to the QP: for INIT, RTR and RTS, the attributes and mask
/// `rdma_init_qp_attr` gives (those librdmacm passed to `ibv_modify_qp`, but for
/// `max_dest_rd_atomic` and `max_rd_atomic`, which it sets from the negotiated responder
/// resources and initiator depth), each mask compared with the one stages 04–06 set.
pub fn show_cm_transitions(id: &CmId) -> Result<()> {
    for (state, ours, stage) in
        [(IBV_QPS_INIT, INIT_MASK, "04"), (IBV_QPS_RTR, RTR_MASK, "05"), (IBV_QPS_RTS, RTS_MASK, "06")]
    {
        let (attr, mask) = id.init_qp_attr(state)?;
        trace::event("rdma_init_qp_attr")
            .kv("id", id.name())
            .kv("qp_state", format!("IBV_QPS_{}", names::state_name(state)))
            .emit();
        for (flag, fields) in names::mask_fields(&attr, mask) {
            let mut line = trace::detail(flag);
            for (key, value) in fields {
                line = line.kv(key, value);
            }
            line.emit();
        }
        let flags = |m: u32| -> String {
            let names: Vec<&str> = names::mask_fields(&attr, ibv_qp_attr_mask(m)).into_iter().map(|(f, _)| f).collect();
            if names.is_empty() {
                "none".into()
            } else {
                names.join("|")
            }
        };
        trace::detail(&format!("vs stage {stage}"))
            .kv("cm_only", flags(mask.0 & !ours.0))
            .kv("stage_only", flags(ours.0 & !mask.0))
            .emit();
    }
    Ok(())
}
// ANCHOR_END: transitions

// ANCHOR: read
/// Server: reads the client's whole source buffer `source` into `mr` (rping's `rdma_buf`)
/// with an RDMA READ, and waits for it: the one-sided operation this stage adds.
pub fn read_source(q: &Queues, mr: &Mr, source: RpingInfo, timeout: Duration) -> Result<()> {
    // ANCHOR: hole_rdma_read HOLE: read the client's whole source buffer (`source`) into ours: an RDMA READ with its wr_id, and wait for it (rdma)
    rdma(q, mr, IBV_WR_RDMA_READ, READ_WRID, source, source.size, timeout)?;
    // ANCHOR_END: hole_rdma_read
    Ok(())
}

/// Server: writes the first `len` bytes of `mr` into the client's sink buffer `sink` with
/// an RDMA WRITE (stage 09's operation, as rping posts it), and waits for it.
pub fn write_sink(q: &Queues, mr: &Mr, sink: RpingInfo, len: u32, timeout: Duration) -> Result<()> {
    rdma(q, mr, IBV_WR_RDMA_WRITE, WRITE_WRID, sink, len, timeout)
}

/// An RDMA READ from (or WRITE to) the client's buffer `info`, of `len` bytes of `mr`, and
/// its completion.
fn rdma(q: &Queues, mr: &Mr, opcode: u32, wr_id: u64, info: RpingInfo, len: u32, timeout: Duration) -> Result<()> {
    if len as usize > mr.len() {
        return Err(Error::new("the client's ping")
            .cause(format!(
                "the client's buffer is {len} bytes, ours {}: rping reads the client's whole buffer into its own",
                mr.len()
            ))
            .fix("give both sides the same -S"));
    }
    let list = ibv_sge { addr: mr.addr(), length: len, lkey: mr.lkey() };
    let mut wr = ibv_send_wr {
        wr_id,
        opcode,
        send_flags: IBV_SEND_SIGNALED.0,
        wr: ibv_send_wr_wr { rdma: ibv_send_wr_rdma { remote_addr: info.addr, rkey: info.rkey } },
        ..Default::default()
    };
    q.qp.post_send(&mut wr, &[list], mr)?;
    let read = opcode == IBV_WR_RDMA_READ;
    trace::event("ibv_post_send")
        .kv("wr_id", wr_id)
        .kv("opcode", if read { "IBV_WR_RDMA_READ" } else { "IBV_WR_RDMA_WRITE" })
        .kv("sge.length", len)
        .kv("wr.rdma.remote_addr", Hex64(info.addr))
        .kv("wr.rdma.rkey", Key(info.rkey))
        .emit();
    wait_spinning(&q.cq, &[Send(wr_id)], timeout).map_err(|err| match q.qp.query(IBV_QP_MAX_QP_RD_ATOMIC) {
        // A READ that never completes on a QP that may have none in flight was never sent.
        Ok(attr) if read && err.errno().is_none() && attr.max_rd_atomic == 0 => Error::new("RDMA READ")
            .cause(
                "this QP's max_rd_atomic is 0: it may have no RDMA READ in flight, so this READ is never \
             sent (rxe keeps it in the send queue, waiting for a slot). The CM set 0 from \
             the initiator depth of the connection: the client offered no responder resources",
            )
            .fix("connect with responder_resources ≥ 1 on the side that is read from (rping: 1)"),
        _ => err,
    })
}
// ANCHOR_END: read

// ANCHOR: disconnect
/// `rdma_disconnect`: librdmacm moves the QP to ERR (the posted receive is flushed) and the
/// CM sends a DisconnectRequest. The side that disconnects first then waits for its
/// DISCONNECTED event (the peer's DisconnectReply); the other got it already.
pub fn disconnect(ep: &Endpoint, qp: &Qp, first: bool, timeout: Duration) -> Result<()> {
    ep.id.disconnect()?;
    trace::event("rdma_disconnect").kv("id", ep.id.name()).emit();
    trace_state(qp, "after rdma_disconnect")?;
    if first {
        await_event(ep, RDMA_CM_EVENT_DISCONNECTED, timeout)?;
    }
    Ok(())
}
// ANCHOR_END: disconnect
// ANCHOR_END: stage
