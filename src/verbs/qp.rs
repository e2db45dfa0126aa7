//! The queue pair: creation, the state machine (`ibv_modify_qp`), and posting work
//! requests.

use std::cell::Cell;
use std::io;
use std::ptr::{self, NonNull};
use std::rc::Rc;

use ibverbs_sys as ffi;

use super::*;
use crate::error::{Error, Result};
use crate::trace::{self, Qpn};

/// `struct ibv_qp`: a queue pair — a send queue and a receive queue — the endpoint of an
/// RDMA connection. An RC QP is connected to exactly one remote QP and walks the state
/// machine RESET → INIT → RTR (ready to receive) → RTS (ready to send) through
/// `ibv_modify_qp` before it can carry traffic.
pub struct Qp {
    raw: NonNull<ffi::ibv_qp>,
    state: Cell<ffi::ibv_qp_state::Type>,
    // The CM id that created it (rdma_create_qp), which destroys it: `None` for ours.
    cm: Option<Rc<CmId>>,
    _cq: Rc<Cq>,
    _pd: Rc<Pd>,
}

impl Qp {
    /// `ibv_create_qp(pd, &init_attr)`. `init_attr.send_cq` and `.recv_cq` must both be
    /// `cq`: the QP keeps that CQ alive.
    pub fn create(pd: &Rc<Pd>, cq: &Rc<Cq>, mut init_attr: ibv_qp_init_attr) -> Result<Self> {
        if init_attr.send_cq != cq.as_ptr() || init_attr.recv_cq != cq.as_ptr() {
            return Err(
                Error::new("ibv_create_qp").cause("init_attr.send_cq/recv_cq must be the CQ passed to Qp::create")
            );
        }
        let asked = init_attr.cap;
        // ANCHOR: c_ibv_create_qp
        // C: struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
        //                                 struct ibv_qp_init_attr *qp_init_attr);
        // The QP (in RESET), or NULL with errno set; qp_init_attr->cap is written back with
        // the capacities granted.
        // SAFETY: pd is live, init_attr is valid and its CQs are `cq`, kept alive by the Qp.
        let raw = unsafe { ffi::ibv_create_qp(pd.raw.as_ptr(), &mut init_attr) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::verb("ibv_create_qp", io::Error::last_os_error()))?;
        // ANCHOR_END: c_ibv_create_qp
        let qp = Qp { raw, state: Cell::new(IBV_QPS_RESET), cm: None, _cq: Rc::clone(cq), _pd: Rc::clone(pd) };
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

    /// `rdma_create_qp(id, pd, &init_attr)`: the CM creates the QP on the id's device and
    /// moves it to INIT itself (on InfiniBand and RoCE; on iWARP too), with the attributes
    /// `rdma_init_qp_attr` gives. Later, `rdma_connect`/`rdma_accept` move it on to RTR and
    /// RTS. `init_attr`'s CQs must be `cq`, as for [`Qp::create`].
    pub fn create_cm(id: &Rc<CmId>, pd: &Rc<Pd>, cq: &Rc<Cq>, mut init_attr: ibv_qp_init_attr) -> Result<Self> {
        if init_attr.send_cq != cq.as_ptr() || init_attr.recv_cq != cq.as_ptr() {
            return Err(
                Error::new("rdma_create_qp").cause("init_attr.send_cq/recv_cq must be the CQ passed to Qp::create_cm")
            );
        }
        let asked = init_attr.cap;
        // ANCHOR: c_rdma_create_qp
        // C: int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
        //                       struct ibv_qp_init_attr *qp_init_attr);
        // 0 and id->qp set, or -1 with errno set; qp_init_attr->cap is written back.
        // SAFETY: id and pd are live and of the same device (pd was allocated on the id's
        // context); init_attr is valid and its CQs are `cq`, kept alive by the Qp.
        let rc = unsafe { rdma_cm::sys::rdma_create_qp(id.as_ptr(), pd.raw.as_ptr(), &mut init_attr) };
        if rc != 0 {
            return Err(Error::verb("rdma_create_qp", io::Error::last_os_error()));
        }
        // SAFETY: on success id->qp is the new QP, which lives until rdma_destroy_qp.
        let raw = NonNull::new(unsafe { (*id.as_ptr()).qp })
            .ok_or_else(|| Error::new("rdma_create_qp").cause("it succeeded but set no id->qp"))?;
        // ANCHOR_END: c_rdma_create_qp
        let qp = Qp {
            raw,
            state: Cell::new(IBV_QPS_RESET),
            cm: Some(Rc::clone(id)),
            _cq: Rc::clone(cq),
            _pd: Rc::clone(pd),
        };
        let got = init_attr.cap;
        trace::event("rdma_create_qp")
            .kv("id", id.name())
            .kv("qp_type", if init_attr.qp_type == IBV_QPT_RC { "IBV_QPT_RC" } else { "other" })
            .kv("cap.max_send_wr", format!("{}→{}", asked.max_send_wr, got.max_send_wr))
            .kv("cap.max_recv_wr", format!("{}→{}", asked.max_recv_wr, got.max_recv_wr))
            .kv("qp_num", Qpn(qp.qp_num()))
            .emit();
        Ok(qp)
    }

    /// `ibv_query_qp(qp, &attr, mask, &init_attr)`: the attributes of `mask` as the QP has
    /// them now — for a QP the CM moves behind our back. A query of `IBV_QP_STATE` also
    /// updates [`Qp::state`].
    pub fn query(&self, mask: ibv_qp_attr_mask) -> Result<ibv_qp_attr> {
        let mut attr = ibv_qp_attr::default();
        let mut init_attr = ibv_qp_init_attr::default();
        // SAFETY: raw is live; both out-pointers are valid.
        let rc = unsafe { ffi::ibv_query_qp(self.raw.as_ptr(), &mut attr, mask.0 as i32, &mut init_attr) };
        check("ibv_query_qp", rc)?;
        if mask.0 & IBV_QP_STATE.0 != 0 {
            self.state.set(attr.qp_state);
        }
        Ok(attr)
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
        let rc = unsafe { ffi::ibv_query_qp(self.raw.as_ptr(), &mut attr, IBV_QP_CAP.0 as i32, &mut init_attr) };
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
        check(&format!("ibv_modify_qp {}→{}", names::state_name(from), names::state_name(to)), rc)
            .map_err(|err| self.explain_modify(err, to))?;
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
        check("ibv_post_send", rc).map_err(|err| self.explain_post_send(err))
        // ANCHOR_END: c_ibv_post_send
    }

    /// Explains a refused move to RTS on an iWARP device. An iWARP QP runs over a TCP
    /// connection (MPA framing) that only the iWARP connection manager can set up: it hands
    /// the QP its socket as it moves it to RTS, so `ibv_modify_qp` alone cannot (siw answers
    /// `EINVAL`, "no socket"; hardware iWARP adapters refuse it as well).
    #[cold]
    fn explain_modify(&self, err: Error, to: ffi::ibv_qp_state::Type) -> Error {
        if to != IBV_QPS_RTS || !self.is_iwarp() {
            return err;
        }
        err.cause(
            "this is an iWARP device: an iWARP QP is connected by the iWARP connection manager, \
             which sets up the TCP stream it runs over and moves it to RTS itself. \
             ibv_modify_qp cannot connect it, and rc_pingpong's exchange of LID, QPN, PSN \
             and GID does not apply",
        )
        .fix("connect with the connection manager (rdma_cm), as step 10 (10_rdma_cm) does; steps 05-09 need an InfiniBand or RoCE device")
    }

    /// Whether the QP's device is an iWARP one (`ibv_device.transport_type`).
    pub fn is_iwarp(&self) -> bool {
        // SAFETY: raw is live, and so are its context and the context's device, which the
        // library keeps for as long as the context is open (the QP holds the context).
        let transport = unsafe { (*(*self.raw.as_ref().context).device).transport_type };
        transport == ffi::IBV_TRANSPORT_IWARP
    }

    /// Explains an `ENOMEM` from `ibv_post_send`: the send queue is full, as in every
    /// provider (rxe's checks its ring before it writes the WR; mlx5's does the same).
    #[cold]
    fn explain_post_send(&self, err: Error) -> Error {
        if err.errno() != Some(libc::ENOMEM) {
            return err;
        }
        let depth =
            self.query_cap().map_or("max_send_wr".to_string(), |cap| format!("max_send_wr = {}", cap.max_send_wr));
        err.cause(format!(
            "the send queue is full: {depth} work requests are posted and not yet done. A WR's \
             slot is the sender's again once the device has finished it and its completion is \
             polled; an unsignaled WR's, once a later signaled WR's completion is polled (rxe \
             frees it as soon as it is finished)"
        ))
        .fix("poll completions before posting more, and signal at least one WR in every max_send_wr")
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
fn attach(
    wr: &mut impl WorkRequest,
    sg_list: &[ibv_sge],
    mr: &Mr,
    range: Range,
    verb: &str,
    outside: &str,
) -> Result<()> {
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
        if let Some(id) = &self.cm {
            // SAFETY: id->qp is this QP, destroyed once here, before the id (which this Qp
            // keeps alive); rdma_destroy_qp also clears id->qp.
            unsafe { rdma_cm::sys::rdma_destroy_qp(id.as_ptr()) };
            trace::event("rdma_destroy_qp").kv("id", id.name()).kv("qp_num", Qpn(qp_num)).emit();
            return;
        }
        // SAFETY: raw is a live QP destroyed exactly once. Its outstanding WRs get no
        // completions at all (the provider drops them): a caller that wants them back
        // moves the QP to ERR and polls the flushes first.
        let rc = unsafe { ffi::ibv_destroy_qp(self.raw.as_ptr()) };
        report_destroy("ibv_destroy_qp", rc);
        trace::event("ibv_destroy_qp").kv("qp_num", Qpn(qp_num)).emit();
    }
}
