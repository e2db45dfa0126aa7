//! Stage 09: one-sided RDMA WRITE into the peer's memory, and WRITE WITH IMMEDIATE to tell
//! it so.
//!
//! C reference: none in `rc_pingpong.c`, which only SENDs. The pattern is the one of
//! perftest's `ib_write_bw` and of the rdma.c example on the ZHAW blog: exchange the
//! target buffer's **rkey** and **address** along with the QP address (our extension of
//! the message, [`crate::wire::RdmaDest`] — the C tool cannot be the peer here), then post
//! `IBV_WR_RDMA_WRITE` work requests that name them in `wr.wr.rdma`.
//!
//! **One-sided.** An RDMA WRITE lands in the target's memory without the target's CPU
//! doing anything: no receive is consumed and no completion appears on its side. That is
//! why the target must grant the right twice — `IBV_ACCESS_REMOTE_WRITE` on its MR (the
//! rkey is the capability) *and* in its QP's `qp_access_flags` — and why it needs another
//! way to learn the data is there.
//!
//! **The notice.** `IBV_WR_RDMA_WRITE_WITH_IMM` writes (here: nothing) *and* consumes a
//! receive on the target, completing it as `IBV_WC_RECV_RDMA_WITH_IMM` with 32 bits of
//! immediate data. InfiniBand orders completions, not the placement of bytes: the bytes of
//! a WRITE may land in any order, but when that completion appears at the target, every
//! earlier WRITE on the connection has been placed in memory: the target may read its
//! buffer.
//!
//! **Bandwidth mode (`--bw`).** The writer keeps up to [`TX_DEPTH`] writes in flight
//! (perftest's default send queue depth), posts `-n` writes of `-s` bytes, the last one
//! WITH_IMM, and reports MiB/s as `ib_write_bw` does in its `BW average[MiB/sec]` column.
//!
//! **Selective signaling.** A send WR without `IBV_SEND_SIGNALED` (on a QP created with
//! `sq_sig_all = 0`) makes no completion when it succeeds. Completions of one send queue
//! come in the order the WRs were posted, so a signaled completion also says that every
//! unsignaled WR before it has finished: its slots in the send queue may be reused. The
//! bandwidth mode signals one write in [`SIGNAL_EVERY`], as every real sender does, and
//! polls a hundredth of the completions. (An unsignaled WR that *fails* still completes,
//! with its error: errors are never silent.)

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::poll::{
    check_wcs, wait_for,
    Awaited::{Recv, Send},
};
use crate::stages::create_qp::Queues;
use crate::stages::modify_qp_rtr::local_dest;
use crate::stages::open_device::Device;
use crate::stages::post_send::PINGPONG_RECV_WRID;
use crate::trace::{self, Hex64, Key};
use crate::verbs::{
    self, ibv_recv_wr, ibv_send_flags, ibv_send_wr, ibv_send_wr_imm, ibv_send_wr_rdma, ibv_send_wr_wr, ibv_sge, Mr, Qp,
    IBV_SEND_SIGNALED, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
};
use crate::wire::RdmaDest;

/// Send queue depth of the bandwidth mode: perftest's default `--tx-depth` (128).
pub const TX_DEPTH: u32 = 128;
/// In the bandwidth mode, one write in `SIGNAL_EVERY` (and the last) asks for a
/// completion: perftest's default `--cq-mod`, so that ours and `ib_write_bw` poll the same
/// number of completions for the same bytes. It must not exceed [`TX_DEPTH`]: the writer
/// reclaims its send queue only from signaled completions, so every [`TX_DEPTH`] writes in
/// a row must hold a signaled one, or the queue fills with writes it can never see finish.
pub const SIGNAL_EVERY: u32 = 100;
const _: () = assert!(SIGNAL_EVERY <= TX_DEPTH);
/// `wr_id` of the data writes.
pub const RDMA_WRITE_WRID: u64 = 3;
/// `wr_id` of the WRITE WITH IMMEDIATE that ends a transfer.
pub const WRITE_IMM_WRID: u64 = 4;

/// Our address plus what the peer needs to write into our buffer: `mr->rkey` and its
/// address.
pub fn local_rdma_dest(dev: &Device, qp: &Qp, mr: &Mr) -> RdmaDest {
    RdmaDest { dest: local_dest(dev, qp), rkey: mr.rkey(), addr: mr.addr() }
}

/// The byte the writer puts at offset `i`: varies with the offset, so a write that lands
/// shifted or truncated is caught. (Not rc_pingpong's `-c` pattern, which is one zero per
/// page: see [`crate::stages::poll_cq::pattern_byte`].)
pub fn write_pattern_byte(i: usize) -> u8 {
    (i % 251) as u8
}

/// The writer fills its whole buffer with [`write_pattern_byte`].
pub fn fill_pattern(mr: &mut Mr) {
    let pattern: Vec<u8> = (0..mr.len()).map(write_pattern_byte).collect();
    mr.write(0, &pattern);
}

// ANCHOR: stage
/// Posts one RDMA WRITE of the first `size` bytes of `mr` to `remote`'s buffer — WITH
/// IMMEDIATE `imm` when given, which also completes a receive on the target.
pub fn rdma_write(
    qp: &Qp,
    mr: &Mr,
    size: u32,
    remote: &RdmaDest,
    imm: Option<u32>,
    send_flags: ibv_send_flags,
) -> Result<()> {
    let list = ibv_sge { addr: mr.addr(), length: size, lkey: mr.lkey() };
    let mut wr = ibv_send_wr {
        wr_id: if imm.is_some() { WRITE_IMM_WRID } else { RDMA_WRITE_WRID },
        // ANCHOR: hole_write_opcode HOLE: a plain RDMA WRITE, or WRITE WITH IMMEDIATE when there is an immediate (`imm`)
        opcode: if imm.is_some() { IBV_WR_RDMA_WRITE_WITH_IMM } else { IBV_WR_RDMA_WRITE },
        // ANCHOR_END: hole_write_opcode
        send_flags: send_flags.0,
        // ANCHOR: hole_write_rdma HOLE: where in the peer's memory to write: wr.rdma's remote address and the rkey the peer sent (`remote`)
        wr: ibv_send_wr_wr { rdma: ibv_send_wr_rdma { remote_addr: remote.addr, rkey: remote.rkey } },
        // ANCHOR_END: hole_write_rdma
        // imm_data travels in network byte order (C: `htonl`).
        // ANCHOR: hole_imm_data HOLE: the 32-bit immediate (0 without one) in the byte order it travels in, like C's htonl
        __bindgen_anon_1: ibv_send_wr_imm { imm_data: imm.unwrap_or(0).to_be() },
        // ANCHOR_END: hole_imm_data
        ..Default::default()
    };
    // A zero-length write needs no gather entry at all.
    let sg_list: &[ibv_sge] = if size == 0 { &[] } else { std::slice::from_ref(&list) };
    // ANCHOR: hole_write_post HOLE: post the RDMA WRITE work request with its gather list (ibv_post_send)
    qp.post_send(&mut wr, sg_list, mr)?;
    // ANCHOR_END: hole_write_post
    let mut line = trace::event("ibv_post_send")
        .kv("wr_id", wr.wr_id)
        .kv("opcode", if imm.is_some() { "IBV_WR_RDMA_WRITE_WITH_IMM" } else { "IBV_WR_RDMA_WRITE" })
        .kv("sge.length", size)
        .kv("wr.rdma.remote_addr", Hex64(remote.addr))
        .kv("wr.rdma.rkey", Key(remote.rkey));
    if let Some(imm) = imm {
        line = line.kv("imm_data", Key(imm));
    }
    line.emit();
    Ok(())
}

/// Target, before the exchange: post the receive that the writer's WRITE WITH IMMEDIATE
/// will consume. It has no scatter entry: the immediate data arrives in the completion.
pub fn post_notice_recv(qp: &Qp, mr: &Mr) -> Result<()> {
    let mut wr = ibv_recv_wr { wr_id: PINGPONG_RECV_WRID, ..Default::default() };
    // ANCHOR: hole_notice_recv HOLE: post the receive, with no scatter entry at all, that the WRITE WITH IMMEDIATE will consume (ibv_post_recv)
    qp.post_recv(&mut wr, &[], mr)?;
    // ANCHOR_END: hole_notice_recv
    trace::event("ibv_post_recv").kv("count", 1).kv("wr_id", wr.wr_id).kv("num_sge", 0).emit();
    Ok(())
}
// ANCHOR_END: stage

// ANCHOR: roles
/// Writer: fill the buffer with the pattern, RDMA WRITE it into the target's buffer, then
/// notify with a zero-length WRITE WITH IMMEDIATE carrying the byte count.
pub fn write_and_notify(q: &Queues, mr: &mut Mr, size: u32, remote: &RdmaDest, timeout: Duration) -> Result<()> {
    let Queues { qp, cq, send_flags, .. } = q;
    let send_flags = *send_flags;
    fill_pattern(mr);
    rdma_write(qp, mr, size, remote, None, send_flags)?;
    rdma_write(qp, mr, 0, remote, Some(size), send_flags)?;
    wait_for(cq, &[Send(RDMA_WRITE_WRID), Send(WRITE_IMM_WRID)], timeout)
}

/// Target: wait for the WRITE WITH IMMEDIATE's completion, then check that the first `size`
/// bytes of the buffer (its own `-s`, which both sides agree on) hold the writer's pattern.
/// The immediate is only the notice: in a single write it carries the byte count, in
/// `--bw` the number of writes, and the target checks neither against it.
pub fn await_notice_and_verify(q: &Queues, mr: &Mr, size: u32, timeout: Duration) -> Result<()> {
    wait_for(&q.cq, &[Recv(PINGPONG_RECV_WRID)], timeout)?;
    verify(&mr.read(0, size as usize), size as usize)?;
    trace::event("verify").kv("bytes", size).kv("ok", "yes").emit();
    Ok(())
}
// ANCHOR_END: roles

/// Checks that the first `size` bytes of `buf` carry [`write_pattern_byte`].
pub fn verify(buf: &[u8], size: usize) -> Result<()> {
    match buf[..size.min(buf.len())].iter().enumerate().find(|&(i, &b)| b != write_pattern_byte(i)) {
        None => Ok(()),
        Some((i, &b)) => Err(Error::new("verifying the written buffer").cause(format!(
            "byte {i} is 0x{b:02x}, expected 0x{:02x}: the RDMA WRITE did not land where and \
             as it should",
            write_pattern_byte(i)
        ))),
    }
}

// ANCHOR: bw
/// Writer, `--bw`: `iters` writes of `size` bytes, at most [`TX_DEPTH`] in flight, one in
/// [`SIGNAL_EVERY`] signaled, the last WITH IMMEDIATE (`imm` = `iters`) and signaled.
/// Prints perftest's columns.
pub fn bandwidth(q: &Queues, mr: &mut Mr, size: u32, iters: u32, remote: &RdmaDest) -> Result<()> {
    let Queues { qp, cq, send_flags, .. } = q;
    let send_flags = *send_flags;
    fill_pattern(mr);
    let unsignaled = ibv_send_flags(send_flags.0 & !IBV_SEND_SIGNALED.0);
    let mut wc = [verbs::WC_ZERO; 16];
    let (mut posted, mut completed) = (0u32, 0u32);
    let mute = trace::mute();
    let start = Instant::now();
    while completed < iters {
        while posted < iters && posted - completed < TX_DEPTH {
            let last = posted == iters - 1;
            let signaled = last || (posted + 1) % SIGNAL_EVERY == 0;
            let flags = if signaled { send_flags } else { unsignaled };
            rdma_write(qp, mr, size, remote, last.then_some(iters), flags)?;
            posted += 1;
        }
        let ne = cq.poll(&mut wc)?;
        check_wcs(cq, &wc[..ne], |_| u64::from(completed))?;
        for wc in &wc[..ne] {
            // This completion frees its own write and the unsignaled ones before it.
            completed = if wc.wr_id() == WRITE_IMM_WRID { iters } else { completed + SIGNAL_EVERY };
        }
    }
    let secs = start.elapsed().as_secs_f64();
    drop(mute);
    let bytes = f64::from(size) * f64::from(iters);
    trace::line(" #bytes     #iterations    BW average[MiB/sec]    MsgRate[Mpps]");
    trace::line(format_args!(
        " {:<10} {:<14} {:<22.2} {:.6}",
        size,
        iters,
        bytes / secs / f64::from(1u32 << 20),
        f64::from(iters) / secs / 1e6
    ));
    Ok(())
}
// ANCHOR_END: bw

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_finds_the_first_wrong_byte() {
        let mut buf: Vec<u8> = (0..600).map(write_pattern_byte).collect();
        assert!(verify(&buf, 600).is_ok());
        buf[300] ^= 1;
        let err = verify(&buf, 600).unwrap_err().to_string();
        assert!(err.contains("byte 300"), "{err}");
        assert!(verify(&buf, 300).is_ok());
    }
}
