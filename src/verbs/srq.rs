//! The shared receive queue (SRQ), and the asynchronous events through which the device
//! reports what no completion can: here, that an SRQ is running low.

use std::io;
use std::ptr::{self, NonNull};
use std::rc::Rc;

use ibverbs_sys as ffi;

use super::qp::{attach, Range};
use super::*;
use crate::error::{Error, Result};
use crate::trace;

/// `struct ibv_srq`: one pool of receive work requests that any number of QPs of the same
/// PD take from. A QP created with `init_attr.srq` set has no receive queue of its own: a
/// message that arrives for it consumes the SRQ's oldest receive, whichever QP it came on.
pub struct Srq {
    raw: NonNull<ffi::ibv_srq>,
    _pd: Rc<Pd>,
}

impl Srq {
    /// `ibv_create_srq(pd, &init_attr)` with room for `max_wr` receives of `max_sge`
    /// scatter entries each. The device may grant more: `init_attr.attr` is written back.
    pub fn create(pd: &Rc<Pd>, max_wr: u32, max_sge: u32) -> Result<Rc<Self>> {
        // Zeroed whole, padding included, and not built as a literal (which leaves the 4
        // bytes of padding after `attr` undefined): libibverbs' ibv_cmd_create_srq copies
        // sizeof(struct ibv_srq_init_attr) into a struct ibv_srq_init_attr_ex, where those
        // bytes become `comp_mask`, which it then tests (rdma-core v44 cmd_srq.c; valgrind
        // reports the test when they are left undefined).
        // SAFETY: all-zero bytes are a valid ibv_srq_init_attr (a null pointer and zeros).
        let mut init_attr: ffi::ibv_srq_init_attr = unsafe { std::mem::zeroed() };
        init_attr.attr = ffi::ibv_srq_attr { max_wr, max_sge, srq_limit: 0 };
        // ANCHOR: c_ibv_create_srq
        // C: struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
        //                                   struct ibv_srq_init_attr *srq_init_attr);
        // The SRQ, or NULL with errno set; srq_init_attr->attr is written back with the
        // max_wr and max_sge granted. srq_limit must be 0 here: the limit is armed later,
        // with ibv_modify_srq.
        // SAFETY: pd is live and init_attr a valid struct the verb does not keep.
        let raw = unsafe { ffi::ibv_create_srq(pd.raw.as_ptr(), &mut init_attr) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::verb(format!("ibv_create_srq(max_wr {max_wr})"), io::Error::last_os_error()))?;
        // ANCHOR_END: c_ibv_create_srq
        let got = init_attr.attr;
        trace::event("ibv_create_srq")
            .kv("attr.max_wr", format!("{max_wr}→{}", got.max_wr))
            .kv("attr.max_sge", format!("{max_sge}→{}", got.max_sge))
            .emit();
        Ok(Rc::new(Srq { raw, _pd: Rc::clone(pd) }))
    }

    /// The raw handle, for `ibv_qp_init_attr.srq`; only [`Qp::create_on_srq`] uses it.
    pub(super) fn as_ptr(&self) -> *mut ffi::ibv_srq {
        self.raw.as_ptr()
    }

    /// `ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT)`: arms the limit. When fewer than `limit`
    /// receives are left in the SRQ, the device raises one `IBV_EVENT_SRQ_LIMIT_REACHED`
    /// and disarms it (the limit reads 0 again): one-shot, like `ibv_req_notify_cq`.
    pub fn arm_limit(&self, limit: u32) -> Result<()> {
        let mut attr = ffi::ibv_srq_attr { max_wr: 0, max_sge: 0, srq_limit: limit };
        // ANCHOR: c_ibv_modify_srq
        // C: int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
        //                       int srq_attr_mask);
        // 0, or the error number itself. IBV_SRQ_LIMIT arms the limit; IBV_SRQ_MAX_WR would
        // resize the SRQ, which few devices allow (rxe does).
        // SAFETY: raw is live and attr a valid struct the verb does not keep.
        let rc = unsafe { ffi::ibv_modify_srq(self.raw.as_ptr(), &mut attr, ffi::IBV_SRQ_LIMIT as i32) };
        check(&format!("ibv_modify_srq(IBV_SRQ_LIMIT {limit})"), rc)
        // ANCHOR_END: c_ibv_modify_srq
    }

    /// `ibv_query_srq`: the SRQ's attributes now (`srq_limit` 0: not armed).
    pub fn query(&self) -> Result<ffi::ibv_srq_attr> {
        let mut attr = ffi::ibv_srq_attr::default();
        // SAFETY: raw is live and attr a valid out-pointer.
        let rc = unsafe { ffi::ibv_query_srq(self.raw.as_ptr(), &mut attr) };
        check("ibv_query_srq", rc)?;
        Ok(attr)
    }

    /// `ibv_post_srq_recv(srq, &wr, &bad_wr)` for one work request whose scatter list is
    /// `sg_list`, every entry of which must lie in `mr`: [`Qp::post_recv`]'s rules.
    #[inline]
    pub fn post_recv(&self, wr: &mut ibv_recv_wr, sg_list: &[ibv_sge], mr: &Mr) -> Result<()> {
        attach(wr, sg_list, mr, Range::Whole, "ibv_post_srq_recv", "a scatter entry lies outside its MR")?;
        let mut bad_wr = ptr::null_mut();
        // ANCHOR: c_ibv_post_srq_recv
        // C: static inline int ibv_post_srq_recv(struct ibv_srq *srq,
        //                                        struct ibv_recv_wr *recv_wr,
        //                                        struct ibv_recv_wr **bad_recv_wr);
        // 0, or the error number itself with *bad_recv_wr set, as for ibv_post_recv.
        // SAFETY: as in Qp::post_recv; this inline too calls through the ops table.
        let rc = unsafe {
            let srq = self.raw.as_ptr();
            let post = (*(*srq).context).ops.post_srq_recv.expect("provider without post_srq_recv");
            post(srq, wr, &mut bad_wr)
        };
        // The man page promises errno's value. rxe's provider keeps that promise since
        // rdma-core v40 (Debian 12 ships v44, Debian 13 v56), but siw's, in both, still
        // returns it negated and sets no errno (-ENOMEM for a full SRQ, siw_post_srq_recv):
        // turn a negative error number round, so every provider gives ENOMEM.
        let rc = if rc < -1 { -rc } else { rc };
        check("ibv_post_srq_recv", rc).map_err(|err| self.explain_post(err))
        // ANCHOR_END: c_ibv_post_srq_recv
    }

    /// Explains an `ENOMEM` from `ibv_post_srq_recv`: the SRQ is full.
    #[cold]
    fn explain_post(&self, err: Error) -> Error {
        if err.errno() != Some(libc::ENOMEM) {
            return err;
        }
        let depth = self.query().map_or("max_wr".to_string(), |attr| format!("max_wr = {}", attr.max_wr));
        err.cause(format!(
            "the SRQ is full: {depth} receives are posted and none has been consumed yet. A \
             receive's slot is free again once a message has used it (its completion tells)"
        ))
        .fix("post at most max_wr receives, and refill only as many as have completed")
    }
}

impl Drop for Srq {
    fn drop(&mut self) {
        // SAFETY: QPs on this SRQ hold an Rc to it, so none is alive any more. (An
        // unacknowledged event about it would make this wait: an AsyncEvent acks on drop.)
        let rc = unsafe { ffi::ibv_destroy_srq(self.raw.as_ptr()) };
        report_destroy("ibv_destroy_srq", rc);
        trace::event("ibv_destroy_srq").emit();
    }
}

/// Where receives are posted: a QP's own receive queue, or an SRQ that QPs share. Lets one
/// `pp_post_recv` serve both (rc_pingpong's `ibv_post_recv`, srq_pingpong's
/// `ibv_post_srq_recv`).
pub trait RecvQueue {
    /// The verb that posts to it, for the trace.
    const VERB: &'static str;
    /// Posts one receive work request, as [`Qp::post_recv`].
    fn post_recv(&self, wr: &mut ibv_recv_wr, sg_list: &[ibv_sge], mr: &Mr) -> Result<()>;
}

impl RecvQueue for Qp {
    const VERB: &'static str = "ibv_post_recv";
    #[inline]
    fn post_recv(&self, wr: &mut ibv_recv_wr, sg_list: &[ibv_sge], mr: &Mr) -> Result<()> {
        Qp::post_recv(self, wr, sg_list, mr)
    }
}

impl RecvQueue for Srq {
    const VERB: &'static str = "ibv_post_srq_recv";
    #[inline]
    fn post_recv(&self, wr: &mut ibv_recv_wr, sg_list: &[ibv_sge], mr: &Mr) -> Result<()> {
        Srq::post_recv(self, wr, sg_list, mr)
    }
}
