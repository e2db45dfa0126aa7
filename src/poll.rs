//! Polling a CQ outside the timed loop: waiting for given completions with a deadline,
//! turning a failed completion into an explained error, and tracing a completion.
//!
//! Stages 07 and 09 wait here for their first completions, stage 08's loop and 09's
//! writer check theirs with [`check_wcs`], and the break-it cases use the same functions.
//! (08's timed loop polls on its own, muted and without naps: see
//! [`crate::stages::poll_cq`].)

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::link;
use crate::trace::{self, Key};
use crate::verbs::{self, ibv_wc, names, Cq, Watchdog};
use ibverbs_sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR;

/// The longest nap of [`wait_for`] between two empty polls: how late, at most, it notices
/// a completion that it is waiting for (nothing it waits for is timed).
pub const MAX_NAP: Duration = Duration::from_millis(32);

/// How long a [`Backoff::spin`] waiter yields before it naps: longer than the waits of a
/// healthy ping-pong up to a few KiB, where the peer answers as soon as it gets the CPU.
pub const SPIN: Duration = Duration::from_micros(200);

/// A [`Backoff::spin`] waiter's nap after [`SPIN`], until [`SHORT_NAPS`] have passed.
pub const SHORT_NAP: Duration = Duration::from_micros(20);

/// How long into a wait a [`Backoff::spin`] waiter keeps its naps short; past that the peer
/// is slow or gone, and it naps as [`Backoff::nap`] does.
pub const SHORT_NAPS: Duration = Duration::from_millis(50);

/// What a waiter does after an empty poll.
///
/// [`Backoff::nap`] sleeps, 1 ms at first and twice as long after each empty poll, up to
/// [`MAX_NAP`]: right where nothing is timed, since a busy-polling waiter takes the CPU its
/// peer needs. But a nap is also the shortest time the waiter can take to notice what it
/// waits for: in a loop that waits for its peer's answer every few microseconds, a 1 ms
/// nap per wait *is* the loop's speed. [`Backoff::spin`] is for such a loop: for [`SPIN`]
/// it gives the CPU away (`sched_yield`) and polls again at once — on a CPU shared with the
/// peer, the yield lets the peer run now; on a CPU of its own, it returns at once and the
/// waiter busy-polls, as latency-bound loops do. A longer wait is the kernel's work (rxe
/// answering a large RDMA READ runs in a kernel thread): a spinning waiter would take CPU
/// time from it, so it naps [`SHORT_NAP`] at a time until [`SHORT_NAPS`], and only then as
/// [`Backoff::nap`] does. (A production program would arm the CQ and sleep on its
/// completion channel after the spin, as rping's CQ thread does from the start.)
#[derive(Debug)]
pub struct Backoff {
    /// Whether to spin and nap short before napping long.
    spin: bool,
    /// The wait's first empty poll.
    since: Option<Instant>,
    /// The next long nap.
    nap: Duration,
}

impl Backoff {
    /// Naps from the first empty poll on.
    pub fn nap() -> Backoff {
        Backoff { spin: false, since: None, nap: Duration::from_millis(1) }
    }

    /// Yields for [`SPIN`] from the first empty poll, naps short until [`SHORT_NAPS`], then
    /// naps as [`Backoff::nap`].
    pub fn spin() -> Backoff {
        Backoff { spin: true, since: None, nap: Duration::from_millis(1) }
    }

    /// After an empty poll at `now`: yield, or nap.
    pub fn idle(&mut self, now: Instant) {
        if self.spin {
            let waited = now - *self.since.get_or_insert(now);
            if waited < SPIN {
                std::thread::yield_now();
                return;
            }
            if waited < SHORT_NAPS {
                std::thread::sleep(SHORT_NAP);
                return;
            }
        }
        std::thread::sleep(self.nap);
        self.nap = (self.nap * 2).min(MAX_NAP);
    }

    /// After a poll that found something: the next wait starts afresh.
    pub fn reset(&mut self) {
        self.since = None;
        self.nap = Duration::from_millis(1);
    }
}

/// A work request [`wait_for`] waits for: one of ours that sends (a SEND or an RDMA WRITE,
/// which completes when the peer acknowledges it), or one of our receives (which completes
/// when the peer's message lands in it). The two stay incomplete for different reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Awaited {
    /// Our send with this `wr_id`.
    Send(u64),
    /// Our receive with this `wr_id`.
    Recv(u64),
}

impl Awaited {
    fn wr_id(self) -> u64 {
        match self {
            Awaited::Send(id) | Awaited::Recv(id) => id,
        }
    }
}

/// Polls `cq` until a successful completion for each work request in `expected` has
/// arrived, then traces them in that order (the order they arrive in can vary from run to
/// run).
///
/// Gives up after `timeout`, naming what is still missing and why it can be: a peer that
/// never sends, or a send the peer never acknowledges, would otherwise leave us polling
/// forever. Between empty polls it naps, 1 ms at first and twice as long after each empty
/// poll, up to [`MAX_NAP`]: unlike 08's timed loop, nothing here is measured, and a
/// busy-polling waiter takes the CPU its peer needs.
pub fn wait_for(cq: &Cq, expected: &[Awaited], timeout: Duration) -> Result<()> {
    wait_with(cq, expected, timeout, &mut Backoff::nap())
}

/// [`wait_for`] for a loop that waits for its peer's answer every iteration: it spins
/// before it naps ([`Backoff::spin`]).
pub fn wait_spinning(cq: &Cq, expected: &[Awaited], timeout: Duration) -> Result<()> {
    wait_with(cq, expected, timeout, &mut Backoff::spin())
}

fn wait_with(cq: &Cq, expected: &[Awaited], timeout: Duration, backoff: &mut Backoff) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut got: Vec<Option<ibv_wc>> = vec![None; expected.len()];
    let mut wc = [verbs::WC_ZERO; 2];
    while got.iter().any(Option::is_none) {
        let ne = cq.poll(&mut wc)?;
        check_wcs(cq, &wc[..ne], |wr_id| got.iter().flatten().filter(|done| done.wr_id() == wr_id).count() as u64)?;
        for wc in &wc[..ne] {
            match expected.iter().zip(got.iter_mut()).find(|(w, slot)| w.wr_id() == wc.wr_id() && slot.is_none()) {
                Some((_, slot)) => *slot = Some(*wc),
                None => {
                    return Err(
                        Error::new("ibv_poll_cq").cause(format!("completion for unexpected wr_id {}", wc.wr_id()))
                    )
                }
            }
        }
        if ne > 0 {
            backoff.reset();
            continue;
        }
        let now = Instant::now();
        if now > deadline {
            let missing: Vec<Awaited> =
                expected.iter().zip(&got).filter(|(_, slot)| slot.is_none()).map(|(w, _)| *w).collect();
            return Err(timed_out(&missing, timeout));
        }
        // Nothing to do but wait. (09's target waits here, napping, through the whole --bw
        // transfer: spinning, it took one of the lab VM's two vCPUs for itself; waking every
        // millisecond, it still took 1 % of the one vCPU of lab/bench's instruction clock.)
        backoff.idle(now);
    }
    for wc in got.into_iter().flatten() {
        trace_wc(&wc);
    }
    Ok(())
}

/// Busy-polls `cq` for `awaited`, the one work request in flight, as a timed loop must
/// (step 13's, one atomic at a time): no clock read and no allocation per call — the wait
/// is bounded by `dog`, one load per empty poll and one store per completion, as 08's loop
/// is. Returns the completion for the caller to trace (a timed loop traces only its
/// first: a muted trace line still names the opcode and status, work a loop this short
/// shows); a failed one is explained with `completed`, how many of its kind completed
/// before it.
#[inline]
pub fn spin_for_one(cq: &Cq, awaited: Awaited, dog: &Watchdog, timeout: Duration, completed: u64) -> Result<ibv_wc> {
    let mut wc = [verbs::WC_ZERO; 1];
    while cq.poll(&mut wc)? == 0 {
        if dog.fired() {
            return Err(timed_out(&[awaited], timeout));
        }
    }
    dog.progress();
    check_wcs(cq, &wc, |_| completed)?;
    if wc[0].wr_id() != awaited.wr_id() {
        return Err(Error::new("ibv_poll_cq").cause(format!("completion for unexpected wr_id {}", wc[0].wr_id())));
    }
    Ok(wc[0])
}

/// The error of a wait that saw nothing complete for `missing` within `timeout`.
#[cold]
fn timed_out(missing: &[Awaited], timeout: Duration) -> Error {
    Error::new("ibv_poll_cq")
        .cause(timeout_cause(missing, timeout))
        .fix("read the peer's output first; start both sides; raise --timeout on a slow machine")
}

/// Why the work requests in `missing` may still be incomplete after `timeout`: a send and a
/// receive wait on different things, so each kind gets its own list of causes.
fn timeout_cause(missing: &[Awaited], timeout: Duration) -> String {
    let mut why = format!("no completion within {} s for", timeout.as_secs());
    for (i, w) in missing.iter().enumerate() {
        let sep = if i == 0 { "" } else { ";" };
        match w {
            Awaited::Send(id) => why.push_str(&format!(
                "{sep} our send (wr_id {id}): the peer has not acknowledged it. It is still being \
                 retried: the peer has no receive posted (each try gets an RNR NAK, and with \
                 rnr_retry = 7 they never run out), or its packets do not reach the peer (a path \
                 MTU larger than the link, a wrong address or PSN, a peer that is gone)"
            )),
            Awaited::Recv(id) => why.push_str(&format!(
                "{sep} our receive (wr_id {id}): nothing the peer sent has landed in it. The \
                 peer may not have sent (it failed, and its output says why, or it is waiting \
                 itself), or what it sent was lost or discarded on the way (packets larger than \
                 the link, a PSN other than the one we expect)"
            )),
        }
    }
    why
}

/// How long the explanation of a flushed completion looks on its CQ for the failure that
/// caused the flush (see [`check_wcs`]). Only a failing run waits it, once.
pub const FLUSH_GRACE: Duration = Duration::from_millis(200);

/// Checks a batch of completions just polled from `cq`; a failed one becomes an explained
/// error (`Failed status %s (%d) for wr_id %d` in rc_pingpong). `completed(wr_id)`: how
/// many work requests of that kind (our programs give each kind its own wr_id) had
/// completed successfully on this QP before the batch: a failure after many good
/// completions of the same kind is not about how it was built.
///
/// A flush (`IBV_WC_WR_FLUSH_ERR`) is not a cause: it cancels the outstanding WRs of a QP
/// that an earlier failure put in the error state. By the spec the WR that failed completes
/// with its own status, but its completion may come *after* the flushes it caused: the spec
/// orders the completions of one work queue, not those of a QP's send and receive queues
/// that share a CQ. So when a batch's failures are all flushes, the explanation looks on
/// the CQ for up to [`FLUSH_GRACE`] for a failure that is not one, and reports that, or
/// else the first flush. (It may find none: the QP may have failed on a request from its
/// peer, or been moved to ERR; and rxe on Linux 6.12 completes a WR that failed as a flush
/// too, when the QP reached the error state before rxe made the WR's completion, as in
/// `07 --break sge-past-mr`.)
#[inline]
pub fn check_wcs(cq: &Cq, wcs: &[ibv_wc], completed: impl Fn(u64) -> u64) -> Result<()> {
    if wcs.iter().all(|wc| wc.error().is_none()) {
        return Ok(());
    }
    Err(failed_wc(cq, wcs, &completed))
}

/// The explained error of a batch with a failed completion, kept out of the loops that call
/// [`check_wcs`] for every batch: inlined there, its formatting made the loop of 08
/// heavier on every iteration, failed or not.
#[cold]
#[inline(never)]
fn failed_wc(cq: &Cq, wcs: &[ibv_wc], completed: &dyn Fn(u64) -> u64) -> Error {
    let is_flush = |wc: &ibv_wc| verbs::wc_status(wc) == IBV_WC_WR_FLUSH_ERR;
    let failed: Vec<&ibv_wc> = wcs.iter().filter(|wc| wc.error().is_some()).collect();
    // The first failure that is not a flush, on the CQ if not in the batch; or else the
    // first flush.
    let cause = match failed.iter().find(|wc| !is_flush(wc)) {
        Some(wc) => Some(**wc),
        None => failure_after(cq),
    };
    let wc = cause.unwrap_or(*failed[0]);
    // Its kind's successes before the batch, and in it (a queue's completions come in
    // order, so those of its kind in the batch came before it).
    let ok_in_batch = wcs.iter().filter(|w| w.wr_id() == wc.wr_id() && w.error().is_none()).count();
    let completed = completed(wc.wr_id()) + ok_in_batch as u64;
    let (status, vendor_err) = wc.error().expect("a failed completion");
    Error::new(format!(
        "work request wr_id {} (status {} ({status}), vendor_err 0x{vendor_err:x})",
        wc.wr_id(),
        verbs::wc_status_str(status)
    ))
    .cause(wc_status_cause(status, completed, crate::link::sample()))
}

/// The first failed completion other than a flush that `cq` yields within [`FLUSH_GRACE`]:
/// the cause of the flushes polled before it.
fn failure_after(cq: &Cq) -> Option<ibv_wc> {
    let deadline = Instant::now() + FLUSH_GRACE;
    let mut wc = [verbs::WC_ZERO; 1];
    while Instant::now() < deadline {
        match cq.poll(&mut wc) {
            Ok(1) if !matches!(wc[0].error(), None | Some((IBV_WC_WR_FLUSH_ERR, _))) => return Some(wc[0]),
            Ok(1) => {}
            Ok(_) => std::thread::sleep(Duration::from_millis(1)),
            Err(_) => return None,
        }
    }
    None
}

/// Why a work request completed with `status`, from what the program can know: the status,
/// how many of the QP's work requests of its kind had `completed` before it, the link under the
/// port (`link`: when the device was opened, and now; see [`crate::link`]).
///
/// Each status has a usual cause, what the spec (or rxe) means by it. When the link or the
/// QP's history points elsewhere, those causes come first, the most likely first, and the
/// usual one follows as the least likely.
pub fn wc_status_cause(
    status: ibverbs_sys::ibv_wc_status::Type,
    completed: u64,
    link: Option<(link::Sample, link::Sample)>,
) -> String {
    use ibverbs_sys::ibv_wc_status::*;
    let (start, now) = link.unwrap_or_default();
    let down = now.down();
    let send_errs = match (start.send_err, now.send_err) {
        (Some(a), Some(b)) if b > a => Some(b - a),
        _ => None,
    };
    let flaps = match (start.carrier_changes, now.carrier_changes) {
        (Some(a), Some(b)) if b > a => Some(b - a),
        _ => None,
    };
    let netdev = now.netdev.as_deref().unwrap_or("its network interface");
    let refused = |n: u64| {
        format!(
            "the device could not hand {n} packet(s) to {netdev} since it was opened (send_err): \
             a packet above the interface's MTU, the interface going down, or its queue refusing \
             the packet (full, or being replaced)"
        )
    };
    let mut causes = Vec::new();
    let (headline, usual) = match status {
        IBV_WC_LOC_QP_OP_ERR => {
            // Measured on rxe (Linux 6.1), eth0 down mid-run: the next packet rxe must send
            // fails the QP at once, and send_err stays 0: rxe's requester could not prepare
            // the packet for an interface that is down (rxe_req.c: a packet init_req_packet
            // or finish_packet cannot build fails its WQE with LOC_QP_OP_ERR; send_err
            // counts only transmits the interface refused). The spec and hardware would
            // retransmit on the ACK timer until retry_cnt ran out.
            if let Some(down) = &down {
                causes.push(format!(
                    "the link is down: {down}. rxe could not send a packet on it and failed the QP \
                     at once (hardware would retransmit until retry_cnt ran out: IBV_WC_RETRY_EXC_ERR)"
                ));
            }
            if let (None, Some(n)) = (&down, flaps) {
                causes.push(format!(
                    "the link went down and came back: {netdev}'s carrier changed {n} time(s) since \
                     the device was opened (carrier_changes), and rxe fails the QP when it cannot \
                     send a packet"
                ));
            }
            if let Some(n) = send_errs {
                causes.push(refused(n));
            }
            let usual = if completed > 0 {
                format!(
                    "a work request unlike the {completed} of its kind that completed before it: a \
                     receive too small, a buffer outside an MR with LOCAL_WRITE, an lkey that names \
                     no MR"
                )
            } else {
                "rxe reports this where the spec has a length or protection error: a receive too \
                 small, a receive into an MR without LOCAL_WRITE, or a scatter/gather entry whose \
                 lkey names no MR"
                    .to_string()
            };
            ("local QP operation error: the QP could not carry out a work request it had accepted", usual)
        }
        IBV_WC_RETRY_EXC_ERR => {
            if let Some(down) = &down {
                causes.push(format!("the link is down: {down}, for longer than the retries last"));
            }
            let usual = if completed > 0 {
                format!(
                    "after {completed} completions the peer stopped acknowledging: the path between \
                     was cut for longer than the retries last (the ACK timeout × (retry_cnt + 1)), \
                     the peer's host is gone, or its program ended and its QP with it"
                )
            } else {
                "wrong QPN/GID/PSN, or the peer's QP is gone".to_string()
            };
            ("transport retry counter exceeded: the peer never acknowledged", usual)
        }
        IBV_WC_WR_FLUSH_ERR => {
            if let Some(down) = &down {
                causes.push(format!("the link is down: {down}, and the QP failed on it"));
            }
            if let Some(n) = send_errs {
                causes.push(refused(n));
            }
            if causes.is_empty() {
                return "flushed: this QP went to the error state (an earlier error on it, or a move to \
                        ERR), so its outstanding WRs were cancelled"
                    .to_string();
            }
            (
                "flushed: this QP went to the error state, so its outstanding WRs were cancelled",
                "an earlier error on it (the first failed completion, if one came, says which), or a \
                 move to ERR"
                    .to_string(),
            )
        }
        _ => return usual_cause(status).to_string(),
    };
    if causes.is_empty() {
        return format!("{headline} ({usual})");
    }
    let mut text = format!("{headline}. What fits, the most likely first:");
    for (i, cause) in causes.iter().chain([&usual]).enumerate() {
        text.push_str(&format!("\n{}. {cause}", i + 1));
    }
    text
}

/// The one cause a status has whatever the link and the QP's history say.
fn usual_cause(status: ibverbs_sys::ibv_wc_status::Type) -> &'static str {
    use ibverbs_sys::ibv_wc_status::*;
    match status {
        IBV_WC_LOC_LEN_ERR => "local length error: the incoming message is larger than the posted receive buffer",
        IBV_WC_LOC_PROT_ERR => "local protection error: a scatter/gather entry is not inside an MR of the QP's PD with the needed access",
        // Only the MR: a QP without the access flag gets an invalid-request NAK on rxe
        // (REM_INV_REQ_ERR below), as book/src/wc_status.md says.
        IBV_WC_REM_ACCESS_ERR => "remote access error: wrong rkey, range outside the peer's MR, or the MR lacks remote access",
        IBV_WC_REM_INV_REQ_ERR => "remote invalid request: the peer's QP does not accept this operation (e.g. no remote-write access) or the length is invalid",
        IBV_WC_REM_OP_ERR => "remote operation error: the peer could not complete the request (e.g. its receive buffer is too small)",
        IBV_WC_RNR_RETRY_EXC_ERR => "RNR retry counter exceeded: the peer had no receive posted, again and again",
        _ => "see the book's work completion status reference (book/src/wc_status.md)",
    }
}

/// One trace line for a work completion.
pub fn trace_wc(wc: &ibv_wc) {
    let opcode = names::wc_opcode_name(wc.opcode());
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

#[cfg(test)]
mod tests {
    use super::*;
    use ibverbs_sys::ibv_wc_status::*;

    fn eth0(operstate: &str, send_err: u64) -> link::Sample {
        link::Sample {
            netdev: Some("eth0".into()),
            operstate: Some(operstate.into()),
            send_err: Some(send_err),
            ..link::Sample::default()
        }
    }

    #[test]
    fn without_evidence_a_status_keeps_its_usual_cause() {
        let quiet = Some((eth0("up", 0), eth0("up", 0)));
        assert_eq!(
            wc_status_cause(IBV_WC_RETRY_EXC_ERR, 0, quiet.clone()),
            "transport retry counter exceeded: the peer never acknowledged (wrong QPN/GID/PSN, or the peer's QP is gone)"
        );
        assert!(wc_status_cause(IBV_WC_LOC_QP_OP_ERR, 0, None).ends_with("whose lkey names no MR)"));
        assert!(
            wc_status_cause(IBV_WC_WR_FLUSH_ERR, 3, quiet).starts_with("flushed: this QP went to the error state (an")
        );
    }

    #[test]
    fn a_link_that_is_down_comes_first_and_the_history_shapes_the_rest() {
        let text = wc_status_cause(IBV_WC_LOC_QP_OP_ERR, 343, Some((eth0("up", 0), eth0("down", 0))));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with("What fits, the most likely first:"), "{text}");
        assert!(lines[1].starts_with("1. the link is down: eth0 is down (operstate down)"), "{text}");
        assert!(lines[2].starts_with("2. a work request unlike the 343 of its kind"), "{text}");
        assert_eq!(lines.len(), 3, "{text}");
    }

    #[test]
    fn packets_the_interface_refused_are_counted_since_the_device_was_opened() {
        let text = wc_status_cause(IBV_WC_WR_FLUSH_ERR, 0, Some((eth0("up", 5), eth0("up", 6))));
        assert!(text.contains("\n1. the device could not hand 1 packet(s) to eth0"), "{text}");
        assert!(text.contains("\n2. an earlier error on it"), "{text}");
    }
}
