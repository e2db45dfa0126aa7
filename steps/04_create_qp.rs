//! Step 04: create the completion queue and an RC queue pair, and move it to INIT.
//!
//! New: stage 04, [`rdma_dissect::stages::create_qp`].

use clap::Parser;
use rdma_dissect::breakit::{self, Case};
use rdma_dissect::cli::StepArgs;
use rdma_dissect::error;
use rdma_dissect::stages::create_qp::{create_qp, QpOptions};
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::verbs::IBV_ACCESS_LOCAL_WRITE;

// The flags this step takes, and the mistakes it can make on purpose with `--break`.
type Args = rdma_dissect::cli::QpArgs;
const CASES: &[Case<Args>] = &breakit::create_qp::CASES;

/// Step 04 of ibv_rc_pingpong: create a CQ and an RC QP, and take the QP RESET→INIT.
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
        let pd = alloc_pd(&dev)?;
        let size = args.buffer.size;
        let _mr = reg_mr(&pd, size as usize, IBV_ACCESS_LOCAL_WRITE)?;
        // ANCHOR: new
        let _q = create_qp(&dev, &pd, QpOptions::pingpong(size, args.queue.rx_depth, args.queue.events))?;
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main
