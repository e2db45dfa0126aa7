//! Step 01: find an RDMA device, open it, and look at it — its limits, its port, its GIDs.
//!
//! New: stage 01, [`rdma_dissect::stages::open_device`]. Then the device is closed and the
//! device list freed, as at the end of `ibv_rc_pingpong`.

use clap::Parser;
use rdma_dissect::cli::{self, OpenArgs};
use rdma_dissect::error;
use rdma_dissect::stages::open_device::open_device;

/// Step 01 of ibv_rc_pingpong: open a device, query it, its port and its GID table.
#[derive(Parser)]
#[command(after_help = cli::one_terminal_help(env!("CARGO_BIN_NAME")))]
struct Cli {
    #[command(flatten)]
    args: OpenArgs,
}

fn main() -> std::process::ExitCode {
    let Cli { args } = Cli::parse();
    error::main(|| {
        let _dev = open_device(&args.device.choice())?;
        Ok(())
    })
}
