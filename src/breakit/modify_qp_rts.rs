//! Step 06's mistakes: the RTR→RTS transition. The client makes them; the server runs
//! step 06 unchanged (or, where the failure needs a message, step 07).

use super::post_send::{connected_with_rts, send_each_way_over};
use super::{rts_with_retry_cnt, Case, Stack};
use crate::cli::PingpongArgs;
use crate::error::Result;
use crate::role::Role;
use crate::stages::create_qp::QpOptions;
use crate::stages::modify_qp_rtr::{exchange_dest, local_dest, modify_qp_rtr};
use crate::stages::modify_qp_rts::modify_qp_rts;
use crate::verbs::{Qp, IBV_ACCESS_LOCAL_WRITE};

/// The cases of `06_modify_qp_rts --break`.
pub static CASES: [Case<PingpongArgs>; 2] = [
    Case {
        name: "rts-from-init",
        summary: "move the QP from INIT straight to RTS, skipping RTR",
        by: Some(Role::Client),
        rule: "the QP state machine only allows RESET→INIT→RTR→RTS (man ibv_modify_qp), so\n\
               INIT→RTS is refused with EINVAL. RTR is where an RC QP learns its path: the\n\
               peer's address vector, dest_qp_num and rq_psn. A requester needs that path to\n\
               send anything; RTS only adds the send side's timers and sq_psn",
        code: "src/breakit/modify_qp_rts.rs rts_from_init: modify_qp_rts without modify_qp_rtr;\n\
               the correct order is in steps/06_modify_qp_rts.rs",
        fix: "modify_qp_rtr first, then modify_qp_rts (rc_pingpong's pp_connect_ctx)",
        run: rts_from_init,
    },
    Case {
        name: "wrong-sq-psn",
        summary: "start sending at a PSN one past the one told to the server, then send",
        by: Some(Role::Client),
        rule: "sq_psn must be the PSN the peer was told, which it set as its rq_psn: the responder\n\
               takes only the packet with the PSN it expects. One ahead is out of sequence:\n\
               rxe's responder answers once with a NAK (PSN sequence error) naming the PSN it\n\
               expects, one before anything the sender has outstanding, so the sender drops\n\
               it as outside its window. The sender retransmits after the ACK timeout, gets no\n\
               answer (the NAK is not repeated), and fails with IBV_WC_RETRY_EXC_ERR; the\n\
               receiver sees nothing. (This case's RTS takes retry_cnt = 1: rxe retries\n\
               rc_pingpong's 7 forever)",
        code: "src/breakit/modify_qp_rts.rs wrong_sq_psn: sq_psn = psn + 1; the correct\n\
               call is modify_qp_rts(&q.qp, local.psn) in steps/06_modify_qp_rts.rs",
        fix: "use the same PSN in the exchange and in RTS (rc_pingpong: my_dest.psn)",
        run: wrong_sq_psn,
    },
];

fn rts_from_init(args: &PingpongArgs) -> Result<()> {
    let size = args.buffer.size;
    let opts = QpOptions::pingpong(size, args.queue.rx_depth, args.queue.events);
    let s = Stack::new(&args.device, size, IBV_ACCESS_LOCAL_WRITE, opts)?;
    let local = local_dest(&s.dev, &s.q.qp);
    let exchange = exchange_dest(&args.peer(), &local)?;
    if args.role() == Role::Server {
        modify_qp_rtr(&s.q.qp, &s.dev, exchange.remote(), args.mtu.to_ibv(), args.sl)?;
    }
    modify_qp_rts(&s.q.qp, local.psn)?;
    exchange.finish().map(drop)
}

fn wrong_sq_psn(args: &PingpongArgs) -> Result<()> {
    // The failure needs a message: both sides go on to step 07's SEND each way.
    let wrong_psn = |qp: &Qp, psn| rts_with_retry_cnt(qp, (psn + 1) & crate::wire::MAX_24BIT, 1);
    send_each_way_over(args, connected_with_rts(args, Some(args.buffer.size), wrong_psn)?)
}
