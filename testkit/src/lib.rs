//! What the device tests share: the device to use and what it says about itself, running
//! step binaries with a bounded wait, server/client pairs, TCP ports no two tests share,
//! the one redaction table for snapshots, and the book's real outputs.
//!
//! One module a topic: `device`, `run` (one program, bounded), `runner` (a step in its
//! roles: the one place that starts a server and then its client) and `cm` (step 10's
//! address and redaction), `ports`, `redact`, `snapshot`, `book`, `steps` (`steps/list.txt`)
//! and `xml`.
//! Their items are re-exported here, so the tests and the grader name them `testkit::…`.
//! `redact` and `snapshot` (and step 10's redaction in `cm`) are the default feature
//! `redact`'s: the runner and its `runner` binary need neither them nor their crates.

use std::path::{Path, PathBuf};

mod book;
pub mod cm;
mod csv;
mod device;
mod ports;
#[cfg(feature = "redact")]
mod redact;
mod run;
pub mod runner;
#[cfg(feature = "redact")]
mod snapshot;
mod steps;
mod xml;

pub use book::{book_output, book_output_dir, iwarp_output_dir};
pub use csv::csv_fields;
pub use device::{device, device_args, device_lock, kernel_version, require_device, running_kernel, Device};
pub use ports::{release, tcp_port, tcp_ports, TCP_PORTS};
#[cfg(feature = "redact")]
pub use redact::{redact, redact_packet, redact_sections, rules, Kind, Pass, Picks, DEVICE_VALUES, RULES};
pub use run::{args, assert_ok, run, spawn, spawn_as, stdout, wait, TIMEOUT};
#[cfg(feature = "redact")]
pub use snapshot::{snapshots, with_filters, IWARP_SNAPSHOTS, IWARP_SNAPSHOTS_LINUX_6_12};
pub use steps::{load_steps, parse_steps, step, steps, Roles, Step};
pub use xml::check_xml;

/// The project's directory, found at run time: the current directory or the nearest one
/// above it that holds `steps/list.txt`. Not where this crate was built: one target
/// directory may serve several checkouts, and the grader runs wherever the lab scripts
/// `cd` to (the project), the tests where cargo starts them (a package's directory).
pub fn find_root() -> Result<PathBuf, String> {
    let here = std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    here.ancestors().find(|dir| dir.join("steps/list.txt").is_file()).map(Path::to_path_buf).ok_or_else(|| {
        format!(
            "{}: not inside an rdma-dissect checkout (no steps/list.txt here or in any directory above)",
            here.display()
        )
    })
}

/// [`find_root`] for the tests, where a missing project is a failed test.
pub fn root() -> PathBuf {
    find_root().unwrap_or_else(|e| panic!("{e}"))
}
