//! The ten stages, one module each: the nine of `ibv_rc_pingpong` in the order the program
//! runs them, then `rdma_cm`, rping's connection through the connection manager (step 10).
//!
//! Every module holds its stage's verbs code exactly once, between `// ANCHOR: stage` and
//! `// ANCHOR_END: stage`, and its doc names the function of `rc_pingpong.c` it corresponds
//! to. The step binaries call these functions and nothing else that touches the device, but
//! for step 10's rping loop ([`crate::rping`]), which is built on them.

pub mod alloc_pd;
pub mod create_qp;
pub mod modify_qp_rtr;
pub mod modify_qp_rts;
pub mod open_device;
pub mod poll_cq;
pub mod post_send;
pub mod rdma_cm;
pub mod rdma_write;
pub mod reg_mr;
pub mod srq_pingpong;
pub mod ud_pingpong;
