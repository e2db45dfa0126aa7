//! Step 06: move the QP RTR→RTS: the connection is up.
//!
//! New: stage 06, [`rdma_dissect::stages::modify_qp_rts`], called right after RTR — on the
//! server before it replies, as `pp_connect_ctx` does both. Its `connect` runs stages 05
//! and 06 in that order; this step and every later one connect their QP with it.

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::stages::create_qp::{create_qp, QpOptions};
use rdma_dissect::stages::modify_qp_rtr::local_dest;
use rdma_dissect::stages::modify_qp_rts::connect;
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::IBV_ACCESS_LOCAL_WRITE;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::PingpongArgs;
const CASES: &[Case<Args>] = &breakit::modify_qp_rts::CASES;
const ABOUT: &str = "Step 06 of ibv_rc_pingpong: connect the QP (INIT→RTR→RTS) with a peer";

// ANCHOR: main
fn main() -> std::process::ExitCode {
    let Cli { args, brk, .. } = Cli::<Args>::parse(ABOUT, env!("CARGO_BIN_NAME"), CASES);
    if let Some(choice) = brk {
        return breakit::main(choice, CASES, &args);
    }
    error::main(|| {
        let dev = open_device(&args.device.choice())?;
        let pd = alloc_pd(&dev.ctx)?;
        let size = args.buffer.size;
        let _mr = reg_mr(&pd, size as usize, IBV_ACCESS_LOCAL_WRITE)?;
        let q = create_qp(&dev, &pd, QpOptions::pingpong(size, args.queue.rx_depth, args.queue.events))?;
        let local = local_dest(&dev, &q.qp);
        // ANCHOR: new
        connect(&q.qp, &dev, &args.peer(), &local, args.mtu.to_ibv(), args.sl)?;
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main
