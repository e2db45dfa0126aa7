//! Step 11: ud_pingpong. TODO: what this step adds, in a sentence.
//!
//! New: stage 11, [`rdma_dissect::stages::ud_pingpong`].

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::stages::create_qp::{create_qp, QpOptions};
use rdma_dissect::stages::modify_qp_rtr::local_dest;
use rdma_dissect::stages::modify_qp_rts::connect;
use rdma_dissect::stages::poll_cq::{pingpong, prepare, print_stats, PingpongOptions};
use rdma_dissect::stages::ud_pingpong::ud_pingpong;
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::IBV_ACCESS_LOCAL_WRITE;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::PingpongArgs;
const CASES: &[Case<Args>] = &[];
const ABOUT: &str = "Step 11: ud_pingpong (TODO: what it adds)";

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
        let mut mr = reg_mr(&pd, size as usize, IBV_ACCESS_LOCAL_WRITE)?;
        let q = create_qp(&dev, &pd, QpOptions::pingpong(size, args.queue.rx_depth, args.queue.events))?;
        let opts = PingpongOptions {
            size,
            rx_depth: args.queue.rx_depth,
            iters: args.iters,
            chk: args.chk,
            timeout: args.timeout(),
        };
        prepare(&q, &mr, opts)?;
        let local = local_dest(&dev, &q.qp);
        connect(&q.qp, &dev, &args.peer(), &local, args.mtu.to_ibv(), args.sl)?;
        let stats = pingpong(args.role(), &q, &mut mr, opts)?;
        print_stats(&stats);
        // ANCHOR: new
        ud_pingpong()?;
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main
