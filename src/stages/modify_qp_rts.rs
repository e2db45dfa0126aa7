//! Stage 06: move the QP RTR→RTS, so it can send.
//!
//! C reference: the second half of `pp_connect_ctx`.
//!
//! **The RTS attributes** are about the sending side of the connection. `sq_psn` is the
//! first PSN we send with: the value we told the peer in the exchange, which it set as its
//! `rq_psn`. `timeout` is the ACK timeout, 4.096 µs × 2^timeout (14 ≈ 67 ms); `retry_cnt`
//! how many times to resend an unacknowledged packet; `rnr_retry` how many times to retry
//! when the peer answers "receiver not ready" (no receive posted) — 7 means *forever*.
//! `max_rd_atomic` is how many RDMA READs/atomics we may have outstanding.
//!
//! After RTS the connection is up: nothing more is exchanged to "open" it, the first SEND
//! simply flows.

use std::fmt::Display;

use crate::error::Result;
use crate::exchange::Peer;
use crate::stages::modify_qp_rtr::{exchange_dest, modify_qp_rtr};
use crate::stages::open_device::Device;
use crate::verbs::{
    ibv_mtu, ibv_qp_attr, ibv_qp_attr_mask, Qp, IBV_QPS_RTS, IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_RETRY_CNT,
    IBV_QP_RNR_RETRY, IBV_QP_SQ_PSN, IBV_QP_STATE, IBV_QP_TIMEOUT,
};
use crate::wire::{Dest, Message};

// ANCHOR: stage
/// `ibv_modify_qp` RTR→RTS, sending from `my_psn` (our PSN from the exchange).
pub fn modify_qp_rts(qp: &Qp, my_psn: u32) -> Result<()> {
    qp.modify(&rts_attr(my_psn), RTS_MASK)
}

/// The RTR→RTS attributes: the requester's side of the connection.
pub fn rts_attr(my_psn: u32) -> ibv_qp_attr {
    ibv_qp_attr {
        qp_state: IBV_QPS_RTS,
        // ANCHOR: hole_timeout HOLE: the local ACK timeout code, 4.096 us * 2^timeout (rc_pingpong: about 67 ms)
        timeout: 14,
        // ANCHOR_END: hole_timeout
        // ANCHOR: hole_retry_cnt HOLE: how many times to resend a packet that was not acknowledged (rc_pingpong's value)
        retry_cnt: 7,
        // ANCHOR_END: hole_retry_cnt
        // ANCHOR: hole_rnr_retry HOLE: how many times to retry after an RNR NAK (rc_pingpong's value, which has a special meaning)
        rnr_retry: 7,
        // ANCHOR_END: hole_rnr_retry
        // ANCHOR: hole_sq_psn HOLE: the PSN our first packet carries: the one we told the peer in the exchange
        sq_psn: my_psn,
        // ANCHOR_END: hole_sq_psn
        // ANCHOR: hole_max_rd_atomic HOLE: how many RDMA READs/atomics we may have outstanding as requester (rc_pingpong's value)
        max_rd_atomic: 1,
        // ANCHOR_END: hole_max_rd_atomic
        ..Default::default()
    }
}

/// The attributes the RTR→RTS transition requires (`man ibv_modify_qp`).
pub const RTS_MASK: ibv_qp_attr_mask = ibv_qp_attr_mask(
    IBV_QP_STATE.0
        // ANCHOR: hole_rts_mask HOLE: the attributes RTR->RTS requires besides the state: one `| IBV_QP_....0` per attribute (man ibv_modify_qp)
        | IBV_QP_TIMEOUT.0
        | IBV_QP_RETRY_CNT.0
        | IBV_QP_RNR_RETRY.0
        | IBV_QP_SQ_PSN.0
        | IBV_QP_MAX_QP_RD_ATOMIC.0,
    // ANCHOR_END: hole_rts_mask
);
// ANCHOR_END: stage

// ANCHOR: connect
/// Stages 05 and 06 in rc_pingpong's order (`pp_connect_ctx` inside the exchange): the
/// exchange up to the peer's address, RTR towards it, RTS from the PSN we announced, then
/// the rest of the exchange. Returns the peer's message. Step 06 and every later step
/// connect their QP with this call; `M` is [`Dest`] for 06–08 and
/// [`crate::wire::RdmaDest`] for 09.
pub fn connect<M>(qp: &Qp, dev: &Device, peer: &Peer, local: &M, mtu: ibv_mtu, sl: u8) -> Result<M>
where
    M: Message + Display + AsRef<Dest>,
{
    let exchange = exchange_dest(peer, local)?;
    // Here the server has the client's address and owes it a reply: it connects its QP
    // first, so the QP can receive by the time the client knows where to send. The
    // client has the server's reply already.
    modify_qp_rtr(qp, dev, exchange.remote().as_ref(), mtu, sl)?;
    modify_qp_rts(qp, local.as_ref().psn)?;
    exchange.finish()
}
// ANCHOR_END: connect
