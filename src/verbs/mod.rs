//! The thin, safe layer over libibverbs: one RAII type per verbs object.
//!
//! This is the only module with `unsafe` code. Each type owns one `ibv_*` handle and
//! releases it in `Drop`, tracing the destroy verb, so a step can never forget
//! `pp_close_ctx` — not even when it returns early with an error.
//!
//! # Layout
//!
//! One file per object family, each readable in one sitting: `device` (the device list,
//! the context and its queries), `memory` (PD, buffer, MR), `cq` (completion channel and
//! CQ), `qp` (the queue pair and posting), `ah` (address handles, for UD), `srq` (the
//! shared receive queue and the asynchronous events), `watchdog` (a bound on a loop that
//! may wait in a verb forever), `rdma_cm` (librdmacm: the event channel, CM ids and their
//! events), and `names` (what the trace calls verbs things). This file re-exports their types and the
//! C names, and keeps what they share: how an `int`-returning verb reports an error.
//!
//! # Ownership mirrors the verbs object graph
//!
//! ```text
//! DeviceList ◄─ Context ◄─┬─ Pd ◄─┬─ Mr (owns its buffer)
//!                         │       └─ Qp ──► Cq ──► CompChannel (optional)
//!                         └─ Cq, CompChannel
//! ```
//!
//! A child holds an [`Rc`](std::rc::Rc) of each parent it was created from, so a parent cannot be
//! destroyed while a child still needs it: the kernel would refuse anyway (`EBUSY` from
//! `ibv_dealloc_pd` while an MR is registered in the PD), and here the type system refuses
//! first. Dropping a step's values in reverse order of creation then yields the teardown
//! QP, CQ, (channel), MR, PD, context, device list. That is `pp_close_ctx`'s order but for
//! the completion channel, which C destroys after `ibv_dealloc_pd`; the only rule is that a
//! channel outlives the CQs that use it, and both orders keep it.
//!
//! # What is traced here, and what is not
//!
//! Creation and destruction are traced by this layer, so teardown can never go unreported.
//! Queries and the data path (`ibv_post_*`, `ibv_poll_cq`, CQ events) are not: the stage
//! that calls them picks what is worth showing, and the timed loop shows nothing.
//!
//! # The attribute structs are the C ones
//!
//! Wrappers take and return `ibverbs-sys`' own `ibv_qp_attr`, `ibv_qp_init_attr`,
//! `ibv_send_wr`, ... so stage code reads like `rc_pingpong.c`'s designated initialisers,
//! and the C constant names are re-exported below so masks read `IBV_QP_STATE | IBV_QP_AV`.

use std::io;

use crate::error::{Error, Result};

mod ah;
mod cq;
mod device;
mod memory;
pub mod names;
mod qp;
pub mod rdma_cm;
mod srq;
mod watchdog;

pub use ah::Ah;
pub use cq::{wc_status, wc_status_str, CompChannel, Cq};
pub use device::{AsyncEvent, Context, DeviceList, GidEntry};
pub use memory::{available_memory, page_size, physical_memory, AlignedBuf, Mr, Pd};
pub use qp::Qp;
pub use rdma_cm::{rdma_conn_param, CmEvent, CmId, EventChannel};
pub use srq::{RecvQueue, Srq};
pub use watchdog::Watchdog;

use ibverbs_sys as ffi;
pub use ibverbs_sys::ibv_qp_state::{IBV_QPS_ERR, IBV_QPS_INIT, IBV_QPS_RESET, IBV_QPS_RTR, IBV_QPS_RTS};
pub use ibverbs_sys::ibv_qp_type::{IBV_QPT_RC, IBV_QPT_UD};
pub use ibverbs_sys::ibv_wc_opcode::{
    IBV_WC_RDMA_READ, IBV_WC_RDMA_WRITE, IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_SEND,
};
pub use ibverbs_sys::ibv_wr_opcode::{
    IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE,
    IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND,
};
pub use ibverbs_sys::{
    ibv_access_flags, ibv_ah_attr, ibv_device_attr, ibv_gid, ibv_global_route, ibv_mtu, ibv_port_attr, ibv_qp_attr,
    ibv_qp_attr_mask, ibv_qp_cap, ibv_qp_init_attr, ibv_recv_wr, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wc,
    ibv_wc_flags,
};
pub use ibverbs_sys::{IBV_ATOMIC_HCA, IBV_ATOMIC_NONE};
pub use ibverbs_sys::{
    IBV_LINK_LAYER_ETHERNET, IBV_LINK_LAYER_INFINIBAND, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_256, IBV_MTU_4096,
    IBV_MTU_512,
};

/// The anonymous union holding `imm_data` (network byte order) in an `ibv_send_wr`.
pub use ibverbs_sys::ibv_send_wr__bindgen_ty_1 as ibv_send_wr_imm;
/// `wr.wr` of an `ibv_send_wr`: the per-opcode union (`wr.wr.rdma` for RDMA WRITE).
pub use ibverbs_sys::ibv_send_wr__bindgen_ty_2 as ibv_send_wr_wr;
/// `wr.wr.rdma`: where an RDMA operation goes in the peer's memory (`remote_addr`, `rkey`).
pub use ibverbs_sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 as ibv_send_wr_rdma;
/// `wr.wr.atomic`: the peer's 64-bit word (`remote_addr`, `rkey`) and the operands
/// (`compare_add`, `swap`).
pub use ibverbs_sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 as ibv_send_wr_atomic;
/// `wr.wr.ud`: where a UD send goes (`ah`, `remote_qpn`, `remote_qkey`).
pub use ibverbs_sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 as ibv_send_wr_ud;

// The C names of the flag bits. bindgen makes them associated constants of newtype
// structs (`ibv_qp_attr_mask::IBV_QP_STATE`); re-exporting them bare lets a mask be written
// one flag per line exactly as in rc_pingpong.c.

/// Modify the QP state (`qp_state`).
pub const IBV_QP_STATE: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_STATE;
/// Remote access rights of the QP (`qp_access_flags`).
pub const IBV_QP_ACCESS_FLAGS: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS;
/// Partition key index (`pkey_index`).
pub const IBV_QP_PKEY_INDEX: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_PKEY_INDEX;
/// Physical port the QP sends from (`port_num`).
pub const IBV_QP_PORT: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_PORT;
/// Address vector: where the remote QP lives (`ah_attr`).
pub const IBV_QP_AV: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_AV;
/// Path MTU (`path_mtu`).
pub const IBV_QP_PATH_MTU: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_PATH_MTU;
/// Local ACK timeout (`timeout`).
pub const IBV_QP_TIMEOUT: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_TIMEOUT;
/// Transport retry count (`retry_cnt`).
pub const IBV_QP_RETRY_CNT: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_RETRY_CNT;
/// RNR retry count (`rnr_retry`).
pub const IBV_QP_RNR_RETRY: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_RNR_RETRY;
/// First PSN expected from the peer (`rq_psn`).
pub const IBV_QP_RQ_PSN: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_RQ_PSN;
/// Outstanding RDMA reads/atomics this QP may initiate (`max_rd_atomic`).
pub const IBV_QP_MAX_QP_RD_ATOMIC: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC;
/// Minimum RNR NAK timer (`min_rnr_timer`).
pub const IBV_QP_MIN_RNR_TIMER: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER;
/// First PSN this QP sends (`sq_psn`).
pub const IBV_QP_SQ_PSN: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_SQ_PSN;
/// Incoming RDMA reads/atomics this QP will serve at once (`max_dest_rd_atomic`).
pub const IBV_QP_MAX_DEST_RD_ATOMIC: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC;
/// The Q_Key a UD QP accepts datagrams with (`qkey`).
pub const IBV_QP_QKEY: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_QKEY;
/// Capabilities (`cap`), for `ibv_query_qp`.
pub const IBV_QP_CAP: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_CAP;
/// Remote QP number (`dest_qp_num`).
pub const IBV_QP_DEST_QPN: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_DEST_QPN;

/// The local HCA may write into the memory region (needed by any receive).
pub const IBV_ACCESS_LOCAL_WRITE: ffi::ibv_access_flags = ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE;
/// A remote QP may RDMA WRITE into the memory region (or, on a QP, be allowed to).
pub const IBV_ACCESS_REMOTE_WRITE: ffi::ibv_access_flags = ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE;
/// A remote QP may RDMA READ from the memory region.
pub const IBV_ACCESS_REMOTE_READ: ffi::ibv_access_flags = ffi::ibv_access_flags::IBV_ACCESS_REMOTE_READ;
/// A remote QP may perform atomics on 64-bit words of the memory region.
pub const IBV_ACCESS_REMOTE_ATOMIC: ffi::ibv_access_flags = ffi::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC;

/// Generate a completion for this send WR.
pub const IBV_SEND_SIGNALED: ffi::ibv_send_flags = ffi::ibv_send_flags::IBV_SEND_SIGNALED;
/// Copy the payload into the WQE at post time instead of letting the HCA DMA it later.
pub const IBV_SEND_INLINE: ffi::ibv_send_flags = ffi::ibv_send_flags::IBV_SEND_INLINE;

/// In a UD receive's `wc_flags`: its first 40 bytes hold the datagram's GRH (without the
/// flag they are undefined).
pub const IBV_WC_GRH: ibv_wc_flags = ibv_wc_flags::IBV_WC_GRH;

/// An all-zero work completion, to initialise the array `ibv_poll_cq` fills.
// SAFETY: ibv_wc is a C struct of integers; all-zero is a valid value of every field.
pub const WC_ZERO: ibv_wc = unsafe { std::mem::zeroed() };

/// The 16 bytes of a GID, whichever view of the union was written.
pub fn gid_bytes(gid: &ibv_gid) -> [u8; 16] {
    // SAFETY: every view of `union ibv_gid` is plain bytes covering all 16 of them, so
    // reading `raw` is valid whichever member was written.
    unsafe { gid.raw }
}

/// Int-returning verbs return 0 or an errno value (some providers return -1 and set errno).
#[inline]
fn check(what: &str, rc: i32) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(failed(what, rc))
    }
}

#[cold]
fn failed(what: &str, rc: i32) -> Error {
    if rc > 0 {
        Error::verb(what, io::Error::from_raw_os_error(rc))
    } else {
        Error::verb(what, io::Error::last_os_error())
    }
}

/// A destroy verb that fails in Drop cannot return its error: say so on stderr.
fn report_destroy(verb: &str, rc: i32) {
    if let Err(err) = check(verb, rc) {
        eprintln!("error: {err}");
    }
}
