//! Step 13: atomics. TODO: what this step adds, in a sentence.
//!
//! New: stage 13, [`rdma_dissect::stages::atomics`].

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::cli::BwArgs;
use rdma_dissect::error;
use rdma_dissect::role::Role;
use rdma_dissect::stages::atomics::atomics;
use rdma_dissect::stages::create_qp::{create_qp, QpOptions};
use rdma_dissect::stages::modify_qp_rts::connect;
use rdma_dissect::stages::rdma_write::{
    await_notice_and_verify, bandwidth, local_rdma_dest, post_notice_recv, write_and_notify, TX_DEPTH,
};
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::{ibv_access_flags, IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE, IBV_QPT_RC};

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::PingpongArgs;
const CASES: &[Case<Args>] = &[];
const ABOUT: &str = "Step 13: atomics (TODO: what it adds)";

// ANCHOR: main
fn main() -> std::process::ExitCode {
    let Cli { args, own: BwArgs { bw }, brk } = Cli::<Args, BwArgs>::parse(ABOUT, env!("CARGO_BIN_NAME"), CASES);
    if let Some(choice) = brk {
        return breakit::main(choice, CASES, &args);
    }
    let role = args.role();
    error::main(|| {
        // Only the target's memory is written from afar: only it grants remote write, on
        // its MR (the rkey) and on its QP.
        let remote_write = match role {
            Role::Server => IBV_ACCESS_REMOTE_WRITE,
            Role::Client => ibv_access_flags(0),
        };
        let dev = open_device(&args.device.choice())?;
        let pd = alloc_pd(&dev.ctx)?;
        let size = args.buffer.size;
        let mut mr = reg_mr(&pd, size as usize, IBV_ACCESS_LOCAL_WRITE | remote_write)?;
        let q = create_qp(
            &dev,
            &pd,
            QpOptions {
                rx_depth: 1,
                tx_depth: TX_DEPTH,
                cqe: 1 + TX_DEPTH,
                size,
                use_event: false,
                access: remote_write,
                qp_type: IBV_QPT_RC,
            },
        )?;
        if role == Role::Server {
            post_notice_recv(&q.qp, &mr)?;
        }
        let local = local_rdma_dest(&dev, &q.qp, &mr);
        let remote = connect(&q.qp, &dev, &args.peer(), &local, args.mtu.to_ibv(), args.sl)?;
        match role {
            Role::Client if bw => bandwidth(&q, &mut mr, size, args.iters, &remote)?,
            Role::Client => write_and_notify(&q, &mut mr, size, &remote, args.timeout())?,
            Role::Server => await_notice_and_verify(&q, &mr, size, args.timeout())?,
        }
        // ANCHOR: new
        atomics()?;
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main
