//! Stage 12: one shared receive queue (SRQ) for many RC QPs — `ibv_srq_pingpong` — and the
//! first asynchronous event, the SRQ's limit.
//!
//! C reference: rdma-core's `libibverbs/examples/srq_pingpong.c`: `pp_init_ctx` (the SRQ,
//! the QPs created with `.srq`), `pp_post_recv` (`ibv_post_srq_recv`), `pp_connect_ctx`
//! (RTR and RTS for every QP), the exchange of `MAX_QP` addresses, and `main`'s loop, which
//! tells completions apart by `wc.qp_num` (`find_qp`).
//!
//! **Why an SRQ.** In rc_pingpong every QP has its own receive queue, filled with
//! `rx_depth` buffers. A server with a thousand clients would then keep a thousand queues
//! full, though few clients send at once. An SRQ is one pool that all its QPs take from:
//! a message on any QP consumes the pool's next receive. The memory is sized by the
//! traffic, not by the number of connections. A QP created with `init_attr.srq` has no
//! receive queue of its own (`ibv_post_recv` on it fails); its `max_recv_wr` is ignored.
//!
//! **Whose message is it?** Receives are no longer per QP, so a receive completion says
//! which QP the message came on in `wc.qp_num`, and `wc.wr_id` is only what was posted to
//! the pool. srq_pingpong keeps a `pending` mask per QP and finds the QP by its number.
//!
//! **The pool can run dry.** When no receive is left, a SEND arriving on *any* QP is
//! answered with an RNR NAK, exactly as for an empty receive queue. So srq_pingpong refills
//! when at most `num_qp` receives are left: one per QP that may have a message in flight.
//!
//! **The limit and its asynchronous event (beyond the C tool).** Instead of counting, a
//! program can ask the device to say when the pool runs low: `ibv_modify_srq` with
//! `IBV_SRQ_LIMIT` arms a low-water mark, and when fewer receives than that are left the
//! device raises `IBV_EVENT_SRQ_LIMIT_REACHED` — not as a completion (no work request
//! finished) but as an *asynchronous event*, on the context's event file, read with
//! `ibv_get_async_event` and acknowledged with `ibv_ack_async_event`. The same file reports
//! a QP that went to the error state, a port that went down, a CQ that overflowed: every
//! verbs program that runs for long should read it. We arm the limit at `num_qp + 1`, the
//! point where srq_pingpong refills, and read the event after the loop. Nothing of it goes
//! on the wire, so the C tool cannot tell.

use std::rc::Rc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::exchange::Peer;
use crate::role::Role;
use crate::stages::create_qp::{create_cq, init_qp, qp_init_attr, QpOptions};
use crate::stages::modify_qp_rtr::{exchange_dest, local_dest, modify_qp_rtr};
use crate::stages::modify_qp_rts::modify_qp_rts;
use crate::stages::open_device::Device;
use crate::stages::poll_cq::{next_batch, timed, Connected, Counts, PingpongOptions, Stats};
use crate::stages::post_send::{post_recv, post_send, PINGPONG_RECV_WRID, PINGPONG_SEND_WRID};
use crate::trace;
use crate::verbs::{self, ibv_mtu, ibv_send_flags, CompChannel, Cq, Mr, Pd, Qp, Srq, Watchdog, IBV_SEND_SIGNALED};
use crate::wire::SrqDests;

/// The SRQ, its QPs, and the CQ (and, with `-e`, channel) they all complete on.
pub struct SrqQueues {
    /// The QPs, in the order of the exchange: our QP *i* talks to the peer's QP *i*.
    /// Declared first so they are destroyed before the SRQ they take from.
    pub qps: Vec<Qp>,
    /// The one pool of receives.
    pub srq: Rc<Srq>,
    /// The CQ every QP's sends and receives complete on.
    pub cq: Rc<Cq>,
    /// The completion channel, with `-e`.
    pub channel: Option<Rc<CompChannel>>,
    /// `IBV_SEND_SIGNALED`, plus `IBV_SEND_INLINE` when a message fits inline.
    pub send_flags: ibv_send_flags,
}

// ANCHOR: stage
/// `pp_init_ctx`'s queues: a CQ of `rx_depth + num_qp` entries, an SRQ of `rx_depth`
/// receives, and `num_qp` RC QPs on both, each moved to INIT. The QPs are asked for no
/// receive queue: their receives come from the SRQ.
pub fn create_srq_qps(
    dev: &Device,
    pd: &Rc<Pd>,
    num_qp: u32,
    rx_depth: u32,
    size: u32,
    use_event: bool,
) -> Result<SrqQueues> {
    let opts = QpOptions { rx_depth: 0, cqe: rx_depth + num_qp, ..QpOptions::pingpong(size, rx_depth, use_event) };
    let (channel, cq) = create_cq(&dev.ctx, opts)?;
    // ANCHOR: hole_create_srq HOLE(Rc<Srq>): one pool of rx_depth receives, one scatter entry each, in the PD (ibv_create_srq)
    let srq = Srq::create(pd, rx_depth, 1)?;
    // ANCHOR_END: hole_create_srq
    let mut qps = Vec::new();
    let mut send_flags = IBV_SEND_SIGNALED;
    for _ in 0..num_qp {
        // ANCHOR: hole_qp_on_srq HOLE(Qp): an RC QP on the CQ whose receives come from the SRQ (ibv_create_qp with init_attr.srq)
        let qp = Qp::create_on_srq(pd, &cq, &srq, qp_init_attr(&cq, opts))?;
        // ANCHOR_END: hole_qp_on_srq
        send_flags = init_qp(dev, &qp, opts)?;
        qps.push(qp);
    }
    Ok(SrqQueues { qps, srq, cq, channel, send_flags })
}

/// Before the exchange: fill the SRQ (`pp_post_recv(ctx, ctx->rx_depth)`), arm its limit
/// at `num_qp + 1` (ours, see the module doc) and, with `-e`, arm the CQ.
pub fn prepare_srq(q: &SrqQueues, mr: &Mr, size: u32, rx_depth: u32) -> Result<()> {
    post_recv(&*q.srq, mr, size, rx_depth)?;
    let limit = limit(q);
    // ANCHOR: hole_arm_limit HOLE: ask the device for IBV_EVENT_SRQ_LIMIT_REACHED once fewer than `limit` receives are left in the SRQ (ibv_modify_srq, IBV_SRQ_LIMIT)
    q.srq.arm_limit(limit)?;
    // ANCHOR_END: hole_arm_limit
    trace::event("ibv_modify_srq").kv("attr_mask", "IBV_SRQ_LIMIT").kv("srq_limit", limit).emit();
    if q.channel.is_some() {
        q.cq.req_notify(false)?;
        trace::event("ibv_req_notify_cq").kv("solicited_only", 0).emit();
    }
    Ok(())
}

/// The SRQ limit we arm: one more than srq_pingpong's refill point, so the event says
/// "at most `num_qp` receives left", the moment the C tool refills.
fn limit(q: &SrqQueues) -> u32 {
    q.qps.len() as u32 + 1
}

/// `pp_connect_ctx` inside srq_pingpong's exchange: our `num_qp` addresses against the
/// peer's, then RTR and RTS for each QP towards the peer's QP of the same index (the
/// server between reading and replying, the client after the exchange, as in
/// [`crate::stages::modify_qp_rts::connect`]). Returns the peer's addresses.
pub fn connect_srq(q: &SrqQueues, dev: &Device, peer: &Peer, mtu: ibv_mtu, sl: u8) -> Result<SrqDests> {
    connect_srq_with(q, dev, peer, mtu, sl, modify_qp_rts)
}

/// [`connect_srq`] with `rts` moving each QP to RTS from the PSN we announced: stage 06's
/// [`modify_qp_rts`] for the step, other RTS attributes for a `--break` case.
pub fn connect_srq_with(
    q: &SrqQueues,
    dev: &Device,
    peer: &Peer,
    mtu: ibv_mtu,
    sl: u8,
    rts: impl Fn(&Qp, u32) -> Result<()>,
) -> Result<SrqDests> {
    let local = SrqDests { dests: q.qps.iter().map(|qp| local_dest(dev, qp)).collect() };
    let exchange = exchange_dest(peer, &local)?;
    let remote = &exchange.remote().dests;
    if remote.len() != q.qps.len() {
        return Err(Error::new("the address exchange")
            .cause(format!(
                "the peer has {} QPs and we have {}: srq_pingpong connects QP i to the peer's QP i, \
                 so both sides need the same number",
                remote.len(),
                q.qps.len()
            ))
            .fix("run both sides with the same -q"));
    }
    for ((qp, ours), theirs) in q.qps.iter().zip(&local.dests).zip(remote) {
        modify_qp_rtr(qp, dev, theirs, mtu, sl)?;
        rts(qp, ours.psn)?;
    }
    exchange.finish()
}

/// The timed loop (`main`'s `while (rcnt < iters || scnt < iters)`) around
/// `srq_exchange`, then the SRQ limit's event, read and acknowledged.
pub fn srq_pingpong(role: Role, q: &SrqQueues, dev: &Device, mr: &mut Mr, opts: PingpongOptions) -> Result<Stats> {
    let client = role == Role::Client;
    // The client starts one SEND on every QP.
    let first = |mr: &Mr| q.qps.iter().try_for_each(|qp| post_send(qp, mr, opts.size, q.send_flags));
    let looped = |mr: &Mr, dog: &Watchdog, n: &mut Counts| srq_exchange(client, q, mr, opts, dog, n);
    let stats = timed(role, &q.cq, q.channel.is_some(), mr, opts, &Connected, first, looped)?;
    srq_limit_event(q, dev)?;
    Ok(stats)
}

// ANCHOR: loop
/// srq_pingpong's loop: rc_pingpong's, with a `pending` mask per QP found by `wc.qp_num`,
/// and one pool of receives refilled when at most `num_qp` are left. As in the C tool,
/// `iters` counts messages over all QPs, not per QP.
fn srq_exchange(
    client: bool,
    q: &SrqQueues,
    mr: &Mr,
    opts: PingpongOptions,
    dog: &Watchdog,
    n: &mut Counts,
) -> Result<()> {
    let num_qp = q.qps.len() as u32;
    let mut routs = opts.rx_depth;
    let mut wc = vec![verbs::WC_ZERO; (opts.rx_depth + num_qp) as usize];
    let first = if client { PINGPONG_RECV_WRID | PINGPONG_SEND_WRID } else { PINGPONG_RECV_WRID };
    let mut pending = vec![first; q.qps.len()];

    while n.rcnt < opts.iters || n.scnt < opts.iters {
        let ne = next_batch(&q.cq, q.channel.as_deref(), &mut wc, dog, n)?;
        for wc in &wc[..ne] {
            // ANCHOR: hole_find_qp HOLE(usize): which of our QPs this completion is for: the index of the QP whose number is wc.qp_num (find_qp)
            let i = q.qps.iter().position(|qp| qp.qp_num() == wc.qp_num).ok_or_else(|| unknown_qpn(wc.qp_num))?;
            // ANCHOR_END: hole_find_qp
            match wc.wr_id() {
                PINGPONG_SEND_WRID => n.scnt += 1,
                PINGPONG_RECV_WRID => {
                    routs -= 1;
                    // ANCHOR: hole_srq_refill HOLE: the pool is shared: refill it (back to rx_depth) once at most one receive per QP is left
                    if routs <= num_qp {
                        post_recv(&*q.srq, mr, opts.size, opts.rx_depth - routs)?;
                        routs = opts.rx_depth;
                    }
                    // ANCHOR_END: hole_srq_refill
                    n.rcnt += 1;
                }
                other => return Err(Error::new(format!("completion for unknown wr_id {other}"))),
            }
            pending[i] &= !wc.wr_id();
            if n.scnt < opts.iters && pending[i] == 0 {
                post_send(&q.qps[i], mr, opts.size, q.send_flags)?;
                pending[i] = PINGPONG_RECV_WRID | PINGPONG_SEND_WRID;
            }
        }
    }
    Ok(())
}
// ANCHOR_END: loop

// ANCHOR: event
/// After the loop: the SRQ limit's event, if the pool ran below the limit. On rxe it is
/// queued before the completion of the receive that crossed the limit (`get_srq_wqe` in
/// `rxe_resp.c` raises it as it takes the receive), so by now it is there or never came (a
/// run too short to use `rx_depth - num_qp` receives); we do not wait. The verbs do not
/// order events against completions: on another device this could miss a late event.
fn srq_limit_event(q: &SrqQueues, dev: &Device) -> Result<()> {
    // ANCHOR: hole_async_event HOLE(Option<verbs::AsyncEvent>): the device's next asynchronous event, if one is already there (ibv_get_async_event on dev.ctx, waiting 0 s)
    let event = dev.ctx.get_async_event(Duration::ZERO)?;
    // ANCHOR_END: hole_async_event
    let Some(event) = event else {
        trace::event("ibv_get_async_event").kv("event_type", "none").kv("srq_limit", "not reached").emit();
        return Ok(());
    };
    trace::event("ibv_get_async_event").kv("event_type", event.type_name()).emit();
    if !event.is_limit_of(&q.srq) {
        return Err(Error::new("ibv_get_async_event").cause(format!(
            "the device reported {}: not the SRQ limit this program armed, but something gone \
             wrong with one of its objects",
            event.type_name()
        )));
    }
    // The device disarmed the limit as it raised the event: it reads 0 until re-armed.
    let srq_limit = q.srq.query()?.srq_limit;
    // Until acknowledged, ibv_destroy_srq would wait for it forever. (Dropping the event
    // would ack it too: this says when.)
    event.ack();
    trace::event("ibv_ack_async_event").kv("srq_limit_now", srq_limit).emit();
    Ok(())
}
// ANCHOR_END: event
// ANCHOR_END: stage

#[cold]
fn unknown_qpn(qpn: u32) -> Error {
    Error::new(format!("a completion for QPN 0x{qpn:06x}")).cause("it is none of our QPs (find_qp found nothing)")
}
