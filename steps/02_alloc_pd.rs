//! Step 02: allocate a protection domain on the open device.
//!
//! New: stage 02, [`rdma_dissect::stages::alloc_pd`].

use clap::Parser;
use rdma_dissect::breakit::{self, Case};
use rdma_dissect::cli::StepArgs;
use rdma_dissect::error;
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device};

// The flags this step takes, and the mistakes it can make on purpose with `--break`.
type Args = rdma_dissect::cli::OpenArgs;
const CASES: &[Case<Args>] = &[]; // the Rc that every MR and QP holds of its PD rules out 02's mistake

/// Step 02 of ibv_rc_pingpong: open a device and allocate a protection domain.
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
        let dev = open_device(&args.device.choice())?;
        // ANCHOR: new
        let _pd = alloc_pd(&dev)?;
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main
