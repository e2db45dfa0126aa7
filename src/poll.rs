//! Polling a CQ outside the timed loop: waiting for given completions with a deadline,
//! turning a failed completion into an explained error, and tracing a completion.
//!
//! Stages 07 and 09 wait here for their first completions, stage 08's loop and 09's
//! writer check theirs with [`check_wc`], and the break-it cases use the same functions.
//! (08's timed loop polls on its own, muted and without naps: see
//! [`crate::stages::poll_cq`].)

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::trace::{self, Key};
use crate::verbs::{
    self, ibv_wc, names, Cq, IBV_WC_RDMA_WRITE, IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_SEND,
};

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
        let ne = cq.poll(&mut wc)?;
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
