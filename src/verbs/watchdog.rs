//! A bound on a loop that may wait in a verb forever.

use std::io;
use std::ptr;

use crate::error::{Error, Result};

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
