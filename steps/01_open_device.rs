//! Step 01: find an RDMA device, open it, and look at it — its limits, its port, its GIDs.
//!
//! New: stage 01, [`rdma_dissect::stages::open_device`]. Then the device is closed and the
//! device list freed, as at the end of `ibv_rc_pingpong`.

use clap::Parser;
use rdma_dissect::breakit::{self, Case};
use rdma_dissect::cli::StepArgs;
use rdma_dissect::error;
use rdma_dissect::stages::open_device::open_device;

// The flags this step takes, and the mistakes it can make on purpose with `--break`.
type Args = rdma_dissect::cli::OpenArgs;
const CASES: &[Case<Args>] = &[]; // 01's mistakes are flags a student types: each is refused and explained

/// Step 01 of ibv_rc_pingpong: open a device, query it, its port and its GID table.
#[derive(Parser)]
#[command(after_help = Args::after_help(env!("CARGO_BIN_NAME")))]
struct Cli {
    #[command(flatten)]
    args: Args,
    /// Make one of this step's characteristic mistakes on purpose (`--break help` lists them)
    #[arg(long = "break", value_name = "CASE", value_parser = breakit::parser(CASES), hide = CASES.is_empty())]
    brk: Option<breakit::Choice<Args>>,
}

// ANCHOR: main
fn main() -> std::process::ExitCode {
    let Cli { args, brk } = Cli::parse();
    if let Some(choice) = brk { return breakit::main(choice, CASES, &args); }
    error::main(|| {
        // ANCHOR: new
        let _dev = open_device(&args.device.choice())?;
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main
