//! Step 12: `ibv_srq_pingpong` — many RC QPs sharing one receive queue, and the SRQ limit's
//! asynchronous event.
//!
//! New: stage 12, [`rdma_dissect::stages::srq_pingpong`]: one SRQ and `-q` QPs on it
//! instead of 08's one QP, srq_pingpong's exchange of one address per QP, its loop, and
//! the `IBV_EVENT_SRQ_LIMIT_REACHED` event read after it.

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::cli::SrqArgs;
use rdma_dissect::error;
use rdma_dissect::stages::poll_cq::{print_stats, PingpongOptions};
use rdma_dissect::stages::srq_pingpong::{connect_srq, create_srq_qps, prepare_srq, srq_pingpong};
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::IBV_ACCESS_LOCAL_WRITE;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::PingpongArgs;
const CASES: &[Case<Args>] = &breakit::srq_pingpong::CASES;
const ABOUT: &str = "Step 12 of ibv_srq_pingpong: -q RC QPs sharing one SRQ, and the SRQ limit's async event (speaks ibv_srq_pingpong's exchange)";

// ANCHOR: main
fn main() -> std::process::ExitCode {
    let Cli { args, own: SrqArgs { num_qp }, brk } = Cli::<Args, SrqArgs>::parse(ABOUT, env!("CARGO_BIN_NAME"), CASES);
    if let Some(choice) = brk {
        return breakit::main(choice, CASES, &args);
    }
    error::main(|| {
        SrqArgs { num_qp }.check(args.queue.rx_depth)?;
        let dev = open_device(&args.device.choice())?;
        let pd = alloc_pd(&dev.ctx)?;
        let size = args.buffer.size;
        let mut mr = reg_mr(&pd, size as usize, IBV_ACCESS_LOCAL_WRITE)?;
        let opts = PingpongOptions {
            size,
            rx_depth: args.queue.rx_depth,
            iters: args.iters,
            chk: args.chk,
            timeout: args.timeout(),
        };
        // ANCHOR: new
        let q = create_srq_qps(&dev, &pd, num_qp, args.queue.rx_depth, size, args.queue.events)?;
        prepare_srq(&q, &mr, size, args.queue.rx_depth)?;
        connect_srq(&q, &dev, &args.peer(), args.mtu.to_ibv(), args.sl)?;
        let stats = srq_pingpong(args.role(), &q, &dev, &mut mr, opts)?;
        // ANCHOR_END: new
        print_stats(&stats);
        Ok(())
    })
}
// ANCHOR_END: main
