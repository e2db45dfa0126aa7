//! Memory: the protection domain, the page-aligned buffer, and the memory region that
//! registers it — and why registering can fail for want of memory.

use std::alloc::{self, Layout};
use std::io;
use std::mem::ManuallyDrop;
use std::ptr::{self, NonNull};
use std::rc::Rc;

use ibverbs_sys as ffi;

use super::*;
use crate::error::{Error, Result};
use crate::trace::{self, Hex64, Key};

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

/// `struct ibv_pd`: a protection domain, the security boundary that ties memory regions to
/// the QPs allowed to use them. A QP can only access MRs of its own PD.
pub struct Pd {
    pub(super) raw: NonNull<ffi::ibv_pd>,
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
        let raw = NonNull::new(raw).ok_or_else(|| Error::verb("ibv_alloc_pd", io::Error::last_os_error()))?;
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
    /// Allocates `len` zeroed bytes aligned to `align` (a power of two). What the size
    /// should be is the caller's to say: `stages::reg_mr` refuses one larger than memory,
    /// with advice about the flag that set it.
    pub fn new(align: usize, len: usize) -> Result<Self> {
        let layout = Layout::from_size_align(len, align).ok().filter(|l| l.size() > 0).ok_or_else(|| {
            Error::new(format!("allocating a {len}-byte buffer"))
                .cause("the size must be at least 1 byte (and fit in memory)")
                .fix("allocate at least 1 byte")
        })?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| {
            Error::new(format!("allocating a {len}-byte buffer"))
                .cause("out of memory: the system would not give this process that many bytes")
                .fix("allocate fewer bytes")
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
            if enomem {
                explain_pin_failure(failed, len)
            } else {
                failed
            }
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
        let mut out = vec![0; len.min(self.buf.layout.size() - start)];
        self.read_into(offset, &mut out);
        out
    }

    /// [`Mr::read`] into `out`, without an allocation (a timed loop's read): copies as much
    /// of `out` as the region reaches from `offset`, and returns how much that was.
    #[inline]
    pub fn read_into(&self, offset: usize, out: &mut [u8]) -> usize {
        let start = offset.min(self.buf.layout.size());
        let len = out.len().min(self.buf.layout.size() - start);
        // SAFETY: start..start+len lies inside the live allocation; `out` is a separate
        // borrow. No reference to the region is made, so bytes the device writes
        // meanwhile break no aliasing promise (see the type's doc).
        unsafe { ptr::copy_nonoverlapping(self.buf.ptr.as_ptr().add(start), out.as_mut_ptr(), len) };
        len
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
    pub(super) fn covers(&self, sge: &ibv_sge) -> bool {
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
