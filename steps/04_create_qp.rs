//! Step 04: create the completion queue and an RC queue pair, and move it to INIT.
//!
//! New: stage 04, [`rdma_dissect::stages::create_qp`].

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::stages::create_qp::{create_qp, QpOptions};
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::IBV_ACCESS_LOCAL_WRITE;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::QpArgs;
const CASES: &[Case<Args>] = &breakit::create_qp::CASES;
const ABOUT: &str = "Step 04 of ibv_rc_pingpong: create a CQ and an RC QP, and take the QP RESET→INIT";

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
        // ANCHOR: new
        let _q = create_qp(&dev, &pd, QpOptions::pingpong(size, args.queue.rx_depth, args.queue.events))?;
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main
