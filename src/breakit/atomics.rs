//! Step 13's mistakes: what the target's adapter checks before it touches the word — its
//! alignment, the MR's permission, and a responder resource to serve the atomic with.

use super::{Case, Stack};
use crate::cli::PingpongArgs;
use crate::error::Result;
use crate::role::Role;
use crate::stages::atomics::{
    local_keys, perftest_handshake, qp_options, run_atomics, verify_word, zero_word, Atomic, Handshake,
};
use crate::stages::modify_qp_rtr::{rtr_attr, RTR_MASK};
use crate::stages::modify_qp_rts::modify_qp_rts;
use crate::verbs::{ibv_access_flags, ibv_qp_attr, IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_ATOMIC};
use crate::wire::perftest::Keys;

/// The cases of `13_atomics --break`.
pub static CASES: [Case<PingpongArgs>; 3] = [
    Case {
        name: "unaligned-target",
        summary: "the client aims its FETCH_AND_ADD 4 bytes into the server's word",
        by: Some(Role::Client),
        rule: "an atomic works on one naturally aligned 64-bit word: remote_addr must be a\n\
               multiple of 8. rxe's library refuses any other address at the door:\n\
               ibv_post_send returns EINVAL and nothing reaches the wire\n\
               (providers/rxe/rxe.c, validate_send_wr). Were it sent, the target would NAK\n\
               it as an invalid request (rxe's responder checks too)",
        code: "src/breakit/atomics.rs unaligned_target: wr.atomic.remote_addr = the server's\n\
               vaddr + 4; the correct address is remote.vaddr (src/stages/atomics.rs post_atomic)",
        fix: "aim at an 8-byte aligned address: the start of a buffer the allocator aligned",
        run: unaligned_target,
    },
    Case {
        name: "mr-without-remote-atomic",
        summary: "the server registers its word without IBV_ACCESS_REMOTE_ATOMIC",
        by: Some(Role::Server),
        rule: "an atomic needs the target MR's permission, granted at ibv_reg_mr with\n\
               IBV_ACCESS_REMOTE_ATOMIC (remote write is not enough, nor is the QP's own\n\
               permission): without it the target's device NAKs the atomic with a remote\n\
               access error",
        code: "src/breakit/atomics.rs: the server's reg_mr access is LOCAL_WRITE only; the\n\
               correct flags are in steps/13_atomics.rs (new_access)",
        fix: "register the target with IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC",
        run: mr_without_remote_atomic,
    },
    Case {
        name: "no-responder-resources",
        summary: "the server moves its QP to RTR with max_dest_rd_atomic = 0",
        by: Some(Role::Server),
        rule: "the target serves an RDMA READ or an atomic from a responder resource, and\n\
               max_dest_rd_atomic (set at INIT->RTR) is how many it has: with 0 it can serve\n\
               none, and every atomic that arrives is an invalid request (it NAKs it)",
        code: "src/breakit/atomics.rs: the server's RTR attributes have max_dest_rd_atomic = 0;\n\
               stage 05's value is in src/stages/modify_qp_rtr.rs rtr_attr",
        fix: "give max_dest_rd_atomic at least 1 (and at least the peer's max_rd_atomic to keep\n\
              its atomics in flight)",
        run: no_responder_resources,
    },
];

/// What a case changes in step 13's flow.
struct Mistake {
    /// The server's MR access besides LOCAL_WRITE.
    server_access: ibv_access_flags,
    /// The server's `max_dest_rd_atomic` at RTR.
    dest_rd_atomic: u8,
    /// How far past the server's word the client aims.
    offset: u64,
}

const RIGHT: Mistake = Mistake { server_access: IBV_ACCESS_REMOTE_ATOMIC, dest_rd_atomic: 1, offset: 0 };

/// Step 13's flow, FETCH_AND_ADD, with `mistake` made.
fn flow_with(args: &PingpongArgs, mistake: Mistake) -> Result<()> {
    let role = args.role();
    let (mr_access, qp_access) = match role {
        Role::Server => (IBV_ACCESS_LOCAL_WRITE | mistake.server_access, IBV_ACCESS_REMOTE_ATOMIC),
        Role::Client => (IBV_ACCESS_LOCAL_WRITE, ibv_access_flags(0)),
    };
    let size = args.buffer.size;
    let mut s = Stack::new(&args.device, size, mr_access, qp_options(size, qp_access))?;
    if role == Role::Server {
        zero_word(&mut s.mr);
    }
    let local = local_keys(&s.dev, &s.q.qp, &s.mr);
    let mut hs: Handshake = perftest_handshake(&args.peer(), &local, args.mtu.to_ibv())?;
    let dest_rd_atomic = if role == Role::Server { mistake.dest_rd_atomic } else { 1 };
    let attr = ibv_qp_attr { max_dest_rd_atomic: dest_rd_atomic, ..rtr_attr(&s.dev, &hs.dest(), hs.mtu, args.sl) };
    s.q.qp.modify(&attr, RTR_MASK)?;
    modify_qp_rts(&s.q.qp, local.psn)?;
    hs.ready(&local)?;
    match role {
        Role::Client => {
            let target = Keys { vaddr: hs.remote.vaddr + mistake.offset, ..hs.remote };
            run_atomics(&s.q, &s.mr, &target, Atomic::FetchAndAdd, args.iters, args.timeout())?;
            hs.close(&local)
        }
        Role::Server => {
            hs.close(&local)?;
            verify_word(&s.mr, Atomic::FetchAndAdd, args.iters)
        }
    }
}

fn unaligned_target(args: &PingpongArgs) -> Result<()> {
    flow_with(args, Mistake { offset: 4, ..RIGHT })
}

fn mr_without_remote_atomic(args: &PingpongArgs) -> Result<()> {
    flow_with(args, Mistake { server_access: ibv_access_flags(0), ..RIGHT })
}

fn no_responder_resources(args: &PingpongArgs) -> Result<()> {
    flow_with(args, Mistake { dest_rd_atomic: 0, ..RIGHT })
}
