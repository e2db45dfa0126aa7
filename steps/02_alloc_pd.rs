//! Step 02: allocate a protection domain on the open device.
//!
//! New: stage 02, [`rdma_dissect::stages::alloc_pd`].

use clap::Parser;
use rdma_dissect::cli::{self, OpenArgs};
use rdma_dissect::error;
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device};

/// Step 02 of ibv_rc_pingpong: open a device and allocate a protection domain.
#[derive(Parser)]
#[command(after_help = cli::one_terminal_help(env!("CARGO_BIN_NAME")))]
struct Cli {
    #[command(flatten)]
    args: OpenArgs,
}

// ANCHOR: main
fn main() -> std::process::ExitCode {
    let Cli { args } = Cli::parse();
    error::main(|| {
        let dev = open_device(&args.device.choice())?;
        // ANCHOR: new
        let _pd = alloc_pd(&dev)?;
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main
