//! Step 01: find an RDMA device, open it, and look at it — its limits, its port, its GIDs.
//!
//! New: stage 01, [`rdma_dissect::stages::open_device`]. Then the device is closed and the
//! device list freed, as at the end of `ibv_rc_pingpong`.

use clap::Parser;
use rdma_dissect::cli::DeviceArgs;
use rdma_dissect::error;
use rdma_dissect::stages::open_device::open_device;

/// Step 01 of ibv_rc_pingpong: open a device, query it, its port and its GID table.
#[derive(Parser)]
#[command(after_help = "Needs an RDMA device. Without one (no RDMA in the kernel), run it in the \
lab VM: lab/run target/debug/01_open_device -g 1")]
struct Cli {
    #[command(flatten)]
    device: DeviceArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    error::main(|| {
        let _dev = open_device(&cli.device.choice())?;
        Ok(())
    })
}
