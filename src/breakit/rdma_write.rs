//! Step 09's mistakes: the permissions and addresses of an RDMA WRITE, and a writer that
//! never asks for a completion.

use std::time::{Duration, Instant};

use super::{Case, Stack};
use crate::cli::PingpongArgs;
use crate::error::{Error, Result};
use crate::poll::check_wcs;
use crate::role::Role;
use crate::stages::create_qp::{QpOptions, Queues};
use crate::stages::modify_qp_rts::connect;
use crate::stages::rdma_write::{
    await_notice_and_verify, fill_pattern, local_rdma_dest, post_notice_recv, rdma_write, write_and_notify, TX_DEPTH,
};
use crate::trace;
use crate::verbs::{
    ibv_access_flags, ibv_send_flags, Mr, IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE, IBV_QPT_RC,
    IBV_SEND_SIGNALED, WC_ZERO,
};
use crate::wire::RdmaDest;

/// The cases of `09_rdma_write --break`.
pub static CASES: [Case<PingpongArgs>; 5] = [
    Case {
        name: "mr-without-remote-write",
        summary: "the server registers its buffer without IBV_ACCESS_REMOTE_WRITE",
        by: Some(Role::Server),
        rule: "an RDMA WRITE needs the target MR's permission, granted at ibv_reg_mr with\n\
               IBV_ACCESS_REMOTE_WRITE: its rkey is then valid for writes. Without it the\n\
               target's device NAKs the write (remote access error) and its QP goes to the\n\
               error state, flushing its posted receive",
        code: "src/breakit/rdma_write.rs: the server's reg_mr access is LOCAL_WRITE only; the\n\
               correct flags are in steps/09_rdma_write.rs (new_access)",
        fix: "register the target buffer with IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE",
        run: mr_without_remote_write,
    },
    Case {
        name: "qp-without-remote-write",
        summary: "the server's QP does not allow remote writes (qp_access_flags = 0)",
        by: Some(Role::Server),
        rule: "remote access is checked twice: the MR must allow it, and so must the QP the\n\
               request arrives on (qp_access_flags, set at INIT). A QP without\n\
               IBV_ACCESS_REMOTE_WRITE rejects every RDMA WRITE, whatever the rkey",
        code: "src/breakit/rdma_write.rs: the server's QpOptions.access is 0; the correct\n\
               access is in steps/09_rdma_write.rs (new_access), used at INIT in src/stages/create_qp.rs",
        fix: "set IBV_ACCESS_REMOTE_WRITE in qp_access_flags at RESET→INIT",
        run: qp_without_remote_write,
    },
    Case {
        name: "wrong-rkey",
        summary: "the client writes with its own MR's lkey instead of the server's rkey",
        by: Some(Role::Client),
        rule: "the rkey names the target MR and proves the right to access it; the target's\n\
               device checks that it belongs to an MR in the PD of the QP the request\n\
               arrived on, with remote write access, covering the range. A key of another\n\
               MR (here: the writer's own local key) fails that check: remote access error",
        code: "src/breakit/rdma_write.rs wrong_rkey: wr.rdma.rkey = mr.lkey(); the correct key is\n\
               remote.rkey, from the exchange (src/stages/rdma_write.rs rdma_write)",
        fix: "use the rkey (and address) the target sent, from this run",
        run: wrong_rkey,
    },
    Case {
        name: "write-past-end",
        summary: "the client writes -s bytes starting half way into the server's buffer",
        by: Some(Role::Client),
        rule: "an rkey grants access to [addr, addr + length) of its MR and nothing else: a write\n\
               whose range runs past the end is refused (remote access error). What the target\n\
               buffer then holds is undefined by the spec; rxe checks the whole range before it\n\
               places a byte, so here none of it lands",
        code: "src/breakit/rdma_write.rs write_past_end: remote_addr = addr + size / 2; the correct\n\
               address is remote.addr (src/stages/rdma_write.rs rdma_write)",
        fix: "keep remote_addr + length within the range the target registered",
        run: write_past_end,
    },
    Case {
        name: "never-signal",
        summary: "the client posts -n RDMA WRITEs, the notice too, none with IBV_SEND_SIGNALED",
        by: Some(Role::Client),
        rule: "a send WR without IBV_SEND_SIGNALED makes no completion when it succeeds, and by\n\
               the spec its send-queue slot is the sender's again only once a later signaled\n\
               WR's completion is polled: a sender that never signals cannot learn that its\n\
               writes are done, and its queue fills after max_send_wr posts (ibv_post_send then\n\
               fails, ENOMEM on most providers). rxe frees the slot of every WR it finishes,\n\
               signaled or not, so its queue fills only when the posts outrun it: on Linux 6.1\n\
               each post runs rxe's requester before it returns, and all -n posts go through;\n\
               on 6.12 a post only schedules rxe's worker, and the queue fills after a few\n\
               hundred. Either way, no completion ever comes",
        code: "src/breakit/rdma_write.rs never_signal: send_flags without IBV_SEND_SIGNALED; the\n\
               correct rule is in src/stages/rdma_write.rs bandwidth (SIGNAL_EVERY)",
        fix: "signal at least one WR in every max_send_wr, and the one whose end you wait for",
        run: never_signal,
    },
];

/// Step 09's flow, with the server's MR and QP access given and the client writing to
/// `target(remote, our lkey)` instead of `remote`.
fn write_with(
    args: &PingpongArgs,
    server_mr_access: ibv_access_flags,
    server_qp_access: ibv_access_flags,
    target: impl FnOnce(RdmaDest, u32) -> RdmaDest,
) -> Result<()> {
    let timeout = args.timeout();
    flow_with(args, server_mr_access, server_qp_access, |q, mr, size, remote| {
        let remote = target(*remote, mr.lkey());
        write_and_notify(q, mr, size, &remote, timeout)
    })
}

/// Step 09's flow, with the server's MR and QP access given, and `client` doing the
/// writer's part once the QP is connected.
fn flow_with(
    args: &PingpongArgs,
    server_mr_access: ibv_access_flags,
    server_qp_access: ibv_access_flags,
    client: impl FnOnce(&Queues, &mut Mr, u32, &RdmaDest) -> Result<()>,
) -> Result<()> {
    let size = args.buffer.size;
    let role = args.role();
    let (mr_access, qp_access) = match role {
        Role::Server => (IBV_ACCESS_LOCAL_WRITE | server_mr_access, server_qp_access),
        Role::Client => (IBV_ACCESS_LOCAL_WRITE, ibv_access_flags(0)),
    };
    let opts = QpOptions {
        rx_depth: 1,
        tx_depth: TX_DEPTH,
        cqe: 1 + TX_DEPTH,
        size,
        use_event: false,
        access: qp_access,
        qp_type: IBV_QPT_RC,
    };
    let mut s = Stack::new(&args.device, size, mr_access, opts)?;
    if role == Role::Server {
        post_notice_recv(&s.q.qp, &s.mr)?;
    }
    let local = local_rdma_dest(&s.dev, &s.q.qp, &s.mr);
    let remote = connect(&s.q.qp, &s.dev, &args.peer(), &local, args.mtu.to_ibv(), args.sl)?;
    match role {
        Role::Client => client(&s.q, &mut s.mr, size, &remote),
        Role::Server => await_notice_and_verify(&s.q, &s.mr, size, args.timeout()),
    }
}

/// The writer posts `-n` writes back to back with no `IBV_SEND_SIGNALED` at all, the
/// notice too, then waits for the notice's completion; or fails at the post that finds the
/// send queue full (see the case's rule).
fn never_signal(args: &PingpongArgs) -> Result<()> {
    let (iters, timeout) = (args.iters, args.timeout());
    flow_with(args, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_WRITE, |q, mr, size, remote| {
        let unsignaled = ibv_send_flags(q.send_flags.0 & !IBV_SEND_SIGNALED.0);
        fill_pattern(mr);
        let mute = trace::mute();
        let mut posted = 0;
        let result: Result<()> = (0..iters).try_for_each(|i| {
            rdma_write(&q.qp, mr, size, remote, (i == iters - 1).then_some(iters), unsignaled)?;
            posted += 1;
            Ok(())
        });
        drop(mute);
        trace::event("ibv_post_send").kv("posted", posted).kv("of", iters).kv("signaled", 0).emit();
        result?;
        // Poll as 09 would for the notice's completion, until --timeout.
        let deadline = Instant::now() + timeout;
        let mut wc = [WC_ZERO; 1];
        while Instant::now() < deadline {
            if q.cq.poll(&mut wc)? > 0 {
                return check_wcs(&q.cq, &wc, |_| 0); // an unsignaled WR that fails still completes
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(Error::new("ibv_poll_cq").cause(format!(
            "no completion within {} s, and none will come: all {iters} writes, the notice\n\
             too, were posted without IBV_SEND_SIGNALED, and a WR that succeeds unsignaled\n\
             makes no completion. The writer cannot tell whether its writes are done",
            timeout.as_secs()
        )))
    })
}

fn mr_without_remote_write(args: &PingpongArgs) -> Result<()> {
    write_with(args, ibv_access_flags(0), IBV_ACCESS_REMOTE_WRITE, |remote, _| remote)
}

fn qp_without_remote_write(args: &PingpongArgs) -> Result<()> {
    write_with(args, IBV_ACCESS_REMOTE_WRITE, ibv_access_flags(0), |remote, _| remote)
}

fn wrong_rkey(args: &PingpongArgs) -> Result<()> {
    write_with(args, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_WRITE, |remote, own| RdmaDest { rkey: own, ..remote })
}

fn write_past_end(args: &PingpongArgs) -> Result<()> {
    let half = u64::from(args.buffer.size / 2);
    write_with(args, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_WRITE, |remote, _| RdmaDest {
        addr: remote.addr + half,
        ..remote
    })
}
