//! What the device tests share: the device to use and what it says about itself, running
//! step binaries with a bounded wait, server/client pairs, TCP ports no two tests share,
//! the one redaction table for snapshots, and the book's real outputs.
//!
//! One module a topic: `device`, `run` (one program, bounded), `runner` (a step in its
//! roles: the one place that starts a server and then its client) and `cm` (step 10's
//! address and redaction), `ports`, `redact`, `snapshot`, `book`, `steps` (`steps/list.txt`)
//! and `xml`.
//! Their items are re-exported here, so the tests and the grader name them `testkit::…`.

use std::path::{Path, PathBuf};

mod book;
pub mod cm;
mod device;
mod ports;
mod redact;
mod run;
pub mod runner;
mod snapshot;
mod steps;
mod xml;

pub use book::{book_output, book_output_dir, iwarp_output_dir};
pub use device::{device, device_args, device_lock, kernel_version, require_device, running_kernel, Device};
pub use ports::{tcp_port, tcp_ports, TCP_PORTS};
pub use redact::{redact, redact_packet, redact_sections, rules, Kind, Pass, Picks, DEVICE_VALUES, RULES};
pub use run::{args, assert_ok, run, spawn, spawn_as, stdout, wait, TIMEOUT};
pub use snapshot::{snapshots, with_filters, IWARP_SNAPSHOTS, IWARP_SNAPSHOTS_LINUX_6_12};
pub use steps::{step, steps, Roles, Step};
pub use xml::check_xml;

/// The project's directory (this crate is `testkit/` in it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("testkit/ is inside the project").to_path_buf()
}
