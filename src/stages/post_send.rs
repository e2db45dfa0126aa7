//! Stage 07: post receives and a send — one SEND each way — and collect the first
//! completions.
//!
//! C reference: `pp_post_recv` and `pp_post_send`; the first completions are what the main
//! loop's `ibv_poll_cq` would see on its first turn.
//!
//! **Work requests.** Nothing moves until a work request (WR) is posted. A *receive* WR
//! says "the next incoming SEND may land here" (a scatter list of lkey-checked buffers); a
//! *send* WR says "send these bytes" (a gather list). Both carry a `wr_id` that comes back
//! in the work completion, which is how a program tells completions apart: rc_pingpong
//! uses 1 for receives and 2 for sends.
//!
//! **Receive before the peer sends.** A SEND that arrives when no receive is posted gets an
//! RNR ("receiver not ready") NAK and is retried after `min_rnr_timer`. rc_pingpong avoids
//! that by posting its receives *before* the address exchange: by the time the peer knows
//! our QP number, there is somewhere for its SEND to land.
//!
//! **Signaled, inline.** `IBV_SEND_SIGNALED` asks for a completion when the send is done
//! (acknowledged by the peer, on RC). `IBV_SEND_INLINE`, when the message fits, copies it
//! into the send queue's WQE at post time, so the buffer is free again as soon as
//! `ibv_post_send` returns.

use std::time::Duration;

use crate::error::Result;
use crate::poll::{
    wait_for,
    Awaited::{Recv, Send},
};
use crate::role::Role;
use crate::stages::create_qp::Queues;
use crate::trace::{self, Hex64, Key};
use crate::verbs::{ibv_recv_wr, ibv_send_flags, ibv_send_wr, ibv_sge, names, Mr, Qp, RecvQueue, IBV_WR_SEND};

/// `wr_id` of receive work requests (`PINGPONG_RECV_WRID`).
pub const PINGPONG_RECV_WRID: u64 = 1;
/// `wr_id` of send work requests (`PINGPONG_SEND_WRID`).
pub const PINGPONG_SEND_WRID: u64 = 2;

// ANCHOR: stage
/// `pp_post_recv`: posts `n` receive WRs, each for the first `size` bytes of `mr`, to a
/// QP's receive queue (or, in step 12, to an SRQ: `ibv_post_srq_recv`).
pub fn post_recv<Q: RecvQueue>(qp: &Q, mr: &Mr, size: u32, n: u32) -> Result<()> {
    // ANCHOR: hole_recv_sge HOLE(ibv_sge): one scatter entry: the first `size` bytes of the MR, with the key that proves we may use it locally
    let list = ibv_sge { addr: mr.addr(), length: size, lkey: mr.lkey() };
    // ANCHOR_END: hole_recv_sge
    let mut wr = ibv_recv_wr { wr_id: PINGPONG_RECV_WRID, ..Default::default() };
    for _ in 0..n {
        // ANCHOR: hole_post_recv HOLE: post the receive work request `wr` with its one scatter entry (ibv_post_recv)
        qp.post_recv(&mut wr, &[list], mr)?;
        // ANCHOR_END: hole_post_recv
    }
    trace::event(Q::VERB)
        .kv("count", n)
        .kv("wr_id", wr.wr_id)
        .kv("sge.addr", Hex64(list.addr))
        .kv("sge.length", list.length)
        .kv("sge.lkey", Key(list.lkey))
        .emit();
    Ok(())
}

/// `pp_post_send`: posts one SEND of the first `size` bytes of `mr`.
pub fn post_send(qp: &Qp, mr: &Mr, size: u32, send_flags: ibv_send_flags) -> Result<()> {
    let list = ibv_sge { addr: mr.addr(), length: size, lkey: mr.lkey() };
    let mut wr = ibv_send_wr {
        wr_id: PINGPONG_SEND_WRID,
        // ANCHOR: hole_send_opcode HOLE: the operation: a two-sided send that consumes a receive on the peer
        opcode: IBV_WR_SEND,
        // ANCHOR_END: hole_send_opcode
        // ANCHOR: hole_send_flags HOLE: the flags stage 04 chose (signaled, maybe inline), as the raw u32
        send_flags: send_flags.0,
        // ANCHOR_END: hole_send_flags
        ..Default::default()
    };
    // ANCHOR: hole_post_send HOLE: post the send work request `wr` with its one gather entry (ibv_post_send)
    qp.post_send(&mut wr, &[list], mr)?;
    // ANCHOR_END: hole_post_send
    trace_post_send(&wr, &list);
    Ok(())
}
// ANCHOR_END: stage

/// The trace line of a posted SEND `wr` with its one gather entry `list`.
pub fn trace_post_send(wr: &ibv_send_wr, list: &ibv_sge) {
    trace::event("ibv_post_send")
        .kv("wr_id", wr.wr_id)
        .kv("opcode", "IBV_WR_SEND")
        .kv("sge.addr", Hex64(list.addr))
        .kv("sge.length", list.length)
        .kv("sge.lkey", Key(list.lkey))
        .kv("send_flags", names::SendFlags(wr.send_flags))
        .emit();
}

// ANCHOR: first
/// One SEND each way: the client sends first; the server waits for it, answers with its
/// own SEND, and both wait for their completions. The client writes `ping` at the start of
/// its buffer and the server `pong`, so the trace shows the bytes arrive.
pub fn send_each_way(role: Role, q: &Queues, mr: &mut Mr, size: u32, timeout: Duration) -> Result<()> {
    let Queues { qp, cq, send_flags, .. } = q;
    let send_flags = *send_flags;
    match role {
        Role::Client => {
            stamp(mr, b"ping");
            post_send(qp, mr, size, send_flags)?;
            wait_for(cq, &[Send(PINGPONG_SEND_WRID), Recv(PINGPONG_RECV_WRID)], timeout)?;
        }
        Role::Server => {
            wait_for(cq, &[Recv(PINGPONG_RECV_WRID)], timeout)?;
            show_received(mr, size);
            stamp(mr, b"pong");
            post_send(qp, mr, size, send_flags)?;
            wait_for(cq, &[Send(PINGPONG_SEND_WRID)], timeout)?;
        }
    }
    if role == Role::Client {
        show_received(mr, size);
    }
    Ok(())
}
// ANCHOR_END: first

/// Writes `word` at the start of `mr`'s buffer: the message a side sends.
pub fn stamp(mr: &mut Mr, word: &[u8]) {
    mr.write(0, word);
}

fn show_received(mr: &Mr, size: u32) {
    let bytes = mr.read(0, (size as usize).min(4));
    trace::event("received").kv("data", format!("{:?}", String::from_utf8_lossy(&bytes))).emit();
}
