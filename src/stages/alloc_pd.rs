//! Stage 02: allocate a protection domain.
//!
//! C reference: `ibv_alloc_pd` in `pp_init_ctx`.
//!
//! **Why a PD.** Memory regions and queue pairs are each created in a PD, and the HCA lets a
//! QP touch only MRs of its own PD. One process rarely needs more than one; a server that
//! isolates clients from one another gives each its own. The PD holds no resources you can
//! see — it is a tag the HCA checks on every access.

use std::rc::Rc;

use crate::error::Result;
use crate::verbs::{Context, Pd};

// ANCHOR: stage
/// `ibv_alloc_pd` on the context of a device: one stage 01 opened, or the one the
/// connection manager bound its id to (step 10).
pub fn alloc_pd(ctx: &Rc<Context>) -> Result<Rc<Pd>> {
    // ANCHOR: hole_alloc_pd HOLE(Rc<Pd>): allocate a protection domain on the device's context (ibv_alloc_pd)
    let pd = Pd::alloc(ctx)?;
    // ANCHOR_END: hole_alloc_pd
    Ok(pd)
}
// ANCHOR_END: stage
