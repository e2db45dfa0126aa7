//! Stage 10: connect with the connection manager, and RDMA READ — `rping` taken apart.
//!
//! C reference: none in `rc_pingpong.c`, which connects by hand. The program is rdma-core's
//! `librdmacm/examples/rping.c` (Debian's `rping`, package `rdmacm-utils`):
//! `rping_bind_server` / `rping_bind_client` and `rping_cma_event_handler` (the CM),
//! `rping_setup_qp` and `rping_setup_buffers` (the verbs objects), `rping_accept` /
//! `rping_connect_client`, `rping_test_server` / `rping_test_client` (the ping loop),
//! `rping_disconnect` and `rping_free_*` (teardown). Step 10 speaks its protocol, so either
//! side may be `rping`.
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
//!
//! **The ping.** Each iteration: the client SENDs `{addr, rkey, size}` of its source buffer
//! (16 bytes, big-endian: [`RpingInfo`]); the server RDMA READs that buffer and SENDs a
//! "go ahead"; the client SENDs `{addr, rkey, size}` of its sink buffer; the server RDMA
//! WRITEs what it read into it and SENDs "go ahead" again. With `-V` the client compares
//! sink and source.

use std::ffi::CStr;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::cm::{await_event, explain_bind, explain_route, trace_event, trace_state, unexpected, Endpoint};
use crate::error::{Error, Result};
use crate::poll::{
    check_wcs, trace_wc, wait_spinning,
    Awaited::{Recv, Send},
    Backoff,
};
use crate::rping::{c_string, ping_data, RpingInfo};
use crate::stages::create_qp::INIT_MASK;
use crate::stages::create_qp::{QpOptions, Queues};
use crate::stages::modify_qp_rtr::RTR_MASK;
use crate::stages::modify_qp_rts::RTS_MASK;
use crate::stages::post_send::{post_recv, post_send, PINGPONG_RECV_WRID, PINGPONG_SEND_WRID};
use crate::stages::reg_mr::reg_mr;
use crate::trace::{self, Hex64, Key};
use crate::verbs::cm::sys::{
    RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_CONNECT_REQUEST, RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_ESTABLISHED,
    RDMA_CM_EVENT_ROUTE_RESOLVED,
};
use crate::verbs::{
    self, ibv_access_flags, ibv_qp_attr_mask, ibv_qp_init_attr, ibv_send_wr, ibv_send_wr_rdma, ibv_send_wr_wr, ibv_sge,
    ibv_wc, names, rdma_conn_param, CmEvent, CmId, Context, Cq, EventChannel, Mr, Pd, Qp, IBV_ACCESS_LOCAL_WRITE,
    IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_WRITE, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_MAX_QP_RD_ATOMIC,
    IBV_SEND_SIGNALED, IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE,
};
use ibverbs_sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR;

/// The length of every SEND and receive of rping: one [`RpingInfo`].
const INFO_LEN: u32 = RpingInfo::LEN as u32;
/// rping's send queue depth (`RPING_SQ_DEPTH`); its CQ has twice as many entries.
pub const RPING_SQ_DEPTH: u32 = 16;
/// rping's timeout for address and route resolution, in milliseconds.
pub const RESOLVE_TIMEOUT_MS: i32 = 2000;
/// rping's listen backlog.
pub const BACKLOG: i32 = 3;
/// rping's access to its RDMA buffers (`rdma_buf`, and the client's `start_buf`): the
/// peer reads them and writes them, and the device writes them for the READ's response.
pub const RPING_ACCESS: ibv_access_flags =
    ibv_access_flags(IBV_ACCESS_LOCAL_WRITE.0 | IBV_ACCESS_REMOTE_READ.0 | IBV_ACCESS_REMOTE_WRITE.0);
// The SENDs of an [`RpingInfo`] or a "go ahead" and the one receive rping keeps posted are
// stage 07's, with its wr_ids: a wr_id means the same in every step's trace.
/// `wr_id` of the server's RDMA READ.
pub const READ_WRID: u64 = 3;
/// `wr_id` of the server's RDMA WRITE.
pub const WRITE_WRID: u64 = 4;

/// rping's control block (`struct rping_cb`) without the CM: stage 04's queues and rping's
/// four buffers. The queues come first, so the QP is destroyed before the buffers are
/// deregistered, as stage 04's steps do.
pub struct RpingCb {
    /// The QP, created and moved by the CM, and its one CQ (rping's, without its completion
    /// channel: we poll).
    pub q: Queues,
    /// Where each [`RpingInfo`] (or "go ahead") lands: `recv_buf`.
    pub recv: Mr,
    /// What each SEND carries: `send_buf` (no access: only the local HCA reads it).
    pub send: Mr,
    /// The server's READ target and WRITE source; the client's sink: `rdma_buf`.
    pub rdma: Mr,
    /// The client's source, which the server reads: `start_buf`.
    pub start: Option<Mr>,
}

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
    // Not a verb (src/link.rs): the CM names our GID, the link its index.
    crate::link::watch(ctx.name(), port_num, crate::link::gid_index(ctx.name(), port_num, ep.id.sgid()));
    Ok(ctx)
}

/// rping's queues (`rping_setup_qp`): `RPING_SQ_DEPTH` sends, two receives, a CQ with
/// room for twice as many completions as sends, no completion channel.
pub fn rping_qp() -> QpOptions {
    QpOptions {
        rx_depth: 2,
        tx_depth: RPING_SQ_DEPTH,
        cqe: RPING_SQ_DEPTH * 2,
        size: RpingInfo::LEN as u32,
        use_event: false,
        access: ibv_access_flags(0),
    }
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

impl RpingCb {
    /// rping's buffers in `pd` (`rping_setup_buffers`) beside the queues `q`, and the first
    /// receive posted. The client registers its source buffer with `start_access`: rping's
    /// is [`RPING_ACCESS`].
    pub fn setup(q: Queues, pd: &Rc<Pd>, size: u32, start_access: Option<ibv_access_flags>) -> Result<RpingCb> {
        let recv = reg_mr(pd, RpingInfo::LEN, IBV_ACCESS_LOCAL_WRITE)?;
        let send = reg_mr(pd, RpingInfo::LEN, ibv_access_flags(0))?;
        let rdma = reg_mr(pd, size as usize, RPING_ACCESS)?;
        let start = start_access.map(|access| reg_mr(pd, size as usize, access)).transpose()?;
        post_recv(&q.qp, &recv, INFO_LEN, 1)?;
        Ok(RpingCb { q, recv, send, rdma, start })
    }
}

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

/// What a ping loop did, for the closing line.
pub struct Pings {
    /// Iterations completed.
    pub count: u32,
    /// How long they took.
    pub elapsed: Duration,
}

/// How a side runs the loop: `-C`, `-S`, `-v`, `-V` and `--timeout`.
#[derive(Debug, Clone, Copy)]
pub struct PingOptions {
    /// Pings to do (client); 0 for no end. The server, like rping's, pings until the
    /// client disconnects, and only says so when that came before this count.
    pub count: u32,
    /// Bytes per ping.
    pub size: u32,
    /// Print each ping's data.
    pub verbose: bool,
    /// Check each ping's data.
    pub validate: bool,
    /// The longest wait for any one completion or event.
    pub timeout: Duration,
}

// ANCHOR: client
/// Client: `count` pings (`rping_test_client`). The first is traced, the rest are not.
pub fn ping_client(cb: &mut RpingCb, opts: PingOptions) -> Result<Pings> {
    let start_time = Instant::now();
    let mut mute = None;
    let mut ping = 0;
    while opts.count == 0 || ping < opts.count {
        let data = ping_data(ping, opts.size as usize);
        let start =
            cb.start.as_mut().ok_or_else(|| Error::new("ping_client").cause("the client has no start buffer"))?;
        start.write(0, &data);
        let source = RpingInfo { addr: start.addr(), rkey: start.rkey(), size: opts.size };
        send_info(cb, source, opts.timeout)?;
        let sink = RpingInfo { addr: cb.rdma.addr(), rkey: cb.rdma.rkey(), size: opts.size };
        send_info(cb, sink, opts.timeout)?;
        // Only -V and -v look at what came back: rping's memcmp and printf.
        if opts.validate || opts.verbose {
            let back = cb.rdma.read(0, opts.size as usize);
            if opts.validate && back != data {
                return Err(Error::new(format!("validating ping {ping}"))
                    .cause("what the server wrote back differs from what it read: data mismatch (rping's words)"));
            }
            if opts.verbose {
                println!("ping data: {}", c_string(&back));
            }
        }
        ping += 1;
        mute.get_or_insert_with(trace::mute);
    }
    drop(mute);
    Ok(Pings { count: ping, elapsed: start_time.elapsed() })
}

/// Client: SENDs `info`, then waits for the SEND to complete and the server's "go ahead".
fn send_info(cb: &mut RpingCb, info: RpingInfo, timeout: Duration) -> Result<()> {
    cb.send.write(0, &info.to_bytes());
    trace::event("rping_info").kv("addr", Hex64(info.addr)).kv("rkey", Key(info.rkey)).kv("size", info.size).emit();
    post_send(&cb.q.qp, &cb.send, INFO_LEN, IBV_SEND_SIGNALED)?;
    wait_spinning(&cb.q.cq, &[Send(PINGPONG_SEND_WRID), Recv(PINGPONG_RECV_WRID)], timeout)?;
    post_recv(&cb.q.qp, &cb.recv, INFO_LEN, 1)
}
// ANCHOR_END: client

// ANCHOR: server
/// Server: serves pings until the client disconnects (`rping_test_server`).
pub fn ping_server(ep: &Endpoint, cb: &mut RpingCb, opts: PingOptions) -> Result<Pings> {
    let start_time = Instant::now();
    let mut mute = None;
    let mut ping = 0;
    loop {
        // From the second ping on, the last "go ahead" of the one before is in flight.
        let source = match await_info(ep, cb, ping > 0, 2 * u64::from(ping), opts.timeout)? {
            Ok(info) => info,
            Err(end) => {
                // The loop's trace is muted after the first ping; the end is not.
                drop(mute.take());
                if let Some(wr_id) = end.flushed {
                    trace::line(format_args!(
                        "wr_id {wr_id} flushed, then DISCONNECTED: the client ended the connection \
                         (on iWARP its close flushes our receive before the CM reports it)"
                    ));
                }
                trace_event(ep, &end.event);
                if ping < opts.count {
                    // The CM reports that the connection ended, never why: a client that
                    // asked for fewer pings, quit or was killed (the kernel then sends the
                    // DREQ for it) all end as this one DISCONNECTED event.
                    trace::line(format_args!(
                        "the client disconnected after {ping} of the {} pings asked (-C): \
                         the CM does not say why a connection ends",
                        opts.count
                    ));
                }
                break;
            }
        };
        // ANCHOR: hole_rdma_read HOLE: read the client's whole source buffer (`source`) into ours: an RDMA READ with its wr_id, and wait for it (rdma)
        rdma(cb, IBV_WR_RDMA_READ, READ_WRID, source, source.size, opts.timeout)?;
        // ANCHOR_END: hole_rdma_read
        let read = cb.rdma.read(0, source.size as usize);
        if opts.validate && read != ping_data(ping, source.size as usize) {
            return Err(Error::new(format!("validating ping {ping}"))
                .cause("what the RDMA READ brought is not rping's ping data for this iteration"));
        }
        if opts.verbose {
            println!("server ping data: {}", c_string(&read));
        }
        post_send(&cb.q.qp, &cb.send, INFO_LEN, IBV_SEND_SIGNALED)?;
        let sink = await_info(ep, cb, true, 2 * u64::from(ping) + 1, opts.timeout)?
            .map_err(|end| unexpected(&end.event, "the client's sink buffer"))?;
        // rping writes the string it read, up to its NUL: strlen + 1 bytes. (CStr looks for
        // the NUL a word at a time, as strlen does, not byte by byte.)
        let len = CStr::from_bytes_until_nul(&read).map_or(read.len(), |s| s.to_bytes_with_nul().len()) as u32;
        rdma(cb, IBV_WR_RDMA_WRITE, WRITE_WRID, sink, len, opts.timeout)?;
        post_send(&cb.q.qp, &cb.send, INFO_LEN, IBV_SEND_SIGNALED)?;
        ping += 1;
        mute.get_or_insert_with(trace::mute);
    }
    drop(mute);
    Ok(Pings { count: ping, elapsed: start_time.elapsed() })
}

/// Server: an RDMA READ from (or WRITE to) the client's buffer `info`, of `len` bytes of
/// our `rdma_buf`, and its completion.
fn rdma(cb: &RpingCb, opcode: u32, wr_id: u64, info: RpingInfo, len: u32, timeout: Duration) -> Result<()> {
    if len as usize > cb.rdma.len() {
        return Err(Error::new("the client's ping")
            .cause(format!(
                "the client's buffer is {len} bytes, ours {}: rping reads the client's whole buffer into its own",
                cb.rdma.len()
            ))
            .fix("give both sides the same -S"));
    }
    let list = ibv_sge { addr: cb.rdma.addr(), length: len, lkey: cb.rdma.lkey() };
    let mut wr = ibv_send_wr {
        wr_id,
        opcode,
        send_flags: IBV_SEND_SIGNALED.0,
        wr: ibv_send_wr_wr { rdma: ibv_send_wr_rdma { remote_addr: info.addr, rkey: info.rkey } },
        ..Default::default()
    };
    cb.q.qp.post_send(&mut wr, &[list], &cb.rdma)?;
    let read = opcode == IBV_WR_RDMA_READ;
    trace::event("ibv_post_send")
        .kv("wr_id", wr_id)
        .kv("opcode", if read { "IBV_WR_RDMA_READ" } else { "IBV_WR_RDMA_WRITE" })
        .kv("sge.length", len)
        .kv("wr.rdma.remote_addr", Hex64(info.addr))
        .kv("wr.rdma.rkey", Key(info.rkey))
        .emit();
    wait_spinning(&cb.q.cq, &[Send(wr_id)], timeout).map_err(|err| match cb.q.qp.query(IBV_QP_MAX_QP_RD_ATOMIC) {
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

/// Server: the completion of the "go ahead" SEND (rping's `send_buf`, which the server
/// never fills: 16 zeros) in flight when `go_ahead` is set, and the client's next
/// [`RpingInfo`]; or, once the client has disconnected, the DISCONNECTED event (not yet
/// traced: the loop may be muted), with the flush of our receive that came first on iWARP. Polls the CQ and, between empty polls, the CM's channel.
/// `done`: how many of each kind (a "go ahead", a message) completed on this QP before, for
/// the explanation of a failed one.
///
/// The two completions wait together because either may come first: the client may SEND
/// its next message as soon as our "go ahead" lands, before its acknowledgement reaches
/// us. They are traced in one order, as [`crate::poll::wait_for`] does. Between empty polls
/// it spins, then naps ([`Backoff::spin`]), as the client does.
fn await_info(
    ep: &Endpoint,
    cb: &RpingCb,
    go_ahead: bool,
    done: u64,
    timeout: Duration,
) -> Result<Result<RpingInfo, Disconnected>> {
    let deadline = Instant::now() + timeout;
    let mut wc = [verbs::WC_ZERO; 1];
    let (mut sent, mut received) = (None, None);
    let mut backoff = Backoff::spin();
    loop {
        if cb.q.cq.poll(&mut wc)? == 1 {
            backoff.reset();
            if received.is_none() && verbs::wc_status(&wc[0]) == IBV_WC_WR_FLUSH_ERR {
                if let Some(event) = flushed_by_disconnect(ep, timeout)? {
                    sent.iter().for_each(trace_wc);
                    return Ok(Err(Disconnected { event, flushed: Some(wc[0].wr_id()) }));
                }
            }
            check_wcs(&cb.q.cq, &wc, |_| done)?;
            match wc[0].wr_id() {
                PINGPONG_SEND_WRID if go_ahead && sent.is_none() => sent = Some(wc[0]),
                PINGPONG_RECV_WRID if received.is_none() => received = Some(wc[0]),
                other => {
                    return Err(Error::new("ibv_poll_cq").cause(format!("completion for unexpected wr_id {other}")))
                }
            }
            if let (true, Some(recv)) = (sent.is_some() || !go_ahead, received) {
                sent.iter().for_each(trace_wc);
                trace_wc(&recv);
                return received_info(cb, &recv).map(Ok);
            }
            continue;
        }
        if ep.channel.ready(Duration::ZERO)? {
            let event = ep.channel.get_event(&ep.ids())?;
            if event.kind == RDMA_CM_EVENT_DISCONNECTED && received.is_none() {
                sent.iter().for_each(trace_wc);
                return Ok(Err(Disconnected { event, flushed: None }));
            }
            trace_event(ep, &event);
            return Err(unexpected(&event, "the client's next message, or DISCONNECTED"));
        }
        let now = Instant::now();
        if now > deadline {
            return Err(Error::new("ibv_poll_cq")
                .cause(format!("no message from the client and no CM event within {} s", timeout.as_secs())));
        }
        backoff.idle(now);
    }
}

/// How long a flush waits for the DISCONNECTED that explains it: the CM's event follows the
/// flush at once on siw; a flush with no disconnect behind it is a failure, reported late
/// by no more than this.
const DISCONNECT_GRACE: Duration = Duration::from_secs(2);

/// The end of the connection, as the server meets it while it waits for the client's next
/// message: the CM's DISCONNECTED event (not yet traced), and the wr_id of our posted
/// receive when a flush of it came first.
struct Disconnected {
    event: CmEvent,
    flushed: Option<u64>,
}

/// A flush while the server waits for the client's next message: the end of the connection
/// when the CM's DISCONNECTED follows within [`DISCONNECT_GRACE`] (returned, not yet
/// traced); `None` when it does not, and the flush is then explained as the failure it is.
///
/// The order is the transport's. On RoCE the client's DisconnectRequest reaches the CM
/// before anything flushes our receive. On iWARP the connection is the QP's own TCP stream
/// (MPA): the client's close ends the stream, the QP leaves RTS and flushes the posted
/// receive, and the CM reports DISCONNECTED after that (seen on siw). rping's server,
/// waiting on its semaphore for the CM thread, never looks at the flush and ends on the
/// disconnect; we poll the CQ, so we see the flush first and wait for what follows it.
fn flushed_by_disconnect(ep: &Endpoint, timeout: Duration) -> Result<Option<CmEvent>> {
    if !ep.channel.ready(timeout.min(DISCONNECT_GRACE))? {
        return Ok(None);
    }
    let event = ep.channel.get_event(&ep.ids())?;
    if event.kind != RDMA_CM_EVENT_DISCONNECTED {
        trace_event(ep, &event);
        return Ok(None);
    }
    Ok(Some(event))
}

/// Checks a received message the way rping's `server_recv` does, reads it, and posts the
/// next receive.
fn received_info(cb: &RpingCb, wc: &ibv_wc) -> Result<RpingInfo> {
    if wc.wr_id() != PINGPONG_RECV_WRID || wc.len() != RpingInfo::LEN {
        return Err(Error::new("ibv_poll_cq").cause(format!(
            "expected the client's 16-byte rping_rdma_info, got wr_id {} of {} bytes (rping: \"Received bogus data\")",
            wc.wr_id(),
            wc.len()
        )));
    }
    let bytes: [u8; 16] = cb.recv.read(0, RpingInfo::LEN).try_into().expect("16 bytes");
    let info = RpingInfo::from_bytes(&bytes);
    trace::event("rping_info").kv("addr", Hex64(info.addr)).kv("rkey", Key(info.rkey)).kv("size", info.size).emit();
    post_recv(&cb.q.qp, &cb.recv, INFO_LEN, 1)?;
    Ok(info)
}
// ANCHOR_END: server

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

/// The closing line: rc_pingpong's `iters … usec/iter` line, for rping's loop.
pub fn print_pings(p: &Pings) {
    let usec = p.elapsed.as_secs_f64() * 1e6;
    trace::line(format_args!(
        "{} iters in {:.2} seconds = {:.2} usec/iter",
        p.count,
        usec / 1e6,
        if p.count == 0 { 0.0 } else { usec / f64::from(p.count) }
    ));
}
