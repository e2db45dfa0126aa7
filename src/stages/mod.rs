//! The stages, one module each, in `steps/list.txt`'s order: 01–09 on `ibv_rc_pingpong`'s
//! model, in the order the program runs them; then `rdma_cm`, rping's connection through the
//! connection manager (step 10); then `ud_pingpong` and `srq_pingpong`, rdma-core's other
//! ping-pongs (steps 11 and 12).
//!
//! Every module holds its stage's verbs code exactly once, between `// ANCHOR: stage` and
//! `// ANCHOR_END: stage`, and its doc names the function of `rc_pingpong.c` it corresponds
//! to. The step binaries call these functions and nothing else that touches the device, but
//! for step 10's rping loop ([`crate::rping`]), which is built on them.

pub mod alloc_pd;
pub mod atomics;
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
