//! Completions: the completion channel (`-e`), the completion queue, and the names of
//! a work completion's status.

use std::cell::Cell;
use std::ffi::CStr;
use std::io;
use std::ptr::{self, NonNull};
use std::rc::Rc;

use ibverbs_sys as ffi;

use super::*;
use crate::error::{Error, Result};
use crate::trace;

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
        let raw =
            NonNull::new(raw).ok_or_else(|| Error::verb("ibv_create_comp_channel", io::Error::last_os_error()))?;
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
        let raw = unsafe { ffi::ibv_create_cq(ctx.raw.as_ptr(), cqe, ptr::null_mut(), ch, comp_vector) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::verb(format!("ibv_create_cq(cqe {cqe})"), io::Error::last_os_error()))?;
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
        usize::try_from(ne)
            .map_err(|_| Error::new(format!("ibv_poll_cq returned {ne}")).cause("the CQ is in error (overrun?)"))
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
