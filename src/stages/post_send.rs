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

use std::time::{Duration, Instant};

use crate::cli::Role;
use crate::error::{Error, Result};
use crate::trace::{self, Hex64, Key};
use crate::verbs::{
    self, ibv_recv_wr, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wc, names, Cq, Mr, Qp, IBV_WC_RDMA_WRITE,
    IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_SEND, IBV_WR_SEND,
};

/// `wr_id` of receive work requests (`PINGPONG_RECV_WRID`).
pub const PINGPONG_RECV_WRID: u64 = 1;
/// `wr_id` of send work requests (`PINGPONG_SEND_WRID`).
pub const PINGPONG_SEND_WRID: u64 = 2;

// ANCHOR: stage
/// `pp_post_recv`: posts `n` receive WRs, each for the first `size` bytes of `mr`.
pub fn post_recv(qp: &Qp, mr: &Mr, size: u32, n: u32) -> Result<()> {
    // ANCHOR: hole_recv_sge HOLE(ibv_sge): one scatter entry: the first `size` bytes of the MR, with the key that proves we may use it locally
    let list = ibv_sge { addr: mr.addr(), length: size, lkey: mr.lkey() };
    // ANCHOR_END: hole_recv_sge
    let mut wr = ibv_recv_wr { wr_id: PINGPONG_RECV_WRID, ..Default::default() };
    for _ in 0..n {
        // ANCHOR: hole_post_recv HOLE: post the receive work request `wr` with its one scatter entry (ibv_post_recv)
        qp.post_recv(&mut wr, &[list], mr)?;
        // ANCHOR_END: hole_post_recv
    }
    trace::event("ibv_post_recv")
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
    trace::event("ibv_post_send")
        .kv("wr_id", wr.wr_id)
        .kv("opcode", "IBV_WR_SEND")
        .kv("sge.addr", Hex64(list.addr))
        .kv("sge.length", list.length)
        .kv("sge.lkey", Key(list.lkey))
        .kv("send_flags", names::SendFlags(wr.send_flags))
        .emit();
    Ok(())
}
// ANCHOR_END: stage

// ANCHOR: first
/// One SEND each way: the client sends first; the server waits for it, answers with its
/// own SEND, and both wait for their completions. The client writes `ping` at the start of
/// its buffer and the server `pong`, so the trace shows the bytes arrive.
pub fn send_each_way(
    role: &Role,
    qp: &Qp,
    cq: &Cq,
    mr: &mut Mr,
    size: u32,
    send_flags: ibv_send_flags,
    timeout: Duration,
) -> Result<()> {
    match role {
        Role::Client { .. } => {
            stamp(mr, b"ping");
            post_send(qp, mr, size, send_flags)?;
            wait_for(cq, &[PINGPONG_SEND_WRID, PINGPONG_RECV_WRID], timeout)?;
        }
        Role::Server => {
            wait_for(cq, &[PINGPONG_RECV_WRID], timeout)?;
            show_received(mr, size);
            stamp(mr, b"pong");
            post_send(qp, mr, size, send_flags)?;
            wait_for(cq, &[PINGPONG_SEND_WRID], timeout)?;
        }
    }
    if matches!(role, Role::Client { .. }) {
        show_received(mr, size);
    }
    Ok(())
}
// ANCHOR_END: first

fn stamp(mr: &mut Mr, word: &[u8]) {
    let n = word.len().min(mr.len());
    mr.buf_mut()[..n].copy_from_slice(&word[..n]);
}

fn show_received(mr: &Mr, size: u32) {
    let n = (size as usize).min(4);
    trace::event("received").kv("data", format!("{:?}", String::from_utf8_lossy(&mr.buf()[..n]))).emit();
}

/// The longest nap of [`wait_for`] between two empty polls: how late, at most, it notices
/// a completion that it is waiting for (nothing it waits for is timed).
pub const MAX_NAP: Duration = Duration::from_millis(32);

/// Polls `cq` until a successful completion for each `wr_id` in `expected` has arrived,
/// then traces them in that order (the order they arrive in can vary from run to run).
///
/// Gives up after `timeout`: a peer that never sends would otherwise leave us polling
/// forever. Between empty polls it naps, 1 ms at first and twice as long after each empty
/// poll, up to [`MAX_NAP`]: unlike 08's timed loop, nothing here is measured, and a
/// busy-polling waiter takes the CPU its peer needs.
pub fn wait_for(cq: &Cq, expected: &[u64], timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut got: Vec<Option<ibv_wc>> = vec![None; expected.len()];
    let mut wc = [verbs::WC_ZERO; 2];
    let mut nap = Duration::from_millis(1);
    while got.iter().any(Option::is_none) {
        // ANCHOR: hole_wait_poll HOLE(usize): take up to wc.len() completions off the CQ without blocking (ibv_poll_cq): how many came
        let ne = cq.poll(&mut wc)?;
        // ANCHOR_END: hole_wait_poll
        for wc in &wc[..ne] {
            check_wc(wc)?;
            match expected.iter().zip(got.iter_mut()).find(|(id, slot)| **id == wc.wr_id() && slot.is_none()) {
                Some((_, slot)) => *slot = Some(*wc),
                None => {
                    return Err(Error::new("ibv_poll_cq")
                        .cause(format!("completion for unexpected wr_id {}", wc.wr_id())))
                }
            }
        }
        if ne == 0 && Instant::now() > deadline {
            return Err(Error::new("ibv_poll_cq")
                .cause(format!(
                    "no completion within {} s: the peer sent nothing (did it fail? look at its output)",
                    timeout.as_secs()
                ))
                .fix("start both sides; raise --timeout on a slow machine"));
        }
        if ne == 0 {
            // Nothing to do but wait: nap instead of spinning, so the CPU goes to the peer
            // and the device. (09's target waits here through the whole --bw transfer:
            // spinning, it took one of the lab VM's two vCPUs for itself; waking every
            // millisecond, it still took 1 % of the one vCPU of lab/bench's instruction clock.)
            std::thread::sleep(nap);
            nap = (nap * 2).min(MAX_NAP);
        } else {
            nap = Duration::from_millis(1);
        }
    }
    for wc in got.into_iter().flatten() {
        trace_wc(&wc);
    }
    Ok(())
}

/// A failed work completion becomes an explained error (`Failed status %s (%d) for wr_id %d`
/// in rc_pingpong).
pub fn check_wc(wc: &ibv_wc) -> Result<()> {
    match wc.error() {
        None => Ok(()),
        Some((status, vendor_err)) => Err(Error::new(format!(
            "work request wr_id {} (status {} ({status}), vendor_err 0x{vendor_err:x})",
            wc.wr_id(),
            verbs::wc_status_str(status)
        ))
        .cause(wc_status_cause(status))),
    }
}

/// The usual cause of a work completion error, in RC terms.
pub fn wc_status_cause(status: ibverbs_sys::ibv_wc_status::Type) -> &'static str {
    use ibverbs_sys::ibv_wc_status::*;
    match status {
        IBV_WC_LOC_LEN_ERR => "local length error: the incoming message is larger than the posted receive buffer",
        IBV_WC_LOC_QP_OP_ERR => "local QP operation error: the QP could not carry out a work request it had accepted (rxe reports this where the spec has a length or protection error: a receive too small, or in an MR without LOCAL_WRITE)",
        IBV_WC_LOC_PROT_ERR => "local protection error: a scatter/gather entry is not inside an MR of the QP's PD with the needed access",
        IBV_WC_WR_FLUSH_ERR => "flushed: the QP went to the error state (an earlier error, or the peer went away), so outstanding WRs were cancelled",
        IBV_WC_REM_ACCESS_ERR => "remote access error: the peer's MR or QP does not allow this access, or the rkey/address range is wrong",
        IBV_WC_REM_INV_REQ_ERR => "remote invalid request: the peer's QP does not accept this operation (e.g. no remote-write access) or the length is invalid",
        IBV_WC_REM_OP_ERR => "remote operation error: the peer could not complete the request (e.g. its receive buffer is too small)",
        IBV_WC_RETRY_EXC_ERR => "transport retry counter exceeded: the peer never acknowledged (wrong QPN/GID/PSN, or the peer's QP is gone)",
        IBV_WC_RNR_RETRY_EXC_ERR => "RNR retry counter exceeded: the peer had no receive posted, again and again",
        _ => "see the work completion status reference (man ibv_poll_cq)",
    }
}

/// One trace line for a work completion.
pub fn trace_wc(wc: &ibv_wc) {
    let opcode = match wc.opcode() {
        IBV_WC_SEND => "IBV_WC_SEND",
        IBV_WC_RECV => "IBV_WC_RECV",
        IBV_WC_RDMA_WRITE => "IBV_WC_RDMA_WRITE",
        IBV_WC_RECV_RDMA_WITH_IMM => "IBV_WC_RECV_RDMA_WITH_IMM",
        _ => "other",
    };
    let mut line = trace::event("ibv_poll_cq")
        .kv("wr_id", wc.wr_id())
        .kv("status", names::wc_status_name(verbs::wc_status(wc)))
        .kv("opcode", opcode);
    // byte_len and imm_data are defined only for receive completions.
    if opcode.starts_with("IBV_WC_RECV") {
        line = line.kv("byte_len", wc.len());
        if let Some(imm) = wc.imm_data() {
            line = line.kv("imm_data", Key(u32::from_be(imm)));
        }
    }
    line.emit();
}
