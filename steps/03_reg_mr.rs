//! Step 03: allocate the message buffer and register it as a memory region.
//!
//! New: stage 03, [`rdma_dissect::stages::reg_mr`].

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::IBV_ACCESS_LOCAL_WRITE;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::MrArgs;
const CASES: &[Case<Args>] = &breakit::reg_mr::CASES;
const ABOUT: &str = "Step 03 of ibv_rc_pingpong: register a -s byte buffer as a memory region";

// ANCHOR: main
fn main() -> std::process::ExitCode {
    let Cli { args, brk, .. } = Cli::<Args>::parse(ABOUT, env!("CARGO_BIN_NAME"), CASES);
    if let Some(choice) = brk {
        return breakit::main(choice, CASES, &args);
    }
    error::main(|| {
        let dev = open_device(&args.device.choice())?;
        let pd = alloc_pd(&dev.ctx)?;
        // ANCHOR: new
        let size = args.buffer.size;
        let _mr = reg_mr(&pd, size as usize, IBV_ACCESS_LOCAL_WRITE)?;
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main
