//! The tests that need an RDMA device: the steps' traces, their break-it cases and bad
//! input, interop with the C `ibv_rc_pingpong`, and memcheck. `lab/test` runs them in the
//! lab VM on its `rxe0`; on a machine with a device, `cargo test --test device` runs them
//! there. A test that cannot get a device fails; none is skipped. They share the device
//! and its CPUs, so each takes `testkit::device_lock()` and they run one at a time.
//!
//! One test binary per group of what the tests need (a device, no device, the host's
//! VMs), so the suite links three binaries instead of one per file.

mod atomic_interop;
mod bad_input;
mod break_it;
mod c_pingpong;
mod env_defaults;
mod interop;
mod memcheck;
mod rping;
mod srq_interop;
mod steps;
mod ud_interop;
