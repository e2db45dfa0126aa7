//! rdma-dissect's own tooling, run as `cargo xtask …` (an alias in `.cargo/config.toml`).
//!
//! ```text
//! cargo xtask bench table RAW         the headline table of a lab/bench run (Markdown)
//! cargo xtask bench sweep-table RAW   a sweep's table, its fits and rxe's cost per packet
//! cargo xtask bench sweep-plot RAW    a sweep's three-panel plot (SVG)
//! cargo xtask book [--check]          the book's generated files: write them, or name the
//!                                     stale ones (see book/)
//! cargo xtask exercise …              the classroom kit: a student's copy of a stage, and
//!                                     grading it on the device (see exercise/)
//! cargo xtask grade …                 a class's hand-ins graded in one lab VM boot, and
//!                                     the reports gradebooks take (see grade/)
//! cargo xtask run NN [--peer …] …     step NN in its roles on the device: the server,
//!                                     then its client (testkit's runner and its cli.rs)
//! cargo xtask new-step NN_name alone|pair|cm [--base NN]
//!                                     add a step: everything steps/list.txt implies, as a
//!                                     skeleton (`--remove NN_name` takes it out; see
//!                                     new_step/ and CONTRIBUTING.md)
//! cargo xtask steps [--field FACT]…   the steps of steps/list.txt with their facts, for
//!                                     scripts (lab/pair-test)
//! cargo xtask pair-line …             lab/pair-check's exchange of a line with the other
//!                                     VM over TCP (pair_line.rs)
//! ```
//!
//! `lab/bench` runs the tools in the lab VM and writes RAW (`target/bench/raw.tsv`); what
//! is computed from it lives here, with unit tests, and prints on stdout. `lab/exercise`
//! and `lab/check` run the exercise kit, and `tests/no_device/book.rs` runs `cargo xtask
//! book --check`: as a command, so that no test target of the crate builds the tooling.

pub mod bench;
pub mod book;
pub mod exercise;
pub mod grade;
pub mod new_step;
pub mod pair_line;
