//! Step 07's mistakes: receives. The server makes them; the client sends as step 07 does.

use super::{Case, Stack};
use crate::cli::PingpongArgs;
use crate::error::Result;
use crate::poll::{
    wait_for,
    Awaited::{Recv, Send},
};
use crate::role::Role;
use crate::stages::create_qp::QpOptions;
use crate::stages::modify_qp_rtr::{exchange_dest, local_dest, modify_qp_rtr};
use crate::stages::modify_qp_rts::{connect, modify_qp_rts, rts_attr, RTS_MASK};
use crate::stages::post_send::{
    post_recv, send_each_way, stamp, trace_post_send, PINGPONG_RECV_WRID, PINGPONG_SEND_WRID,
};
use crate::verbs::{ibv_qp_attr, ibv_send_wr, ibv_sge, Qp, IBV_ACCESS_LOCAL_WRITE, IBV_SEND_INLINE, IBV_WR_SEND};

/// The cases of `07_post_send --break`.
pub static CASES: [Case<PingpongArgs>; 4] = [
    Case {
        name: "no-recv",
        summary: "the server posts no receive; the client retries forever (rnr_retry = 7)",
        by: Some(Role::Server),
        rule: "a SEND needs a receive posted on the peer. Without one the peer answers with an RNR\n\
               (receiver not ready) NAK and the sender retries after min_rnr_timer, up to\n\
               rnr_retry times, and rnr_retry = 7 (rc_pingpong's) means forever: the SEND never\n\
               completes and nothing reports an error. Only a bounded wait (--timeout) ends it",
        code: "src/breakit/post_send.rs: the server skips post_recv; the correct receive is\n\
               post_recv(&q.qp, &mr, size, 1) in steps/07_post_send.rs, before the exchange",
        fix: "post the receive before the peer can send: before the exchange tells it our QPN",
        run: no_recv,
    },
    Case {
        name: "no-recv-rnr-retry",
        summary: "the server posts no receive; the client gives up after one RNR retry (rnr_retry = 1)",
        by: Some(Role::Server),
        rule: "as no-recv, but the client's RTS sets rnr_retry = 1: after one retry the SEND fails\n\
               with IBV_WC_RNR_RETRY_EXC_ERR and the client's QP goes to the error state",
        code: "src/breakit/post_send.rs: the server skips post_recv, the client's RTS takes\n\
               rnr_retry = 1 instead of src/stages/modify_qp_rts.rs rts_attr's 7",
        fix: "post the receive before the exchange; a finite rnr_retry only turns the hang into an error",
        run: no_recv_rnr_retry,
    },
    Case {
        name: "recv-too-small",
        summary: "the server's receive is half the size of the client's message",
        by: Some(Role::Server),
        rule: "an incoming SEND must fit in the receive it consumes (the sum of its scatter\n\
               entries). A larger one fails that receive and puts the responder's QP in the\n\
               error state, and the sender's SEND fails too. The spec's statuses are\n\
               IBV_WC_LOC_LEN_ERR and IBV_WC_REM_INV_REQ_ERR; rxe (Linux 6.1) reports\n\
               IBV_WC_LOC_QP_OP_ERR and IBV_WC_REM_OP_ERR",
        code: "src/breakit/post_send.rs recv_too_small: the server posts sge.length = size / 2;\n\
               the correct length is size, in steps/07_post_send.rs",
        fix: "post receives at least as large as the largest message the peer sends (-s on both sides)",
        run: recv_too_small,
    },
    Case {
        name: "sge-past-mr",
        summary: "the client's SEND gathers from half way into its MR, -s bytes: past its end (our post_send would refuse it)",
        by: Some(Role::Client),
        rule: "every scatter/gather entry must lie inside the MR whose lkey it quotes. The device\n\
               checks that when it reads the buffer, not ibv_post_send: the post succeeds and the\n\
               WR completes with IBV_WC_LOC_PROT_ERR, which puts the QP in the error state (its\n\
               receive is flushed). rxe on Linux 6.12 puts the QP in the error state first and\n\
               then flushes the SEND with the rest: IBV_WC_WR_FLUSH_ERR, the cause unsaid. (A\n\
               wrong lkey is the other local protection error; rxe on Linux 6.1 reports that one\n\
               as IBV_WC_LOC_QP_OP_ERR)",
        code: "src/breakit/post_send.rs sge_past_mr: sge.addr = mr.addr() + size / 2, posted with\n\
               Qp::post_send_unchecked_end; the correct entry is the first size bytes of the MR,\n\
               in src/stages/post_send.rs post_send",
        fix: "keep every entry within the MR it names (addr + length <= the MR's end)",
        run: sge_past_mr,
    },
];

/// Stages 01–04 of step 07, and its receive: on the server `server_recv` bytes long
/// (`None`: no receive at all, the mistake), on the client as step 07 posts it.
fn stack(args: &PingpongArgs, server_recv: Option<u32>) -> Result<Stack> {
    let size = args.buffer.size;
    let opts = QpOptions::pingpong(size, 1, args.queue.events);
    let s = Stack::new(&args.device, size, IBV_ACCESS_LOCAL_WRITE, opts)?;
    let recv = match args.role() {
        Role::Server => server_recv,
        Role::Client => Some(size),
    };
    if let Some(len) = recv {
        post_recv(&s.q.qp, &s.mr, len, 1)?;
    }
    Ok(s)
}

/// [`stack`], connected as the steps connect: stage 06's [`connect`].
fn connected(args: &PingpongArgs, server_recv: Option<u32>) -> Result<Stack> {
    let s = stack(args, server_recv)?;
    let local = local_dest(&s.dev, &s.q.qp);
    connect(&s.q.qp, &s.dev, &args.peer(), &local, args.mtu.to_ibv(), args.sl)?;
    Ok(s)
}

/// [`stack`], connected with the mistake in the client's RTS: `client_rts` (given the PSN
/// it told the server) instead of stage 06. The rest is [`connect`]'s order.
pub(super) fn connected_with_rts(
    args: &PingpongArgs,
    server_recv: Option<u32>,
    client_rts: impl FnOnce(&Qp, u32) -> Result<()>,
) -> Result<Stack> {
    let s = stack(args, server_recv)?;
    let local = local_dest(&s.dev, &s.q.qp);
    let exchange = exchange_dest(&args.peer(), &local)?;
    modify_qp_rtr(&s.q.qp, &s.dev, exchange.remote(), args.mtu.to_ibv(), args.sl)?;
    match args.role() {
        Role::Server => modify_qp_rts(&s.q.qp, local.psn)?,
        Role::Client => client_rts(&s.q.qp, local.psn)?,
    }
    exchange.finish()?;
    Ok(s)
}

/// Step 07's SEND each way, over a connected stack.
pub(super) fn send_each_way_over(args: &PingpongArgs, mut s: Stack) -> Result<()> {
    send_each_way(args.role(), &s.q, &mut s.mr, args.buffer.size, args.timeout())
}

fn no_recv(args: &PingpongArgs) -> Result<()> {
    send_each_way_over(args, connected(args, None)?)
}

fn no_recv_rnr_retry(args: &PingpongArgs) -> Result<()> {
    let rnr_retry_1 = |qp: &Qp, psn| qp.modify(&ibv_qp_attr { rnr_retry: 1, ..rts_attr(psn) }, RTS_MASK);
    send_each_way_over(args, connected_with_rts(args, None, rnr_retry_1)?)
}

fn recv_too_small(args: &PingpongArgs) -> Result<()> {
    send_each_way_over(args, connected(args, Some(args.buffer.size / 2))?)
}

fn sge_past_mr(args: &PingpongArgs) -> Result<()> {
    let size = args.buffer.size;
    let mut s = connected(args, Some(size))?;
    if args.role() == Role::Server {
        // The server runs step 07 unchanged: it waits for a ping that never comes.
        return send_each_way_over(args, s);
    }
    stamp(&mut s.mr, b"ping");
    // stage 07's post_send, with the gather entry starting half way into the MR. Not
    // inline: an inline send is copied by the CPU at post time (post_send_unchecked_end
    // refuses it), and only the device's DMA check is the lesson.
    let list = ibv_sge { addr: s.mr.addr() + u64::from(size / 2), length: size, lkey: s.mr.lkey() };
    let mut wr = ibv_send_wr {
        wr_id: PINGPONG_SEND_WRID,
        opcode: IBV_WR_SEND,
        send_flags: s.q.send_flags.0 & !IBV_SEND_INLINE.0,
        ..Default::default()
    };
    s.q.qp.post_send_unchecked_end(&mut wr, &[list], &s.mr)?;
    trace_post_send(&wr, &list);
    wait_for(&s.q.cq, &[Send(PINGPONG_SEND_WRID), Recv(PINGPONG_RECV_WRID)], args.timeout())
}
