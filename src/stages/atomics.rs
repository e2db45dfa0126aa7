//! Stage 13: atomics. TODO: what this stage does and why, for a reader of the chapter.
//!
//! C reference: TODO: the function of rc_pingpong.c (or rping.c) this stage corresponds to.

use crate::error::Result;

/// Stage 13. TODO: its verbs, each through `src/verbs/` with a `c_ibv_…` anchor.
pub fn atomics() -> Result<()> {
    // ANCHOR: stage
    // ANCHOR: hole_first_verb HOLE: TODO: the hint a student gets for this hole
    let verbs_called = 0;
    // ANCHOR_END: hole_first_verb
    debug_assert_eq!(verbs_called, 0, "TODO: call the stage's verbs");
    Ok(())
    // ANCHOR_END: stage
}
