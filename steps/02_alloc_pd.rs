//! Step 02: allocate a protection domain on the open device.
//!
//! New: stage 02, [`rdma_dissect::stages::alloc_pd`].

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device};
use rdma_dissect::step::Cli;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::OpenArgs;
const CASES: &[Case<Args>] = &[]; // the Rc that every MR and QP holds of its PD rules out 02's mistake
const ABOUT: &str = "Step 02 of ibv_rc_pingpong: open a device and allocate a protection domain";

// ANCHOR: main
fn main() -> std::process::ExitCode {
    let Cli { args, brk, .. } = Cli::<Args>::parse(ABOUT, env!("CARGO_BIN_NAME"), CASES);
    if let Some(choice) = brk {
        return breakit::main(choice, CASES, &args);
    }
    error::main(|| {
        let dev = open_device(&args.device.choice())?;
        // ANCHOR: new
        let _pd = alloc_pd(&dev.ctx)?;
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main
