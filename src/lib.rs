//! rdma-dissect: `ibv_rc_pingpong` taken apart, one verbs stage at a time.
//!
//! rdma-core's `libibverbs/examples/rc_pingpong.c` is the "hello world" of RDMA: two
//! processes connect a pair of RC queue pairs and bounce a message back and forth. It is
//! short, but every line matters, and the order of its calls *is* the verbs programming
//! model. This crate rebuilds it in steps 01–09; step N runs stages 1..N (09 runs 1..06, then
//! writes into the connected QP instead of ping-ponging) and prints a trace of exactly what
//! the verbs did. Step 10 takes apart what real programs do next: librdmacm's `rping`,
//! which connects with the connection manager and adds RDMA READ; steps 11 and 12 take
//! apart rdma-core's other ping-pongs, over UD and with a shared receive queue; step 13
//! adds the atomics, against perftest's `ib_atomic_lat`.
//!
//! | step binary (`steps/`) | stage module | verbs added |
//! |---|---|---|
//! | `01_open_device`   | [`stages::open_device`]   | `ibv_get_device_list`, `ibv_open_device`, `ibv_query_device`, `ibv_query_port`, `ibv_query_gid` |
//! | `02_alloc_pd`      | [`stages::alloc_pd`]      | `ibv_alloc_pd` |
//! | `03_reg_mr`        | [`stages::reg_mr`]        | `ibv_reg_mr` |
//! | `04_create_qp`     | [`stages::create_qp`]     | (`ibv_create_comp_channel`), `ibv_create_cq`, `ibv_create_qp`, `ibv_query_qp`, `ibv_modify_qp` RESET→INIT |
//! | `05_modify_qp_rtr` | [`stages::modify_qp_rtr`] | the TCP address exchange, `ibv_modify_qp` INIT→RTR |
//! | `06_modify_qp_rts` | [`stages::modify_qp_rts`] | `ibv_modify_qp` RTR→RTS |
//! | `07_post_send`     | [`stages::post_send`]     | `ibv_post_recv`, `ibv_post_send`, first completions (`ibv_poll_cq`) |
//! | `08_poll_cq`       | [`stages::poll_cq`]       | the ping-pong loop: `ibv_poll_cq`; CQ events: `ibv_req_notify_cq`, `ibv_get_cq_event`, `ibv_ack_cq_events`; statistics |
//! | `09_rdma_write`    | [`stages::rdma_write`]    | one-sided RDMA WRITE, WRITE WITH IMMEDIATE (`ibv_post_send` with another opcode) |
//! | `10_rdma_cm`       | [`stages::rdma_cm`]       | rping on the connection manager: `rdma_create_event_channel`, `rdma_create_id`, `rdma_bind_addr`, listen or resolve, `rdma_get_cm_event` / `rdma_ack_cm_event`, `rdma_create_qp`, connect or accept, `rdma_init_qp_attr`, disconnect; RDMA READ |
//! | `11_ud_pingpong`   | [`stages::ud_pingpong`]   | a UD QP (`IBV_QPT_UD`, a Q_Key at INIT), RTR and RTS without a peer, `ibv_create_ah`, datagram sends (`wr.ud`), receives with the GRH in front |
//! | `12_srq_pingpong`  | [`stages::srq_pingpong`]  | one SRQ for `-q` QPs: `ibv_create_srq`, `ibv_post_srq_recv`; its limit: `ibv_modify_srq`, and the async event `ibv_get_async_event`, `ibv_ack_async_event` |
//! | `13_atomics`       | [`stages::atomics`]       | atomics: `ibv_post_send` with `IBV_WR_ATOMIC_FETCH_AND_ADD` or `IBV_WR_ATOMIC_CMP_AND_SWP` (`wr.atomic`), `atomic_cap` from `ibv_query_device`; perftest's handshake |
//!
//! # Layout
//!
//! * [`verbs`] — the thin FFI layer: one RAII type per verbs object (`Context`, `Pd`, `Mr`,
//!   `Cq`, `Qp`, ...), destroyed in reverse order of creation. The only module with
//!   `unsafe`. [`verbs::names`] names verbs things for the trace: QP states, statuses,
//!   MTUs, flags, the `ibv_modify_qp` mask field by field.
//! * [`stages`] — one module per stage; each holds that stage's verbs code, once, between
//!   `// ANCHOR: stage` markers that the book quotes.
//! * [`trace`] — the one-event-per-line trace on stdout, in `ibv_rc_pingpong`'s number
//!   formats. A leaf: it knows events and number formats, nothing of verbs.
//! * [`error`] — errors that explain themselves: verb, errno, likely cause, fix.
//! * [`wire`] — the 52-byte address message, byte for byte as `ibv_rc_pingpong` sends it;
//!   [`wire::rping`], a leaf, rping's 16-byte buffer message and its ping data;
//!   [`wire::perftest`], perftest's handshake (step 13).
//! * [`exchange`] — the TCP side channel that carries it, with timeouts.
//! * [`link`] — what sysfs says about the link under the port (interface state, the
//!   device's counters), read to explain a failure by what happened.
//! * [`rdma_cm`] — the connection manager's events outside the verbs (stage 10): waiting for
//!   one with a deadline, tracing it, explaining a reject or a failed resolution.
//! * [`rping`] — rping on top of the stages (step 10): its buffers and its ping loop.
//! * [`poll`] — polling a CQ outside the timed loop: waiting for given completions with a
//!   deadline, explaining a failed one, tracing one.
//! * [`role`] — server or client: which program of a run this process is. A leaf.
//! * [`cli`] — `ibv_rc_pingpong`'s flags and defaults, in groups each step flattens; a
//!   group also says how its steps run (one process, or a server and a client).
//! * [`breakit`] — each step's characteristic mistakes (`--break CASE`), made on purpose
//!   by calling the stages with one value spoiled, and explained.
//! * [`step`] — what every step binary shares: its command line (the flag group, `--break`).
//!
//! The binaries in `steps/` are thin and all of one shape: they name their flag group
//! (`type Args`), their break cases (`const CASES`) and what they do (`const ABOUT`), parse
//! with [`step::Cli`], then call the stages in order, one call per stage (from 06 on,
//! stages 05 and 06 are one call, [`stages::modify_qp_rts::connect`]), with the new stage
//! marked `// ANCHOR: new`. Step 10 calls stage 10 where 01 and 05–06 were, stages 02 and
//! 04 on the CM's device, and rping's loop where 07–09 were.

pub mod breakit;
pub mod cli;
pub mod error;
pub mod exchange;
pub mod link;
pub mod poll;
pub mod rdma_cm;
pub mod role;
pub mod rping;
pub mod stages;
pub mod step;
pub mod trace;
#[allow(unsafe_code, reason = "the FFI layer: the one module that calls into libibverbs and librdmacm")]
pub mod verbs;
pub mod wire;
