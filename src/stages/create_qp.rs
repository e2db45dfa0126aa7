//! Stage 04: create the completion queue and the queue pair, and move the QP to INIT.
//!
//! C reference: the second half of `pp_init_ctx` — `ibv_create_comp_channel` (with `-e`),
//! `ibv_create_cq`, `ibv_create_qp`, `ibv_query_qp` for `max_inline_data`, and the
//! `ibv_modify_qp` to `IBV_QPS_INIT`.
//!
//! **CQ.** Every work request posted to a QP ends as a work completion in a CQ: that is the
//! only way to learn a SEND went out or a message came in. rc_pingpong uses one CQ for both
//! queues, with `rx_depth + 1` entries: room for every posted receive plus the one
//! outstanding send. A CQ that overflows is an error for the whole CQ, so sizing it is not
//! optional.
//!
//! **QP.** The `cap` fields size the two queues: `max_recv_wr = rx_depth` receives may be
//! posted at once, `max_send_wr = 1` send (rc_pingpong never has more in flight). The device
//! may grant more than asked, and `ibv_query_qp` tells what it really did — notably
//! `max_inline_data`, the largest message the CPU may copy into the send queue's own entry
//! for the WR (its WQE) at post time (`IBV_SEND_INLINE`), which saves the HCA a DMA read
//! for small messages.
//!
//! **RESET→INIT.** A new QP is in RESET and can do nothing. INIT binds it to a port and a
//! partition key and sets what *remote* peers may do to our memory through it
//! (`qp_access_flags`, 0 for a SEND/RECV ping-pong). Receives may be posted from INIT on;
//! sends need RTS (stage 06).

use std::rc::Rc;

use crate::error::Result;
use crate::stages::open_device::Device;
use crate::trace;
use crate::verbs::{
    ibv_access_flags, ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_cap, ibv_qp_init_attr, ibv_send_flags, names, CompChannel,
    Context, Cq, Pd, Qp, IBV_QPS_INIT, IBV_QPT_RC, IBV_QP_ACCESS_FLAGS, IBV_QP_PKEY_INDEX, IBV_QP_PORT, IBV_QP_STATE,
    IBV_SEND_INLINE, IBV_SEND_SIGNALED,
};

/// What the QP is for: queue depths, message size, completion mode, remote access.
#[derive(Debug, Clone, Copy)]
pub struct QpOptions {
    /// Receives that may be outstanding at once (`-r`, 500).
    pub rx_depth: u32,
    /// Sends that may be outstanding at once (1 for the ping-pong).
    pub tx_depth: u32,
    /// CQ entries: room for every completion that can be waiting to be polled, so
    /// `rx_depth + tx_depth` (rc_pingpong's `rx_depth + 1`).
    pub cqe: u32,
    /// The message size (`-s`): decides whether sends can be inline.
    pub size: u32,
    /// Sleep on completion events (`-e`) instead of busy-polling.
    pub use_event: bool,
    /// `qp_access_flags`: what a remote peer may do to our MRs through this QP.
    pub access: ibv_access_flags,
}

impl QpOptions {
    /// rc_pingpong's QP: `rx_depth` receives, one send, no remote access.
    pub fn pingpong(size: u32, rx_depth: u32, use_event: bool) -> Self {
        QpOptions { rx_depth, tx_depth: 1, cqe: rx_depth + 1, size, use_event, access: ibv_access_flags(0) }
    }
}

/// The QP with its CQ and (with `-e`) completion channel, and the send flags chosen for it.
pub struct Queues {
    /// The queue pair, in INIT.
    pub qp: Qp,
    /// The CQ both of its queues complete into.
    pub cq: Rc<Cq>,
    /// The completion channel the CQ signals on, with `-e`.
    pub channel: Option<Rc<CompChannel>>,
    /// `IBV_SEND_SIGNALED`, plus `IBV_SEND_INLINE` when the message fits inline
    /// (`ctx->send_flags`).
    pub send_flags: ibv_send_flags,
}

// ANCHOR: stage
/// The CQ (and, with `opts.use_event`, its completion channel) on `ctx`, and an RC QP in
/// `pd` sized by `opts`, made by `create`: `ibv_create_qp` ([`Qp::create`]) for
/// [`create_qp`], which then moves the QP to INIT itself; `rdma_create_qp` for step 10,
/// where the connection manager does. Its sends are signaled, none inline yet.
pub fn create_queues(
    ctx: &Rc<Context>,
    pd: &Rc<Pd>,
    opts: QpOptions,
    create: impl FnOnce(&Rc<Pd>, &Rc<Cq>, ibv_qp_init_attr) -> Result<Qp>,
) -> Result<Queues> {
    // ANCHOR: hole_comp_channel HOLE(Option<Rc<CompChannel>>): with -e (opts.use_event) a completion channel for the CQ to signal on (ibv_create_comp_channel), else none
    let channel = if opts.use_event { Some(CompChannel::create(ctx)?) } else { None };
    // ANCHOR_END: hole_comp_channel

    // ANCHOR: hole_create_cq HOLE(Rc<Cq>): a CQ with room for opts.cqe completions, attached to the channel if there is one, completion vector 0 (ibv_create_cq)
    let cq = Cq::create(ctx, opts.cqe as i32, channel.as_ref(), 0)?;
    // ANCHOR_END: hole_create_cq

    // ANCHOR: init_attr
    let init_attr = ibv_qp_init_attr {
        send_cq: cq.as_ptr(),
        recv_cq: cq.as_ptr(),
        cap: ibv_qp_cap {
            // ANCHOR: hole_max_send_wr HOLE: how many sends may be outstanding at once
            max_send_wr: opts.tx_depth,
            // ANCHOR_END: hole_max_send_wr
            // ANCHOR: hole_max_recv_wr HOLE: how many receives may be posted at once (-r)
            max_recv_wr: opts.rx_depth,
            // ANCHOR_END: hole_max_recv_wr
            max_send_sge: 1,
            max_recv_sge: 1,
            ..Default::default()
        },
        // ANCHOR: hole_qp_type HOLE: the transport: a reliable, connected QP
        qp_type: IBV_QPT_RC,
        // ANCHOR_END: hole_qp_type
        ..Default::default()
    };
    // ANCHOR_END: init_attr
    let qp = create(pd, &cq, init_attr)?;
    Ok(Queues { qp, cq, channel, send_flags: IBV_SEND_SIGNALED })
}

/// Creates the CQ (and completion channel) and an RC QP in `pd`, then moves it RESET→INIT.
pub fn create_qp(dev: &Device, pd: &Rc<Pd>, opts: QpOptions) -> Result<Queues> {
    let q = create_queues(&dev.ctx, pd, opts, Qp::create)?;

    let cap = q.qp.query_cap()?;
    let mut send_flags = q.send_flags;
    // ANCHOR: hole_inline HOLE: add IBV_SEND_INLINE to send_flags when a whole message (opts.size) fits in what the device granted inline (cap.max_inline_data)
    if cap.max_inline_data >= opts.size {
        send_flags |= IBV_SEND_INLINE;
    }
    // ANCHOR_END: hole_inline
    trace::event("ibv_query_qp")
        .kv("cap.max_inline_data", cap.max_inline_data)
        .kv("send_flags", names::SendFlags(send_flags.0))
        .emit();

    // ANCHOR: init
    let attr = ibv_qp_attr {
        // ANCHOR: hole_init_state HOLE: the state this modify_qp moves the QP to
        qp_state: IBV_QPS_INIT,
        // ANCHOR_END: hole_init_state
        pkey_index: 0,
        // ANCHOR: hole_init_port HOLE: the port the QP is bound to (the one stage 01 opened)
        port_num: dev.ib_port,
        // ANCHOR_END: hole_init_port
        // ANCHOR: hole_init_access HOLE: what remote peers may do to our memory through this QP (the caller's opts.access)
        qp_access_flags: opts.access.0,
        // ANCHOR_END: hole_init_access
        ..Default::default()
    };
    q.qp.modify(&attr, INIT_MASK)?;
    // ANCHOR_END: init

    Ok(Queues { send_flags, ..q })
}

// ANCHOR: mask
/// The attributes the RESET→INIT transition requires (the table in `man ibv_modify_qp`):
/// the kernel reads only the fields whose bit is in the mask, and refuses the transition
/// with EINVAL when a required one is missing.
pub const INIT_MASK: ibv_qp_attr_mask = ibv_qp_attr_mask(
    IBV_QP_STATE.0
        // ANCHOR: hole_init_mask HOLE: the attributes RESET->INIT requires besides the state: one `| IBV_QP_....0` per attribute create_qp sets (man ibv_modify_qp)
        | IBV_QP_PKEY_INDEX.0
        | IBV_QP_PORT.0
        | IBV_QP_ACCESS_FLAGS.0,
    // ANCHOR_END: hole_init_mask
);
// ANCHOR_END: mask
// ANCHOR_END: stage
