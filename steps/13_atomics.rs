//! Step 13: atomics — FETCH_AND_ADD and COMPARE_AND_SWAP on a 64-bit word in the peer's
//! memory, with perftest's handshake.
//!
//! New: stage 13, [`rdma_dissect::stages::atomics`]. The client changes the server's word
//! `-n` times, one atomic at a time, and checks the original values they return; the
//! server checks what they left. Both speak `ib_atomic_lat`'s TCP handshake, so either
//! side may be Debian's `ib_atomic_lat` (perftest), with the same `-A` and `-n`.

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::cli::AtomicArgs;
use rdma_dissect::error;
use rdma_dissect::role::Role;
use rdma_dissect::stages::atomics::{
    check_atomics, local_keys, perftest_handshake, qp_options, run_atomics, verify_word, zero_word,
};
use rdma_dissect::stages::create_qp::create_qp;
use rdma_dissect::stages::modify_qp_rtr::modify_qp_rtr;
use rdma_dissect::stages::modify_qp_rts::modify_qp_rts;
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::{ibv_access_flags, IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_ATOMIC};

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::PingpongArgs;
const CASES: &[Case<Args>] = &breakit::atomics::CASES;
const ABOUT: &str = "Step 13: atomics on a word in the server's memory (ib_atomic_lat's handshake: either side may be perftest's ib_atomic_lat)";

// ANCHOR: main
fn main() -> std::process::ExitCode {
    let Cli { args, own: AtomicArgs { atomic }, brk } =
        Cli::<Args, AtomicArgs>::parse(ABOUT, env!("CARGO_BIN_NAME"), CASES);
    if let Some(choice) = brk {
        return breakit::main(choice, CASES, &args);
    }
    let role = args.role();
    error::main(|| {
        // ANCHOR: new_access
        // Only the target's word is changed from afar: only it grants remote atomics, on
        // its MR (the rkey) and on its QP.
        let remote_atomic = match role {
            Role::Server => IBV_ACCESS_REMOTE_ATOMIC,
            Role::Client => ibv_access_flags(0),
        };
        // ANCHOR_END: new_access
        let dev = open_device(&args.device.choice())?;
        let pd = alloc_pd(&dev.ctx)?;
        let size = args.buffer.size;
        let mut mr = reg_mr(&pd, size as usize, IBV_ACCESS_LOCAL_WRITE | remote_atomic)?;
        let q = create_qp(&dev, &pd, qp_options(size, remote_atomic))?;
        // ANCHOR: new
        check_atomics(&dev, size)?;
        if role == Role::Server {
            zero_word(&mut mr);
        }
        let local = local_keys(&dev, &q.qp, &mr);
        let mut handshake = perftest_handshake(&args.peer(), &local, args.mtu.to_ibv())?;
        modify_qp_rtr(&q.qp, &dev, &handshake.dest(), handshake.mtu, args.sl)?;
        modify_qp_rts(&q.qp, local.psn)?;
        handshake.ready(&local)?;
        match role {
            Role::Client => {
                run_atomics(&q, &mr, &handshake.remote, atomic, args.iters, args.timeout())?;
                handshake.close(&local)?;
            }
            Role::Server => {
                handshake.close(&local)?;
                verify_word(&mr, atomic, args.iters)?;
            }
        }
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main
