//! Step 01: find an RDMA device, open it, and look at it — its limits, its port, its GIDs.
//!
//! New: stage 01, [`rdma_dissect::stages::open_device`]. Then the device is closed and the
//! device list freed, as at the end of `ibv_rc_pingpong`.

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::stages::open_device::open_device;
use rdma_dissect::step::Cli;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::OpenArgs;
const CASES: &[Case<Args>] = &[]; // 01's mistakes are flags a student types: each is refused and explained
const ABOUT: &str = "Step 01 of ibv_rc_pingpong: open a device, query it, its port and its GID table";

fn main() -> std::process::ExitCode {
    let Cli { args, brk, .. } = Cli::<Args>::parse(ABOUT, env!("CARGO_BIN_NAME"), CASES);
    if let Some(choice) = brk {
        return breakit::main(choice, CASES, &args);
    }
    error::main(|| {
        let _dev = open_device(&args.device.choice())?;
        Ok(())
    })
}
