//! Step 12's mistakes: a shared receive queue that runs dry, and one posted past its size.

use std::rc::Rc;

use super::Case;
use crate::cli::PingpongArgs;
use crate::error::Result;
use crate::poll::{wait_for, Awaited::Recv};
use crate::role::Role;
use crate::stages::modify_qp_rts::{modify_qp_rts, rts_attr, RTS_MASK};
use crate::stages::open_device::{open_device, Device};
use crate::stages::poll_cq::PingpongOptions;
use crate::stages::post_send::{post_recv, PINGPONG_RECV_WRID};
use crate::stages::srq_pingpong::{connect_srq_with, create_srq_qps, prepare_srq, srq_pingpong, SrqQueues};
use crate::stages::{alloc_pd::alloc_pd, reg_mr::reg_mr};
use crate::trace;
use crate::verbs::{ibv_qp_attr, Mr, Pd, Qp, IBV_ACCESS_LOCAL_WRITE};

/// QPs of every case, whatever `-q` says (a case takes rc_pingpong's flags only).
const QPS: u32 = 4;
/// Receives the server of `srq-dry` posts: half as many as there are senders.
const DRY_RECVS: usize = QPS as usize / 2;
/// The client's `rnr_retry` in `srq-dry`: one retry after the first RNR NAK, then the error.
const RNR_RETRY: u8 = 1;

/// The cases of `12_srq_pingpong --break`.
pub static CASES: [Case<PingpongArgs>; 2] = [
    Case {
        name: "srq-dry",
        summary:
            "the server's SRQ holds 2 receives for 4 QPs and is never refilled; the client's RTS takes rnr_retry = 1",
        by: Some(Role::Server),
        rule: "a SEND on any QP of an SRQ consumes one receive from the shared pool; when the pool\n\
               is empty the responder answers with an RNR NAK, as for an empty receive queue. The\n\
               receiver is told nothing. The sender retries after min_rnr_timer, rnr_retry times\n\
               (7, srq_pingpong's, means forever), then fails the SEND with\n\
               IBV_WC_RNR_RETRY_EXC_ERR and its QP goes to the error state",
        code: "src/breakit/srq_pingpong.rs srq_dry: the server posts 2 receives and does not refill;\n\
               the correct pool is rx_depth receives (prepare_srq in src/stages/srq_pingpong.rs),\n\
               refilled when at most num_qp are left (srq_exchange)",
        fix: "keep at least one receive in the SRQ per QP that may have a message in flight, and refill\n\
              before it runs out (srq_pingpong counts; the SRQ limit's event can say when)",
        run: srq_dry,
    },
    Case {
        name: "srq-overfill",
        summary: "post one receive more than the SRQ's max_wr (as ibv_query_srq reports it)",
        by: None,
        rule: "an SRQ holds at most max_wr receives, as ibv_query_srq reports it: the device may\n\
               grant more than asked. rxe (Linux 6.1 and 6.12) makes its ring a power of two\n\
               less one (511 for 500) while ibv_create_srq writes back the 500 asked. Posting\n\
               to a full SRQ fails at once with ENOMEM, and that WR is not posted (*bad_wr\n\
               points at it)",
        code: "src/breakit/srq_pingpong.rs srq_overfill: post_recv of max_wr + 1 receives; the\n\
               correct count is rx_depth, the size asked for, in prepare_srq (src/stages/srq_pingpong.rs)",
        fix: "post at most max_wr receives, and refill only as many as have completed",
        run: srq_overfill,
    },
];

/// Stages 01–03 and stage 12's queues, dropped in reverse order.
struct SrqStack {
    q: SrqQueues,
    mr: Mr,
    _pd: Rc<Pd>,
    dev: Device,
}

fn stack(args: &PingpongArgs) -> Result<SrqStack> {
    let dev = open_device(&args.device.choice())?;
    let pd = alloc_pd(&dev.ctx)?;
    let size = args.buffer.size;
    let mr = reg_mr(&pd, size as usize, IBV_ACCESS_LOCAL_WRITE)?;
    let q = create_srq_qps(&dev, &pd, QPS, args.queue.rx_depth.max(QPS), size, false)?;
    Ok(SrqStack { q, mr, _pd: pd, dev })
}

/// The server fills its SRQ with [`DRY_RECVS`] receives only and waits; the client runs
/// the step's loop with `rnr_retry` [`RNR_RETRY`], so the SENDs that find the pool empty
/// fail.
fn srq_dry(args: &PingpongArgs) -> Result<()> {
    let mut s = stack(args)?;
    let role = args.role();
    let size = args.buffer.size;
    let rx_depth = args.queue.rx_depth.max(QPS);
    match role {
        Role::Server => post_recv(&*s.q.srq, &s.mr, size, DRY_RECVS as u32)?,
        Role::Client => prepare_srq(&s.q, &s.mr, size, rx_depth)?,
    }
    let rts = |qp: &Qp, psn: u32| match role {
        Role::Server => modify_qp_rts(qp, psn),
        Role::Client => qp.modify(&ibv_qp_attr { rnr_retry: RNR_RETRY, ..rts_attr(psn) }, RTS_MASK),
    };
    connect_srq_with(&s.q, &s.dev, &args.peer(), args.mtu.to_ibv(), args.sl, rts)?;
    match role {
        Role::Client => {
            let opts = PingpongOptions { size, rx_depth, iters: args.iters, chk: false, timeout: args.timeout() };
            srq_pingpong(role, &s.q, &s.dev, &mut s.mr, opts)?;
        }
        Role::Server => {
            // The pool's receives are used up by the first messages; no more can come.
            wait_for(&s.q.cq, &[Recv(PINGPONG_RECV_WRID); DRY_RECVS], args.timeout())?;
            trace::line("  the SRQ is empty now, and nothing refills it");
            wait_for(&s.q.cq, &[Recv(PINGPONG_RECV_WRID)], args.timeout())?;
        }
    }
    Ok(())
}

/// Posts one receive more than the SRQ holds; each side does it alone.
fn srq_overfill(args: &PingpongArgs) -> Result<()> {
    let s = stack(args)?;
    let max_wr = s.q.srq.query()?.max_wr;
    trace::event("ibv_query_srq").kv("attr.max_wr", max_wr).emit();
    post_recv(&*s.q.srq, &s.mr, args.buffer.size, max_wr + 1)
}
