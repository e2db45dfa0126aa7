//! The address handle: where a datagram goes (`ibv_create_ah`), for UD QPs.

use std::io;
use std::ptr::NonNull;
use std::rc::Rc;

use ibverbs_sys as ffi;

use super::*;
use crate::error::{Error, Result};
use crate::trace::{self, Gid, Lid};

/// `struct ibv_ah`: an address handle, the address vector of one destination made into a
/// verbs object. An RC QP keeps its one peer's address vector in its own state (`ah_attr`
/// at RTR); a UD QP has no peer, so each send work request names its destination by an AH
/// (`wr.ud.ah`), plus the QP number and Q_Key at that address.
pub struct Ah {
    raw: NonNull<ffi::ibv_ah>,
    _pd: Rc<Pd>,
}

impl Ah {
    /// `ibv_create_ah(pd, &attr)`: on RoCE the kernel resolves the destination GID to an
    /// Ethernet address here (ARP or neighbour discovery), so this is where an unreachable
    /// address fails, not the send.
    pub fn create(pd: &Rc<Pd>, attr: &ibv_ah_attr) -> Result<Self> {
        let mut attr = *attr;
        // ANCHOR: c_ibv_create_ah
        // C: struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
        // The AH, or NULL with errno set.
        // SAFETY: pd is live (the Ah keeps it alive); attr is a valid struct the verb only reads.
        let raw = unsafe { ffi::ibv_create_ah(pd.raw.as_ptr(), &mut attr) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::verb("ibv_create_ah", io::Error::last_os_error()))?;
        // ANCHOR_END: c_ibv_create_ah
        let mut event = trace::event("ibv_create_ah")
            .kv("dlid", Lid(attr.dlid))
            .kv("sl", attr.sl)
            .kv("port_num", attr.port_num)
            .kv("is_global", attr.is_global);
        if attr.is_global != 0 {
            event = event
                .kv("grh.dgid", Gid(gid_bytes(&attr.grh.dgid)))
                .kv("grh.sgid_index", attr.grh.sgid_index)
                .kv("grh.hop_limit", attr.grh.hop_limit);
        }
        event.emit();
        Ok(Ah { raw, _pd: Rc::clone(pd) })
    }

    /// The raw handle, for `wr.wr.ud.ah`: only [`Qp::post_send_ud`] puts it in a WR.
    pub(super) fn as_ptr(&self) -> *mut ffi::ibv_ah {
        self.raw.as_ptr()
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: raw is a live AH destroyed exactly once. The verbs leave it to the
        // program that no posted send still names it: in the steps every such send has
        // completed by now, or the loop failed and the QP goes next. (rxe's kernel looks
        // a WR's AH up by number when it sends, so one naming a destroyed AH fails.)
        let rc = unsafe { ffi::ibv_destroy_ah(self.raw.as_ptr()) };
        report_destroy("ibv_destroy_ah", rc);
        trace::event("ibv_destroy_ah").emit();
    }
}
