//! Stage 03: allocate the message buffer and register it as a memory region.
//!
//! C reference: `memalign`, `memset(ctx->buf, 0x7b, size)` and `ibv_reg_mr` in
//! `pp_init_ctx`.
//!
//! **Why register.** The HCA moves data by DMA, on its own, while the CPU does something
//! else. So the buffer's pages must stay where they are (registration pins them) and the
//! HCA must know their physical addresses (registration hands it the translation). It
//! returns two keys: the **lkey**, which our own work requests quote to use the buffer, and
//! the **rkey**, which a peer quotes to RDMA into or out of it (stage 09).
//!
//! **Access flags.** `IBV_ACCESS_LOCAL_WRITE` lets the *local* HCA write the buffer, which
//! every receive does, so the ping-pong needs it; remote access (`IBV_ACCESS_REMOTE_WRITE`)
//! is only for stage 09. Reading for a send needs no flag. The verbs spec also requires
//! LOCAL_WRITE whenever REMOTE_WRITE is asked for: `ibv_reg_mr` fails with EINVAL otherwise.

use std::rc::Rc;

use crate::error::{Error, Result};
use crate::verbs::{available_memory, ibv_access_flags, page_size, physical_memory, AlignedBuf, Mr, Pd};

/// rc_pingpong fills its buffer with `0x7b` (`'{'`) before registering it (a placeholder:
/// its source says `FIXME memset(ctx->buf, 0, size)`).
pub const FILL: u8 = 0x7b;

// ANCHOR: stage
/// Allocates `size` page-aligned bytes, fills them with [`FILL`], and registers them in
/// `pd` with `access` (`IBV_ACCESS_LOCAL_WRITE` for the ping-pong).
pub fn reg_mr(pd: &Rc<Pd>, size: usize, access: ibv_access_flags) -> Result<Mr> {
    fits_in_memory(size)?;
    // ANCHOR: hole_buf HOLE(AlignedBuf): `size` bytes aligned to a page, as rc_pingpong's memalign(page_size, size)
    let mut buf = AlignedBuf::new(page_size(), size)?;
    // ANCHOR_END: hole_buf
    buf.as_mut_slice().fill(FILL);
    // ANCHOR: hole_reg_mr HOLE(Mr): register `buf` in `pd` with the access flags the caller asked for (ibv_reg_mr)
    let mr = Mr::reg(pd, buf, access)?;
    // ANCHOR_END: hole_reg_mr
    Ok(mr)
}
// ANCHOR_END: stage

/// Refuses a buffer of `size` bytes (`-s`) larger than the memory there is, or than what
/// is available right now, before allocating it. Registration pins every page in RAM, where
/// it cannot be swapped out; the allocation itself may well succeed (Linux overcommits),
/// and then filling and pinning it brings in the OOM killer, which ends the process (or
/// another one) with no message at all.
fn fits_in_memory(size: usize) -> Result<()> {
    let too_big = |cause: String| {
        Error::new(format!("allocating a {size}-byte buffer"))
            .cause(cause)
            .fix("use a smaller -s/--size (rc_pingpong's default is 4096)")
    };
    let len = size as u64;
    if let Some(phys) = physical_memory().filter(|&phys| len > phys) {
        return Err(too_big(format!(
            "that is more than this machine's memory ({phys} bytes): ibv_reg_mr pins every \
             page of the buffer in RAM, so it could never be registered"
        )));
    }
    if let Some(avail) = available_memory().filter(|&avail| len > avail) {
        return Err(too_big(format!(
            "that is more than the memory available now (MemAvailable in /proc/meminfo: \
             {avail} bytes): ibv_reg_mr pins every page of the buffer in RAM, where it cannot \
             be swapped out, so the kernel would have to kill a process to make room"
        )));
    }
    Ok(())
}
