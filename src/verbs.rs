//! The thin, safe layer over libibverbs: one RAII type per verbs object.
//!
//! This is the only module with `unsafe` code. Each type owns one `ibv_*` handle and
//! releases it in `Drop`, tracing the destroy verb, so a step can never forget
//! `pp_close_ctx` — not even when it returns early with an error.
//!
//! # Ownership mirrors the verbs object graph
//!
//! ```text
//! DeviceList ◄─ Context ◄─┬─ Pd ◄─┬─ Mr (owns its buffer)
//!                         │       └─ Qp ──► Cq ──► CompChannel (optional)
//!                         └─ Cq, CompChannel
//! ```
//!
//! A child holds an [`Rc`] of each parent it was created from, so a parent cannot be
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

use std::alloc::{self, Layout};
use std::cell::Cell;
use std::ffi::CStr;
use std::io;
use std::mem::ManuallyDrop;
use std::ptr::{self, NonNull};
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::trace::{self, Hex64, Key, Qpn};

pub mod names;

pub use ibverbs_sys::{
    ibv_access_flags, ibv_send_flags, ibv_ah_attr, ibv_device_attr, ibv_gid, ibv_global_route, ibv_mtu, ibv_port_attr,
    ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_cap, ibv_qp_init_attr, ibv_recv_wr, ibv_send_wr,
    ibv_sge, ibv_wc,
};
pub use ibverbs_sys::ibv_qp_state::{
    IBV_QPS_ERR, IBV_QPS_INIT, IBV_QPS_RESET, IBV_QPS_RTR, IBV_QPS_RTS,
};
pub use ibverbs_sys::ibv_qp_type::IBV_QPT_RC;
pub use ibverbs_sys::ibv_wc_opcode::{IBV_WC_RDMA_WRITE, IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_SEND};
pub use ibverbs_sys::ibv_wr_opcode::{IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND};
pub use ibverbs_sys::{
    IBV_LINK_LAYER_ETHERNET, IBV_LINK_LAYER_INFINIBAND, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_256,
    IBV_MTU_4096, IBV_MTU_512,
};
use ibverbs_sys as ffi;

/// `wr.wr` of an `ibv_send_wr`: the per-opcode union (`wr.wr.rdma` for RDMA WRITE).
pub use ibverbs_sys::ibv_send_wr__bindgen_ty_2 as ibv_send_wr_wr;
/// `wr.wr.rdma`: where an RDMA operation goes in the peer's memory (`remote_addr`, `rkey`).
pub use ibverbs_sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 as ibv_send_wr_rdma;
/// The anonymous union holding `imm_data` (network byte order) in an `ibv_send_wr`.
pub use ibverbs_sys::ibv_send_wr__bindgen_ty_1 as ibv_send_wr_imm;

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
pub const IBV_QP_MAX_DEST_RD_ATOMIC: ibv_qp_attr_mask =
    ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC;
/// Capabilities (`cap`), for `ibv_query_qp`.
pub const IBV_QP_CAP: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_CAP;
/// Remote QP number (`dest_qp_num`).
pub const IBV_QP_DEST_QPN: ibv_qp_attr_mask = ibv_qp_attr_mask::IBV_QP_DEST_QPN;

/// The local HCA may write into the memory region (needed by any receive).
pub const IBV_ACCESS_LOCAL_WRITE: ffi::ibv_access_flags = ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE;
/// A remote QP may RDMA WRITE into the memory region (or, on a QP, be allowed to).
pub const IBV_ACCESS_REMOTE_WRITE: ffi::ibv_access_flags = ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE;

/// Generate a completion for this send WR.
pub const IBV_SEND_SIGNALED: ffi::ibv_send_flags = ffi::ibv_send_flags::IBV_SEND_SIGNALED;
/// Copy the payload into the WQE at post time instead of letting the HCA DMA it later.
pub const IBV_SEND_INLINE: ffi::ibv_send_flags = ffi::ibv_send_flags::IBV_SEND_INLINE;

/// An all-zero work completion, to initialise the array `ibv_poll_cq` fills.
// SAFETY: ibv_wc is a C struct of integers; all-zero is a valid value of every field.
pub const WC_ZERO: ibv_wc = unsafe { std::mem::zeroed() };

/// The 16 bytes of a GID, whichever view of the union was written.
pub fn gid_bytes(gid: &ibv_gid) -> [u8; 16] {
    // SAFETY: every view of `union ibv_gid` is plain bytes covering all 16 of them, so
    // reading `raw` is valid whichever member was written.
    unsafe { gid.raw }
}

/// The system page size (`sysconf(_SC_PAGESIZE)`), rc_pingpong's buffer alignment.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions; _SC_PAGESIZE is always supported on Linux.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// The machine's physical memory in bytes (`sysconf(_SC_PHYS_PAGES)` pages), if known.
pub fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown value.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    u64::try_from(pages).ok().map(|p| p * page_size() as u64)
}

/// Memory the kernel could give a new allocation without swapping (`MemAvailable` in
/// `/proc/meminfo`), if known.
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb = meminfo.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
    kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok().map(|kb| kb * 1024)
}

/// Explains an `ENOMEM` from `ibv_reg_mr` of `len` bytes. Registering pins the pages, and the
/// kernel charges them to the process's locked-memory limit (`RLIMIT_MEMLOCK`, what
/// `ulimit -l` shows) unless it has `CAP_IPC_LOCK`, as root does: the classic failure of a
/// program that works as root and not as a student. With the limit in reach, it names the
/// limit; otherwise the machine's memory.
fn explain_pin_failure(err: Error, len: usize) -> Error {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: lim is a valid out-pointer for the one struct getrlimit writes.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    // Pages this process has pinned already (earlier MRs): /proc/self/status's VmPin.
    let pinned = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("VmPin:")).map(str::to_string))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024);
    let over_limit = rc == 0 && lim.rlim_cur != libc::RLIM_INFINITY && pinned + len as u64 > lim.rlim_cur;
    if over_limit {
        err.cause(format!(
            "registering pins the buffer's pages, and the kernel charges them to this process's \
             locked-memory limit: {len} bytes (with {pinned} already pinned) exceed RLIMIT_MEMLOCK, \
             {} KiB (`ulimit -l`). A process with CAP_IPC_LOCK (root, normally) is exempt",
            lim.rlim_cur / 1024
        ))
        .fix(
            "raise the limit for this account: `ulimit -l unlimited` in its shell (the hard limit \
             must allow it), `USER - memlock unlimited` in /etc/security/limits.conf for logins, \
             LimitMEMLOCK=infinity for a systemd service; or register less memory",
        )
    } else {
        let available = available_memory().map_or("unknown".to_string(), |b| format!("{} MiB", b >> 20));
        err.cause(format!(
            "the kernel could not pin {len} bytes: the machine is short of memory (available: \
             {available}), or the device cannot register that much (max_mr_size in step 01's trace)"
        ))
        .fix("register less memory, or free some on this machine")
    }
}

/// `ibv_wc_status_str`: the library's name for a work completion status.
pub fn wc_status_str(status: ffi::ibv_wc_status::Type) -> &'static str {
    // SAFETY: ibv_wc_status_str returns a pointer to a static string for any value
    // (unknown values map to "unknown").
    let s = unsafe { CStr::from_ptr(ffi::ibv_wc_status_str(status)) };
    s.to_str().unwrap_or("unknown")
}

/// The status of a work completion (`wc.status`), `IBV_WC_SUCCESS` when it succeeded.
pub fn wc_status(wc: &ibv_wc) -> ffi::ibv_wc_status::Type {
    wc.error().map_or(ffi::ibv_wc_status::IBV_WC_SUCCESS, |(status, _)| status)
}

/// `ibv_get_device_list`: the RDMA devices of this host.
///
/// `ibv_get_device_list(3)` allows freeing the list as soon as the devices wanted are open;
/// `ibv_rc_pingpong` frees it only at the very end, and so do we, to keep its order:
/// [`Context::open`] takes the list and frees it after closing the device.
pub struct DeviceList {
    list: NonNull<*mut ffi::ibv_device>,
    len: usize,
}

impl DeviceList {
    /// Calls `ibv_get_device_list`. Fails with the errno it sets (`ENOSYS` when the kernel
    /// has no RDMA support at all); an empty list is *not* an error here.
    pub fn get() -> Result<Self> {
        let mut num = 0;
        // ANCHOR: c_ibv_get_device_list
        // C: struct ibv_device **ibv_get_device_list(int *num_devices);
        // The array, or NULL with errno set.
        // SAFETY: `num` is a valid out-pointer; the returned array (NULL-terminated, `num`
        // entries) is owned by us until ibv_free_device_list.
        let list = unsafe { ffi::ibv_get_device_list(&mut num) };
        let Some(list) = NonNull::new(list) else {
            return Err(Error::verb("ibv_get_device_list", io::Error::last_os_error()));
        };
        // ANCHOR_END: c_ibv_get_device_list
        let list = DeviceList { list, len: usize::try_from(num).unwrap_or(0) };
        trace::event("ibv_get_device_list").kv("num_devices", list.len).emit();
        Ok(list)
    }

    /// Number of devices in the list.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the host has RDMA support but no device (no `rdma link add` yet).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn device(&self, index: usize) -> *mut ffi::ibv_device {
        assert!(index < self.len, "device index {index} out of range");
        // SAFETY: index < len, and the array holds len valid device pointers.
        unsafe { *self.list.as_ptr().add(index) }
    }

    /// `ibv_get_device_name` of device `index`, e.g. `rxe0` or `mlx5_0`.
    pub fn name(&self, index: usize) -> String {
        // SAFETY: device() is a valid device; its name is a NUL-terminated string that
        // lives as long as the list.
        let name = unsafe { CStr::from_ptr(ffi::ibv_get_device_name(self.device(index))) };
        name.to_string_lossy().into_owned()
    }

    /// `ibv_get_device_guid` of device `index`, in host order (the verb returns it in
    /// network order, as it travels in InfiniBand packets).
    pub fn guid(&self, index: usize) -> u64 {
        // SAFETY: device() is a valid device pointer.
        u64::from_be(unsafe { ffi::ibv_get_device_guid(self.device(index)) })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the list came from ibv_get_device_list and is freed exactly once.
        unsafe { ffi::ibv_free_device_list(self.list.as_ptr()) };
        trace::event("ibv_free_device_list").emit();
    }
}

/// `struct ibv_context`: an open device, the root of every other verbs object.
///
/// Opening a device gives this process its own channel to the kernel driver (the
/// `/dev/infiniband/uverbs*` file); PDs, CQs and QPs are all created through it.
pub struct Context {
    raw: NonNull<ffi::ibv_context>,
    name: String,
    // Dropped after Drop::drop has closed the device: rc_pingpong frees the list last.
    _list: DeviceList,
}

impl Context {
    /// `ibv_open_device` on device `index` of `list`, which the context keeps until it is
    /// closed.
    pub fn open(list: DeviceList, index: usize) -> Result<Rc<Self>> {
        let name = list.name(index);
        // ANCHOR: c_ibv_open_device
        // C: struct ibv_context *ibv_open_device(struct ibv_device *device);
        // The context, or NULL with errno set.
        // SAFETY: device() is a valid device of a live list.
        let raw = unsafe { ffi::ibv_open_device(list.device(index)) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::verb(format!("ibv_open_device({name})"), io::Error::last_os_error())
        })?;
        // ANCHOR_END: c_ibv_open_device
        trace::event("ibv_open_device").kv("device", &name).emit();
        Ok(Rc::new(Context { raw, name, _list: list }))
    }

    /// The device name, e.g. `rxe0`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ibv_get_async_event` (then `ibv_ack_async_event`), waiting at most `timeout`:
    /// the name of the next *asynchronous* event (`IBV_EVENT_CQ_ERR`,
    /// `IBV_EVENT_QP_FATAL`, ...), or `None` if none came.
    ///
    /// Errors that belong to no work request — a CQ that overflowed, a QP that broke
    /// outside any WR — are not reported by any verb call: the device queues them on the
    /// context's async fd, and a program that never reads it never learns of them.
    pub fn get_async_event(&self, timeout: std::time::Duration) -> Result<Option<String>> {
        // SAFETY: raw is an open context; async_fd is a plain field set at open.
        let fd = unsafe { (*self.raw.as_ptr()).async_fd };
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: pfd is one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            return Err(Error::verb("poll(async_fd)", io::Error::last_os_error()));
        }
        if n == 0 {
            return Ok(None);
        }
        // SAFETY: zeroed is a valid ibv_async_event (plain C data) for the verb to fill.
        let mut event: ffi::ibv_async_event = unsafe { std::mem::zeroed() };
        // SAFETY: raw is an open context and event a valid out-struct; poll said an event
        // is ready, so the (blocking) verb returns at once.
        let rc = unsafe { ffi::ibv_get_async_event(self.raw.as_ptr(), &mut event) };
        check("ibv_get_async_event", rc)?;
        let name = names::event_type_name(event.event_type);
        // Every event must be acknowledged, or destroying its CQ/QP blocks forever.
        // SAFETY: event came from ibv_get_async_event and is acknowledged once.
        unsafe { ffi::ibv_ack_async_event(&mut event) };
        Ok(Some(name))
    }

    /// `ibv_query_device`: the device's limits and identity.
    pub fn query_device(&self) -> Result<ibv_device_attr> {
        let mut attr = ibv_device_attr::default();
        // ANCHOR: c_ibv_query_device
        // C: int ibv_query_device(struct ibv_context *context,
        //                         struct ibv_device_attr *device_attr);
        // 0, or the error number itself (errno is not the place to look).
        // SAFETY: raw is an open context and attr a valid out-pointer.
        let rc = unsafe { ffi::ibv_query_device(self.raw.as_ptr(), &mut attr) };
        check("ibv_query_device", rc)?;
        // ANCHOR_END: c_ibv_query_device
        Ok(attr)
    }

    /// `ibv_query_port`: the state, LID, MTU and link layer of port `port` (1-based).
    pub fn query_port(&self, port: u8) -> Result<ibv_port_attr> {
        let mut attr = ibv_port_attr::default();
        // ANCHOR: c_ibv_query_port
        // C: int ibv_query_port(struct ibv_context *context, uint8_t port_num,
        //                       struct _compat_ibv_port_attr *port_attr);
        // 0, or the error number itself.
        // `ibv_query_port` is a macro in verbs.h around an inline that calls the exported
        // symbol with the smaller "compat" struct layout. That layout is a prefix of
        // ibv_port_attr (every field up to `flags`, `link_layer` included), and the library
        // copies exactly that prefix, so a zeroed full struct is a valid buffer.
        // SAFETY: raw is an open context; attr is large enough for the compat layout.
        let rc = unsafe {
            ffi::ibv_query_port(self.raw.as_ptr(), port, ptr::from_mut(&mut attr).cast())
        };
        check(&format!("ibv_query_port(port {port})"), rc)?;
        // ANCHOR_END: c_ibv_query_port
        Ok(attr)
    }

    /// `ibv_query_gid`: entry `index` of port `port`'s GID table.
    pub fn query_gid(&self, port: u8, index: i32) -> Result<[u8; 16]> {
        // ibv_query_gid returns -1 and leaves errno alone on some paths (rdma-core's
        // sysfs fallback returns its error code instead of setting errno), so an errno read
        // after it may be stale. ibv_query_gid_ex (a static inline over the symbol called
        // here) returns the error code itself: "0 on success or errno value on error".
        let Ok(index_u32) = u32::try_from(index) else {
            return Err(Error::verb(
                format!("ibv_query_gid(port {port}, index {index})"),
                io::Error::from_raw_os_error(libc::EINVAL),
            ));
        };
        let mut entry = ffi::ibv_gid_entry::default();
        // ANCHOR: c_ibv_query_gid
        // C: int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
        //                          uint32_t gid_index, struct ibv_gid_entry *entry,
        //                          uint32_t flags, size_t entry_size);
        // 0, or the error number itself (ENODATA for an empty slot). rc_pingpong calls
        // ibv_query_gid, which returns 0 or -1 and may leave errno stale (see above).
        // SAFETY: raw is an open context and entry a valid out-pointer of the size passed.
        let rc = unsafe {
            ffi::_ibv_query_gid_ex(
                self.raw.as_ptr(),
                u32::from(port),
                index_u32,
                &mut entry,
                0,
                std::mem::size_of::<ffi::ibv_gid_entry>(),
            )
        };
        match rc {
            0 => Ok(gid_bytes(&entry.gid)),
            // An empty slot: ibv_query_gid reports it as success with an all-zero GID, and so
            // do we (the caller explains an all-zero GID).
            libc::ENODATA => Ok([0; 16]),
            _ => Err(Error::verb(
                format!("ibv_query_gid(port {port}, index {index})"),
                io::Error::from_raw_os_error(rc),
            )),
        }
        // ANCHOR_END: c_ibv_query_gid
    }
}

/// One entry of a port's GID table, as `ibv_query_gid_table` reports it.
#[derive(Debug, Clone, Copy)]
pub struct GidEntry {
    /// The index `-g` selects.
    pub index: u32,
    /// The port it belongs to.
    pub port: u32,
    /// The GID itself.
    pub gid: [u8; 16],
    /// `IBV_GID_TYPE_IB`, `_ROCE_V1` (Ethernet frames) or `_ROCE_V2` (UDP/IP packets).
    pub gid_type: u32,
}

impl Context {
    /// `ibv_query_gid_table`: every valid GID of every port, in one call.
    ///
    /// rc_pingpong only queries the one entry `-g` names ([`Context::query_gid`]); listing
    /// the table that way would take one call per slot (rxe has 1024, nearly all empty).
    pub fn query_gid_table(&self, max_entries: usize) -> Result<Vec<GidEntry>> {
        let mut entries: Vec<ffi::ibv_gid_entry> = vec![ffi::ibv_gid_entry::default(); max_entries];
        // ibv_query_gid_table is a static inline that passes the struct size to this symbol.
        // SAFETY: raw is an open context; `entries` has room for max_entries entries of the
        // size we pass.
        let n = unsafe {
            ffi::_ibv_query_gid_table(
                self.raw.as_ptr(),
                entries.as_mut_ptr(),
                max_entries,
                0,
                std::mem::size_of::<ffi::ibv_gid_entry>(),
            )
        };
        let n = usize::try_from(n).map_err(|_| {
            let errno = i32::try_from(-n).unwrap_or(libc::EINVAL);
            Error::verb("ibv_query_gid_table", io::Error::from_raw_os_error(errno))
        })?;
        Ok(entries[..n]
            .iter()
            .map(|e| GidEntry {
                index: e.gid_index,
                port: e.port_num,
                gid: gid_bytes(&e.gid),
                gid_type: e.gid_type,
            })
            .collect())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every child holds an Rc<Context>, so none is alive any more.
        let rc = unsafe { ffi::ibv_close_device(self.raw.as_ptr()) };
        report_destroy("ibv_close_device", rc);
        trace::event("ibv_close_device").kv("device", &self.name).emit();
    }
}

/// `struct ibv_comp_channel`: a file descriptor on which the CQs attached to it signal
/// completion *events*, so a thread can sleep instead of busy-polling (`-e`).
pub struct CompChannel {
    raw: NonNull<ffi::ibv_comp_channel>,
    _ctx: Rc<Context>,
}

impl CompChannel {
    /// `ibv_create_comp_channel`.
    pub fn create(ctx: &Rc<Context>) -> Result<Rc<Self>> {
        // ANCHOR: c_ibv_create_comp_channel
        // C: struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context);
        // The channel, or NULL with errno set.
        // SAFETY: ctx is an open context.
        let raw = unsafe { ffi::ibv_create_comp_channel(ctx.raw.as_ptr()) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::verb("ibv_create_comp_channel", io::Error::last_os_error())
        })?;
        // ANCHOR_END: c_ibv_create_comp_channel
        trace::event("ibv_create_comp_channel").emit();
        Ok(Rc::new(CompChannel { raw, _ctx: Rc::clone(ctx) }))
    }

    /// `ibv_get_cq_event`: blocks until a CQ armed with `ibv_req_notify_cq` gets a
    /// completion, and checks that the event is for `cq`. Each event must later be
    /// acknowledged with [`Cq::ack_events`] (the [`Cq`] counts them for that). A
    /// [`Watchdog`]'s signal interrupts the wait: the verb then fails with `EINTR`.
    #[inline]
    pub fn get_cq_event(&self, cq: &Cq) -> Result<()> {
        let mut ev_cq = ptr::null_mut();
        let mut ev_ctx = ptr::null_mut();
        // ANCHOR: c_ibv_get_cq_event
        // C: int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
        //                         void **cq_context);
        // 0, or -1 with errno set: unlike its int-returning neighbours, this verb is a
        // read(2) on the channel's fd underneath, and reports as read(2) does.
        // SAFETY: raw is a live channel and both out-pointers are valid.
        let rc = unsafe { ffi::ibv_get_cq_event(self.raw.as_ptr(), &mut ev_cq, &mut ev_ctx) };
        if rc != 0 {
            return Err(Error::verb("ibv_get_cq_event", io::Error::last_os_error()));
        }
        // ANCHOR_END: c_ibv_get_cq_event
        if ev_cq != cq.raw.as_ptr() {
            return Err(Error::new("ibv_get_cq_event")
                .cause("the event is for a CQ this program did not attach to the channel"));
        }
        cq.unacked.set(cq.unacked.get() + 1);
        Ok(())
    }
}

impl Drop for CompChannel {
    fn drop(&mut self) {
        // SAFETY: CQs using the channel hold an Rc to it, so none is alive any more.
        let rc = unsafe { ffi::ibv_destroy_comp_channel(self.raw.as_ptr()) };
        report_destroy("ibv_destroy_comp_channel", rc);
        trace::event("ibv_destroy_comp_channel").emit();
    }
}

/// A watchdog for a loop that may wait in a verb forever: `ibv_get_cq_event` is a blocking
/// `read()` with no timeout, and an `ibv_poll_cq` loop spins for as long as nothing comes.
///
/// An interval timer (`setitimer`, `SIGALRM`) ticks every `timeout / 4`; its handler looks
/// at a progress counter. When the counter has not moved for four ticks, the watchdog
/// *fires*: it sets a flag the loop can test ([`Watchdog::fired`]) and makes the next
/// ticks (every 10 ms) interrupt system calls, so a blocked `read()` returns `EINTR` and
/// the verb fails; the loop turns that into its explained error. Until then the handler is
/// installed with `SA_RESTART`: a tick during a `read()` resumes it unseen.
///
/// The loop pays one store per message ([`Watchdog::progress`]) and one load per empty
/// poll — no clock and no system call. (Bounding the wait with a `poll(2)` before each
/// `ibv_get_cq_event` costs a system call per message: ≈ 3,000 instructions on rxe, 7 % of
/// a 64-byte round trip. A watchdog *thread* would cost a little too: once a process has
/// a second thread, glibc wraps every `read`/`write` in cancellation-point bookkeeping.)
///
/// One watchdog at a time per process (the timer and the flag are process-wide).
pub struct Watchdog {
    old_action: libc::sigaction,
    // Not Send: SIGALRM goes to the process, and this process's loop is single-threaded.
    _not_send: std::marker::PhantomData<*const ()>,
}

static DOG_ACTIVE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static DOG_PROGRESS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static DOG_SEEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static DOG_IDLE_TICKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
static DOG_FIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Ticks without progress after which the watchdog fires (each tick is `timeout / 4`).
const DOG_TICKS: u32 = 4;

extern "C" fn on_watchdog_tick(_: libc::c_int) {
    use std::sync::atomic::Ordering::Relaxed;
    if DOG_FIRED.load(Relaxed) {
        return; // Already fired: this tick's only job was to interrupt a system call.
    }
    let now = DOG_PROGRESS.load(Relaxed);
    if now != DOG_SEEN.load(Relaxed) {
        DOG_SEEN.store(now, Relaxed);
        DOG_IDLE_TICKS.store(0, Relaxed);
        return;
    }
    let idle = DOG_IDLE_TICKS.load(Relaxed) + 1;
    DOG_IDLE_TICKS.store(idle, Relaxed);
    if idle >= DOG_TICKS {
        DOG_FIRED.store(true, Relaxed);
        // SAFETY: sigaction and setitimer are system calls, safe in a signal handler; the
        // structs are valid. From now on a tick interrupts a blocked read() (no SA_RESTART),
        // and ticks come every 10 ms: this one has already let the read() resume.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_watchdog_tick as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGALRM, &sa, ptr::null_mut());
            let tick = libc::timeval { tv_sec: 0, tv_usec: 10_000 };
            let it = libc::itimerval { it_interval: tick, it_value: tick };
            libc::setitimer(libc::ITIMER_REAL, &it, ptr::null_mut());
        }
    }
}

impl Watchdog {
    /// Starts watching: the caller must call [`Watchdog::progress`] at least once per
    /// `timeout` while things move.
    pub fn start(timeout: std::time::Duration) -> Result<Self> {
        use std::sync::atomic::Ordering::Relaxed;
        if DOG_ACTIVE.swap(true, Relaxed) {
            return Err(Error::new("starting the watchdog").cause("another watchdog is running in this process"));
        }
        DOG_PROGRESS.store(0, Relaxed);
        DOG_SEEN.store(0, Relaxed);
        DOG_IDLE_TICKS.store(0, Relaxed);
        DOG_FIRED.store(false, Relaxed);
        let tick = (timeout / DOG_TICKS).max(std::time::Duration::from_millis(1));
        let tick = libc::timeval {
            tv_sec: tick.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_usec: libc::suseconds_t::from(tick.subsec_micros()),
        };
        // SAFETY: zeroed sigaction/itimerval are valid; the handler only touches atomics and
        // makes system calls; old_action receives the previous disposition, restored in Drop.
        let old_action = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_watchdog_tick as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGALRM, &sa, &mut old) != 0 {
                DOG_ACTIVE.store(false, Relaxed);
                return Err(Error::verb("sigaction(SIGALRM) for the watchdog", io::Error::last_os_error()));
            }
            let it = libc::itimerval { it_interval: tick, it_value: tick };
            if libc::setitimer(libc::ITIMER_REAL, &it, ptr::null_mut()) != 0 {
                let err = io::Error::last_os_error();
                libc::sigaction(libc::SIGALRM, &old, ptr::null_mut());
                DOG_ACTIVE.store(false, Relaxed);
                return Err(Error::verb("setitimer for the watchdog", err));
            }
            old
        };
        Ok(Watchdog { old_action, _not_send: std::marker::PhantomData })
    }

    /// Something moved: a completion came. A load and a store, no system call.
    #[inline]
    pub fn progress(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        DOG_PROGRESS.store(DOG_PROGRESS.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// True once nothing moved for `timeout`.
    #[inline]
    pub fn fired(&self) -> bool {
        DOG_FIRED.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // SAFETY: a zeroed itimerval stops the timer; old_action is the disposition
        // sigaction returned in start. A tick already pending is handled by our handler
        // (still installed) before the old disposition comes back.
        unsafe {
            let stop: libc::itimerval = std::mem::zeroed();
            libc::setitimer(libc::ITIMER_REAL, &stop, ptr::null_mut());
            libc::sigaction(libc::SIGALRM, &self.old_action, ptr::null_mut());
        }
        DOG_ACTIVE.store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

/// `struct ibv_pd`: a protection domain, the security boundary that ties memory regions to
/// the QPs allowed to use them. A QP can only access MRs of its own PD.
pub struct Pd {
    raw: NonNull<ffi::ibv_pd>,
    ctx: Rc<Context>,
}

impl Pd {
    /// `ibv_alloc_pd`.
    pub fn alloc(ctx: &Rc<Context>) -> Result<Rc<Self>> {
        // ANCHOR: c_ibv_alloc_pd
        // C: struct ibv_pd *ibv_alloc_pd(struct ibv_context *context);
        // The PD, or NULL with errno set.
        // SAFETY: ctx is an open context.
        let raw = unsafe { ffi::ibv_alloc_pd(ctx.raw.as_ptr()) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::verb("ibv_alloc_pd", io::Error::last_os_error()))?;
        // ANCHOR_END: c_ibv_alloc_pd
        let pd = Pd { raw, ctx: Rc::clone(ctx) };
        trace::event("ibv_alloc_pd").kv("pd.handle", pd.handle()).emit();
        Ok(Rc::new(pd))
    }

    /// The kernel's handle for this PD (`pd->handle`), small and per-context.
    pub fn handle(&self) -> u32 {
        // SAFETY: raw points to a live ibv_pd.
        unsafe { self.raw.as_ref().handle }
    }

    /// The context the PD was allocated on.
    pub fn context(&self) -> &Rc<Context> {
        &self.ctx
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        let handle = self.handle();
        // SAFETY: MRs and QPs of this PD hold an Rc to it, so none is alive any more.
        let rc = unsafe { ffi::ibv_dealloc_pd(self.raw.as_ptr()) };
        report_destroy("ibv_dealloc_pd", rc);
        trace::event("ibv_dealloc_pd").kv("pd.handle", handle).emit();
    }
}

/// A page-aligned, zero-initialised byte buffer: rc_pingpong's `memalign(page_size, size)`.
///
/// Registration pins whole pages, and page alignment keeps a buffer from sharing a page
/// with unrelated heap data.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl AlignedBuf {
    /// Allocates `len` zeroed bytes aligned to `align` (a power of two).
    pub fn new(align: usize, len: usize) -> Result<Self> {
        let layout = Layout::from_size_align(len, align)
            .ok()
            .filter(|l| l.size() > 0)
            .ok_or_else(|| {
                Error::new(format!("allocating a {len}-byte buffer"))
                    .cause("the size must be at least 1 byte (and fit in memory)")
                    .fix("pass a positive -s/--size")
            })?;
        // The buffer will be registered, and registration pins every page in RAM, where it
        // cannot be swapped out. Refuse a buffer larger than the memory there is, or than
        // what is available right now, before allocating it: the allocation itself may well
        // succeed (Linux overcommits), and then filling and pinning it brings in the OOM
        // killer, which ends the process (or another one) with no message at all.
        let too_big = |cause: String| {
            Error::new(format!("allocating a {len}-byte buffer"))
                .cause(cause)
                .fix("use a smaller -s/--size (rc_pingpong's default is 4096)")
        };
        let len64 = len as u64;
        if let Some(phys) = physical_memory().filter(|&phys| len64 > phys) {
            return Err(too_big(format!(
                "that is more than this machine's memory ({phys} bytes): ibv_reg_mr pins every \
                 page of the buffer in RAM, so it could never be registered"
            )));
        }
        if let Some(avail) = available_memory().filter(|&avail| len64 > avail) {
            return Err(too_big(format!(
                "that is more than the memory available now (MemAvailable in /proc/meminfo: \
                 {avail} bytes): ibv_reg_mr pins every page of the buffer in RAM, where it cannot \
                 be swapped out, so the kernel would have to kill a process to make room"
            )));
        }
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| {
            Error::new(format!("allocating a {len}-byte buffer"))
                .cause("out of memory: the system would not give this process that many bytes")
                .fix("use a smaller -s/--size (rc_pingpong's default is 4096)")
        })?;
        Ok(AlignedBuf { ptr, layout })
    }

    /// The buffer's bytes, writable: to fill it before it is registered (once it is, only
    /// [`Mr::read`] and [`Mr::write`] touch it).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated with this layout and is freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// `struct ibv_mr`: a memory region — a buffer pinned in RAM and registered with the HCA,
/// which may then DMA into and out of it.
///
/// Registration returns two keys: the **lkey**, which local work requests put in their
/// scatter/gather entries, and the **rkey**, which a peer needs (with the address) to
/// access the region with RDMA READ/WRITE. The MR owns its buffer, so the memory cannot
/// be freed while the HCA may still touch it.
///
/// # The buffer belongs to the device too
///
/// Once registered, the buffer may be written by the HCA, by DMA, whenever a receive is
/// posted on it or (with `IBV_ACCESS_REMOTE_WRITE`) whenever a peer holding the rkey
/// chooses; 08 keeps receives posted on its buffer while it checks it, and 09's target is
/// remotely writable for its whole life. A Rust reference promises that nobody else writes
/// the bytes while it lives, a promise this program cannot make for the device. So `Mr`
/// hands out no reference to its bytes: [`Mr::write`] copies into the region and
/// [`Mr::read`] copies out of it, through the raw pointer. C programs (rc_pingpong,
/// perftest) read and write the buffer in place, relying on the rule the copies also rely
/// on: bytes the device writes are only meaningful after the completion that reports them,
/// and that completion is seen through a call into libibverbs, which the compiler cannot
/// see through, so no read of the buffer is moved before it.
pub struct Mr {
    raw: NonNull<ffi::ibv_mr>,
    // Freed by Drop after a successful deregistration, and only then: see Drop.
    buf: ManuallyDrop<AlignedBuf>,
    _pd: Rc<Pd>,
}

impl Mr {
    /// `ibv_reg_mr(pd, buf, len, access)`: registers all of `buf` with `access` rights.
    pub fn reg(pd: &Rc<Pd>, mut buf: AlignedBuf, access: ffi::ibv_access_flags) -> Result<Self> {
        let len = buf.layout.size();
        let addr = buf.as_mut_slice().as_mut_ptr();
        // ANCHOR: c_ibv_reg_mr
        // C: struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
        //                              int access);
        // The MR (its lkey and rkey inside), or NULL with errno set.
        // SAFETY: pd is live; addr..addr+len is a live allocation that the Mr keeps alive
        // (it owns `buf`) until after ibv_dereg_mr.
        let raw = unsafe { ffi::ibv_reg_mr(pd.raw.as_ptr(), addr.cast(), len, access.0 as i32) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            let err = io::Error::last_os_error();
            let enomem = err.raw_os_error() == Some(libc::ENOMEM);
            let failed = Error::verb(format!("ibv_reg_mr(length {len}, {})", names::access_names(access.0)), err);
            if enomem { explain_pin_failure(failed, len) } else { failed }
        })?;
        // ANCHOR_END: c_ibv_reg_mr
        let mr = Mr { raw, buf: ManuallyDrop::new(buf), _pd: Rc::clone(pd) };
        trace::event("ibv_reg_mr")
            .kv("addr", Hex64(mr.addr()))
            .kv("length", len)
            .kv("access", names::access_names(access.0))
            .kv("lkey", Key(mr.lkey()))
            .kv("rkey", Key(mr.rkey()))
            .emit();
        Ok(mr)
    }

    fn raw(&self) -> &ffi::ibv_mr {
        // SAFETY: raw points to a live ibv_mr that only ibv_dereg_mr (in Drop) frees.
        unsafe { self.raw.as_ref() }
    }

    /// The local key, for the `lkey` of scatter/gather entries.
    pub fn lkey(&self) -> u32 {
        self.raw().lkey
    }

    /// The remote key a peer needs to RDMA into or out of this region.
    pub fn rkey(&self) -> u32 {
        self.raw().rkey
    }

    /// The region's start address, as work requests (`sge.addr`, `remote_addr`) use it.
    pub fn addr(&self) -> u64 {
        self.raw().addr as u64
    }

    /// The region's length in bytes.
    pub fn len(&self) -> usize {
        self.raw().length
    }

    /// Always false: a region has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of `len` bytes of the region from `offset` (clamped to its end).
    ///
    /// The HCA writes the region by DMA when a receive or an incoming RDMA WRITE lands. What
    /// a copy holds is meaningful only after a completion on *this* side says the data is
    /// there: the receive's own, or, for an RDMA WRITE into the region, that of a later
    /// message on the same QP (an immediate). The writer's send completion is no such
    /// promise to us: InfiniBand orders completions, not the placement of bytes.
    pub fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        let start = offset.min(self.buf.layout.size());
        let len = len.min(self.buf.layout.size() - start);
        let mut out = vec![0; len];
        // SAFETY: start..start+len lies inside the live allocation; `out` is a separate
        // allocation. No reference to the region is made, so bytes the device writes
        // meanwhile break no aliasing promise (see the type's doc).
        unsafe { ptr::copy_nonoverlapping(self.buf.ptr.as_ptr().add(start), out.as_mut_ptr(), len) };
        out
    }

    /// Copies `data` into the region at `offset`, as far as the region reaches: fill it
    /// before posting the work request that sends it.
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        let start = offset.min(self.buf.layout.size());
        let len = data.len().min(self.buf.layout.size() - start);
        // SAFETY: as in `read`, the other way round.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.buf.ptr.as_ptr().add(start), len) };
    }

    /// True if `sge` lies inside this region and carries its lkey: the check the HCA does
    /// for DMA, done on the CPU side before an inline send copies from `sge.addr`.
    fn covers(&self, sge: &ibv_sge) -> bool {
        let start = self.addr();
        let end = start + self.len() as u64;
        sge.lkey == self.lkey()
            && sge.addr >= start
            && sge.addr.checked_add(u64::from(sge.length)).is_some_and(|e| e <= end)
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        let lkey = self.lkey();
        // SAFETY: raw is a live MR, deregistered exactly once.
        let rc = unsafe { ffi::ibv_dereg_mr(self.raw.as_ptr()) };
        report_destroy("ibv_dereg_mr", rc);
        trace::event("ibv_dereg_mr").kv("lkey", Key(lkey)).emit();
        if rc == 0 {
            // SAFETY: the region is deregistered, so the device no longer writes the buffer;
            // it is dropped exactly once, here.
            unsafe { ManuallyDrop::drop(&mut self.buf) };
        } else {
            // A failed deregistration leaves the pages registered: the device may still
            // write them. Freeing them would hand that memory to the allocator, so leak it
            // (the kernel deregisters the region when the process exits).
            eprintln!("note: the MR's {} bytes are left allocated, not freed", self.buf.layout.size());
        }
    }
}

/// `struct ibv_cq`: a completion queue, where the HCA reports finished work requests as
/// work completions (`ibv_wc`) for the program to poll.
pub struct Cq {
    raw: NonNull<ffi::ibv_cq>,
    unacked: Cell<u32>,
    _channel: Option<Rc<CompChannel>>,
    _ctx: Rc<Context>,
}

impl Cq {
    /// `ibv_create_cq(ctx, cqe, NULL, channel, comp_vector)`: a CQ with room for at least
    /// `cqe` completions, optionally attached to a completion channel.
    pub fn create(
        ctx: &Rc<Context>,
        cqe: i32,
        channel: Option<&Rc<CompChannel>>,
        comp_vector: i32,
    ) -> Result<Rc<Self>> {
        let ch = channel.map_or(ptr::null_mut(), |c| c.raw.as_ptr());
        // ANCHOR: c_ibv_create_cq
        // C: struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
        //                                 void *cq_context,
        //                                 struct ibv_comp_channel *channel,
        //                                 int comp_vector);
        // The CQ, or NULL with errno set.
        // SAFETY: ctx is open; ch is NULL or a live channel that the Cq keeps alive.
        let raw = unsafe {
            ffi::ibv_create_cq(ctx.raw.as_ptr(), cqe, ptr::null_mut(), ch, comp_vector)
        };
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::verb(format!("ibv_create_cq(cqe {cqe})"), io::Error::last_os_error())
        })?;
        // ANCHOR_END: c_ibv_create_cq
        let cq = Cq { raw, unacked: Cell::new(0), _channel: channel.cloned(), _ctx: Rc::clone(ctx) };
        trace::event("ibv_create_cq")
            .kv("cqe", cqe)
            .kv("channel", if channel.is_some() { "yes" } else { "NULL" })
            .kv("comp_vector", comp_vector)
            .kv("cq.cqe", cq.cqe())
            .emit();
        Ok(Rc::new(cq))
    }

    /// The number of entries the device actually gave the CQ (`cq->cqe`, ≥ what was asked).
    pub fn cqe(&self) -> i32 {
        // SAFETY: raw points to a live ibv_cq.
        unsafe { self.raw.as_ref().cqe }
    }

    /// The raw handle, for `ibv_qp_init_attr.send_cq`/`recv_cq`; only [`Qp::create`]
    /// uses it, after checking it belongs to the CQ it is given.
    pub fn as_ptr(&self) -> *mut ffi::ibv_cq {
        self.raw.as_ptr()
    }

    /// `ibv_poll_cq`: moves up to `wc.len()` completions into `wc`, returns how many.
    /// Never blocks; 0 means the CQ is empty right now.
    #[inline]
    pub fn poll(&self, wc: &mut [ibv_wc]) -> Result<usize> {
        let n = i32::try_from(wc.len()).unwrap_or(i32::MAX);
        // ANCHOR: c_ibv_poll_cq
        // C: static inline int ibv_poll_cq(struct ibv_cq *cq, int num_entries,
        //                                  struct ibv_wc *wc);
        // How many completions it moved into wc (0: none yet), or a negative number when
        // polling itself failed. A failed *work request* is not a failed poll: it is a
        // completion like any other, with a status other than IBV_WC_SUCCESS.
        // The inline calls the provider through the context's ops table, and so do we.
        // SAFETY: raw is a live CQ whose context is open; wc has room for n entries.
        let ne = unsafe {
            let cq = self.raw.as_ptr();
            let poll = (*(*cq).context).ops.poll_cq.expect("provider without poll_cq");
            poll(cq, n, wc.as_mut_ptr())
        };
        usize::try_from(ne).map_err(|_| {
            Error::new(format!("ibv_poll_cq returned {ne}")).cause("the CQ is in error (overrun?)")
        })
        // ANCHOR_END: c_ibv_poll_cq
    }

    /// `ibv_req_notify_cq`: arms the CQ so the next completion (the next *solicited* one if
    /// `solicited_only`) raises one event on its completion channel. One-shot: re-arm after
    /// each event.
    #[inline]
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        // ANCHOR: c_ibv_req_notify_cq
        // C: static inline int ibv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
        // 0, or the error number itself.
        // SAFETY: as in poll; req_notify_cq is another static inline over the ops table.
        let rc = unsafe {
            let cq = self.raw.as_ptr();
            let notify = (*(*cq).context).ops.req_notify_cq.expect("provider without req_notify_cq");
            notify(cq, i32::from(solicited_only))
        };
        check("ibv_req_notify_cq", rc)
        // ANCHOR_END: c_ibv_req_notify_cq
    }

    /// `ibv_ack_cq_events(cq, n)` for every event received so far and not yet acked.
    ///
    /// Acknowledging takes a mutex, so it is done in bulk, as rc_pingpong does at the end.
    /// `ibv_destroy_cq` waits until all events are acked; Drop acks leftovers so an early
    /// error exit cannot hang.
    pub fn ack_events(&self) -> u32 {
        let n = self.unacked.replace(0);
        if n > 0 {
            // ANCHOR: c_ibv_ack_cq_events
            // C: void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents);
            // Cannot fail; ibv_destroy_cq waits until every event has been acknowledged.
            // SAFETY: raw is a live CQ and n events were received and not yet acked.
            unsafe { ffi::ibv_ack_cq_events(self.raw.as_ptr(), n) };
            // ANCHOR_END: c_ibv_ack_cq_events
        }
        n
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        self.ack_events();
        // SAFETY: QPs using this CQ hold an Rc to it, so none is alive any more.
        let rc = unsafe { ffi::ibv_destroy_cq(self.raw.as_ptr()) };
        report_destroy("ibv_destroy_cq", rc);
        trace::event("ibv_destroy_cq").emit();
    }
}

/// `struct ibv_qp`: a queue pair — a send queue and a receive queue — the endpoint of an
/// RDMA connection. An RC QP is connected to exactly one remote QP and walks the state
/// machine RESET → INIT → RTR (ready to receive) → RTS (ready to send) through
/// `ibv_modify_qp` before it can carry traffic.
pub struct Qp {
    raw: NonNull<ffi::ibv_qp>,
    state: Cell<ffi::ibv_qp_state::Type>,
    _cq: Rc<Cq>,
    _pd: Rc<Pd>,
}

impl Qp {
    /// `ibv_create_qp(pd, &init_attr)`. `init_attr.send_cq` and `.recv_cq` must both be
    /// `cq`: the QP keeps that CQ alive.
    pub fn create(pd: &Rc<Pd>, cq: &Rc<Cq>, mut init_attr: ibv_qp_init_attr) -> Result<Self> {
        if init_attr.send_cq != cq.as_ptr() || init_attr.recv_cq != cq.as_ptr() {
            return Err(Error::new("ibv_create_qp")
                .cause("init_attr.send_cq/recv_cq must be the CQ passed to Qp::create"));
        }
        let asked = init_attr.cap;
        // ANCHOR: c_ibv_create_qp
        // C: struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
        //                                 struct ibv_qp_init_attr *qp_init_attr);
        // The QP (in RESET), or NULL with errno set; qp_init_attr->cap is written back with
        // the capacities granted.
        // SAFETY: pd is live, init_attr is valid and its CQs are `cq`, kept alive by the Qp.
        let raw = unsafe { ffi::ibv_create_qp(pd.raw.as_ptr(), &mut init_attr) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::verb("ibv_create_qp", io::Error::last_os_error()))?;
        // ANCHOR_END: c_ibv_create_qp
        let qp = Qp {
            raw,
            state: Cell::new(IBV_QPS_RESET),
            _cq: Rc::clone(cq),
            _pd: Rc::clone(pd),
        };
        // ibv_create_qp writes back the capacities it granted, which may exceed the request.
        let got = init_attr.cap;
        trace::event("ibv_create_qp")
            .kv("qp_type", if init_attr.qp_type == IBV_QPT_RC { "IBV_QPT_RC" } else { "other" })
            .kv("cap.max_send_wr", format!("{}→{}", asked.max_send_wr, got.max_send_wr))
            .kv("cap.max_recv_wr", format!("{}→{}", asked.max_recv_wr, got.max_recv_wr))
            .kv("cap.max_send_sge", format!("{}→{}", asked.max_send_sge, got.max_send_sge))
            .kv("cap.max_recv_sge", format!("{}→{}", asked.max_recv_sge, got.max_recv_sge))
            .kv("qp_num", Qpn(qp.qp_num()))
            .emit();
        Ok(qp)
    }

    /// The QP number, chosen by the device; the peer needs it as its `dest_qp_num`.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: raw points to a live ibv_qp.
        unsafe { self.raw.as_ref().qp_num }
    }

    /// The state this QP was last moved to by [`Qp::modify`].
    pub fn state(&self) -> ffi::ibv_qp_state::Type {
        self.state.get()
    }

    /// `ibv_query_qp(qp, &attr, IBV_QP_CAP, &init_attr)`: the capacities the QP really has,
    /// notably `max_inline_data`.
    pub fn query_cap(&self) -> Result<ibv_qp_cap> {
        let mut attr = ibv_qp_attr::default();
        let mut init_attr = ibv_qp_init_attr::default();
        // ANCHOR: c_ibv_query_qp
        // C: int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
        //                     struct ibv_qp_init_attr *init_attr);
        // 0, or the error number itself.
        // SAFETY: raw is live; both out-pointers are valid.
        let rc = unsafe {
            ffi::ibv_query_qp(self.raw.as_ptr(), &mut attr, IBV_QP_CAP.0 as i32, &mut init_attr)
        };
        check("ibv_query_qp(IBV_QP_CAP)", rc)?;
        // ANCHOR_END: c_ibv_query_qp
        Ok(init_attr.cap)
    }

    /// `ibv_modify_qp(qp, &attr, mask)`: only the fields whose flag is in `mask` are read.
    ///
    /// The call is traced before it is made, so a failure shows what was asked.
    pub fn modify(&self, attr: &ibv_qp_attr, mask: ibv_qp_attr_mask) -> Result<()> {
        let from = self.state.get();
        names::trace_modify_qp(self.qp_num(), from, attr, mask);
        let mut attr = *attr;
        // ANCHOR: c_ibv_modify_qp
        // C: int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
        // 0, or the error number itself (rc_pingpong prints neither: "Failed to modify QP
        // to RTR"). On failure nothing is modified, the state included.
        // SAFETY: raw is live and attr a valid struct (the verb does not keep the pointer).
        let rc = unsafe { ffi::ibv_modify_qp(self.raw.as_ptr(), &mut attr, mask.0 as i32) };
        let to = if mask.0 & IBV_QP_STATE.0 != 0 { attr.qp_state } else { from };
        check(
            &format!("ibv_modify_qp {}→{}", names::state_name(from), names::state_name(to)),
            rc,
        )?;
        // ANCHOR_END: c_ibv_modify_qp
        self.state.set(to);
        Ok(())
    }

    /// `ibv_post_send(qp, &wr, &bad_wr)` for one work request whose gather list is
    /// `sg_list`, every entry of which must lie in `mr`.
    ///
    /// The wrapper sets `wr.sg_list`, `wr.num_sge` and `wr.next` itself: they are raw
    /// pointers, and the HCA (or, for an inline send, this very call) reads through them,
    /// so they must point at memory that is checked to be valid.
    #[inline]
    pub fn post_send(&self, wr: &mut ibv_send_wr, sg_list: &[ibv_sge], mr: &Mr) -> Result<()> {
        attach(wr, sg_list, mr, Range::Whole, "ibv_post_send", "a gather entry lies outside its MR")?;
        self.post_attached_send(wr)
    }

    /// [`Qp::post_send`] with the gather entries' keys and start addresses checked against
    /// `mr`, but not where they end: the device checks that, as it does for any C program,
    /// and an entry that runs past its MR fails the WR with `IBV_WC_LOC_PROT_ERR`. Sound
    /// because the device reads the data by DMA through the MR's own translation, which
    /// covers the registered pages and nothing else; an *inline* send, which the library
    /// copies from `addr` itself at post time, is refused. Only `07_post_send --break
    /// sge-past-mr` uses it, so the device can be seen doing the check.
    pub fn post_send_unchecked_end(&self, wr: &mut ibv_send_wr, sg_list: &[ibv_sge], mr: &Mr) -> Result<()> {
        if wr.send_flags & IBV_SEND_INLINE.0 != 0 {
            return Err(Error::new("ibv_post_send").cause(
                "an inline send is copied from its gather entries at post time, by the CPU: \
                 an entry past its MR would be read past the buffer",
            ));
        }
        attach(wr, sg_list, mr, Range::StartOnly, "ibv_post_send", "a gather entry starts outside its MR")?;
        self.post_attached_send(wr)
    }

    /// `ibv_post_send` of `wr`, whose list [`attach`] has set.
    #[inline]
    fn post_attached_send(&self, wr: &mut ibv_send_wr) -> Result<()> {
        let mut bad_wr = ptr::null_mut();
        // ANCHOR: c_ibv_post_send
        // C: static inline int ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
        //                                    struct ibv_send_wr **bad_wr);
        // 0, or the error number itself, with *bad_wr set to the first WR of the list that
        // was not posted (those before it were). An error here means the WR was refused at
        // the door (a full queue, a bad opcode, too many SGEs); whether a posted WR worked
        // is known only from its completion. The inline is a call through the ops table.
        // SAFETY: raw is live; wr is one valid WR (its list set by attach) whose gather
        // entries lie in a registered MR (checked by attach) that outlives the call; the verb
        // reads them and keeps no pointer into `wr` after returning.
        let rc = unsafe {
            let qp = self.raw.as_ptr();
            let post = (*(*qp).context).ops.post_send.expect("provider without post_send");
            post(qp, wr, &mut bad_wr)
        };
        check("ibv_post_send", rc)
        // ANCHOR_END: c_ibv_post_send
    }

    /// `ibv_post_recv(qp, &wr, &bad_wr)` for one work request whose scatter list is
    /// `sg_list`, every entry of which must lie in `mr`. Same pointer rules as
    /// [`Qp::post_send`].
    #[inline]
    pub fn post_recv(&self, wr: &mut ibv_recv_wr, sg_list: &[ibv_sge], mr: &Mr) -> Result<()> {
        attach(wr, sg_list, mr, Range::Whole, "ibv_post_recv", "a scatter entry lies outside its MR")?;
        let mut bad_wr = ptr::null_mut();
        // ANCHOR: c_ibv_post_recv
        // C: static inline int ibv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
        //                                    struct ibv_recv_wr **bad_wr);
        // 0, or the error number itself with *bad_wr set, as for ibv_post_send.
        // SAFETY: as in post_send; ibv_post_recv is the same kind of static inline.
        let rc = unsafe {
            let qp = self.raw.as_ptr();
            let post = (*(*qp).context).ops.post_recv.expect("provider without post_recv");
            post(qp, wr, &mut bad_wr)
        };
        check("ibv_post_recv", rc)
        // ANCHOR_END: c_ibv_post_recv
    }
}

/// What a send and a receive work request share: a scatter/gather list and a `next` link.
trait WorkRequest {
    fn set_list(&mut self, sg_list: *mut ibv_sge, num_sge: i32);
}

impl WorkRequest for ibv_send_wr {
    fn set_list(&mut self, sg_list: *mut ibv_sge, num_sge: i32) {
        (self.sg_list, self.num_sge, self.next) = (sg_list, num_sge, ptr::null_mut());
    }
}

impl WorkRequest for ibv_recv_wr {
    fn set_list(&mut self, sg_list: *mut ibv_sge, num_sge: i32) {
        (self.sg_list, self.num_sge, self.next) = (sg_list, num_sge, ptr::null_mut());
    }
}

/// How much of each entry's range [`attach`] checks against its MR.
#[derive(Clone, Copy, PartialEq)]
enum Range {
    /// All of it.
    Whole,
    /// Only that it starts inside (see [`Qp::post_send_unchecked_end`]).
    StartOnly,
}

/// Points `wr` at `sg_list` (and at no next WR), after checking that every entry quotes
/// `mr`'s lkey and lies in it (with [`Range::StartOnly`], starts in it): the pointers the
/// verb will follow then point at registered memory.
#[inline]
fn attach(wr: &mut impl WorkRequest, sg_list: &[ibv_sge], mr: &Mr, range: Range, verb: &str, outside: &str) -> Result<()> {
    let ok = |sge: &ibv_sge| match range {
        Range::Whole => mr.covers(sge),
        Range::StartOnly => mr.covers(&ibv_sge { length: 0, ..*sge }) && sge.addr < mr.addr() + mr.len() as u64,
    };
    if !sg_list.iter().all(ok) {
        return Err(Error::new(verb).cause(outside));
    }
    wr.set_list(sg_list.as_ptr().cast_mut(), sg_list.len() as i32);
    Ok(())
}

impl Drop for Qp {
    fn drop(&mut self) {
        let qp_num = self.qp_num();
        // SAFETY: raw is a live QP destroyed exactly once. Its outstanding WRs get no
        // completions at all (the provider drops them): a caller that wants them back
        // moves the QP to ERR and polls the flushes first.
        let rc = unsafe { ffi::ibv_destroy_qp(self.raw.as_ptr()) };
        report_destroy("ibv_destroy_qp", rc);
        trace::event("ibv_destroy_qp").kv("qp_num", Qpn(qp_num)).emit();
    }
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
