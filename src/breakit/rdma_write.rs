//! Step 09's mistakes: the permissions and addresses of an RDMA WRITE.

use super::{Case, Side, Stack};
use crate::cli::PingpongArgs;
use crate::error::Result;
use crate::exchange::Role;
use crate::stages::create_qp::QpOptions;
use crate::stages::modify_qp_rtr::{exchange_dest, modify_qp_rtr};
use crate::stages::modify_qp_rts::modify_qp_rts;
use crate::stages::rdma_write::{
    await_notice_and_verify, local_rdma_dest, post_notice_recv, write_and_notify, TX_DEPTH,
};
use crate::verbs::{ibv_access_flags, IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE};
use crate::wire::RdmaDest;

/// The cases of `09_rdma_write --break`.
pub static CASES: [Case<PingpongArgs>; 4] = [
    Case {
        name: "mr-without-remote-write",
        summary: "the server registers its buffer without IBV_ACCESS_REMOTE_WRITE",
        side: Side::Server,
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
        side: Side::Server,
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
        side: Side::Client,
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
        side: Side::Client,
        rule: "an rkey grants access to [addr, addr + length) of its MR and nothing else: a write\n\
               whose range runs past the end is refused (remote access error). What the target\n\
               buffer then holds is undefined by the spec; rxe checks the whole range before it\n\
               places a byte, so here none of it lands",
        code: "src/breakit/rdma_write.rs write_past_end: remote_addr = addr + size / 2; the correct\n\
               address is remote.addr (src/stages/rdma_write.rs rdma_write)",
        fix: "keep remote_addr + length within the range the target registered",
        run: write_past_end,
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
    let size = args.buffer.size;
    let role = args.role();
    let (mr_access, qp_access) = match role {
        Role::Server => (IBV_ACCESS_LOCAL_WRITE | server_mr_access, server_qp_access),
        Role::Client { .. } => (IBV_ACCESS_LOCAL_WRITE, ibv_access_flags(0)),
    };
    let opts = QpOptions {
        rx_depth: 1,
        tx_depth: TX_DEPTH,
        cqe: 1 + TX_DEPTH,
        size,
        use_event: false,
        access: qp_access,
    };
    let mut s = Stack::new(&args.device, size, mr_access, opts)?;
    if role == Role::Server {
        post_notice_recv(&s.q.qp, &s.mr)?;
    }
    let local = local_rdma_dest(&s.dev, &s.q.qp, &s.mr);
    let exchange = exchange_dest(&args.peer(), &local)?;
    modify_qp_rtr(&s.q.qp, &s.dev, &exchange.remote().dest, args.mtu.to_ibv(), args.sl)?;
    modify_qp_rts(&s.q.qp, local.dest.psn)?;
    let remote = exchange.finish()?;
    match role {
        Role::Client { .. } => {
            let remote = target(remote, s.mr.lkey());
            write_and_notify(&s.q, &mut s.mr, size, &remote, args.timeout())
        }
        Role::Server => await_notice_and_verify(&s.q, &s.mr, size, args.timeout()),
    }
}

fn mr_without_remote_write(args: &PingpongArgs) -> Result<()> {
    write_with(args, ibv_access_flags(0), IBV_ACCESS_REMOTE_WRITE, |remote, _| remote)
}

fn qp_without_remote_write(args: &PingpongArgs) -> Result<()> {
    write_with(args, IBV_ACCESS_REMOTE_WRITE, ibv_access_flags(0), |remote, _| remote)
}

fn wrong_rkey(args: &PingpongArgs) -> Result<()> {
    write_with(args, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_WRITE, |remote, own| RdmaDest {
        rkey: own,
        ..remote
    })
}

fn write_past_end(args: &PingpongArgs) -> Result<()> {
    let half = u64::from(args.buffer.size / 2);
    write_with(args, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_WRITE, |remote, _| RdmaDest {
        addr: remote.addr + half,
        ..remote
    })
}
