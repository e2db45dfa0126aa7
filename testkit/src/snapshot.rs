//! Where the snapshots live and the settings every one is taken with.

use crate::redact::{rules, Pass};

/// Runs `f` with the [`RULES`](crate::RULES) of [`Pass::Host`] applied to snapshots, and the settings of [`snapshots`].
pub fn with_filters(f: impl FnOnce()) {
    let mut settings = snapshot_settings();
    for (regex, replacement) in rules(Pass::Host) {
        settings.add_filter(regex, replacement);
    }
    settings.bind(f);
}

/// Runs `f` (which asserts snapshots of texts already passed through [`redact`](fn@crate::redact)) with the
/// settings every snapshot here uses.
///
/// On an iWARP device they are that device's own: `tests/snapshots/iwarp/` (what step 10
/// does over iWARP differs from RoCE in the trace, not only in values), and on Linux 6.12
/// and later `tests/snapshots/iwarp/linux-6.12/`: siw's `query_qp` reports the QP's state
/// there, where 6.1's leaves it 0 (RESET).
pub fn snapshots(f: impl FnOnce()) {
    let mut settings = snapshot_settings();
    if crate::device().is_iwarp() {
        settings.set_snapshot_path(if crate::running_kernel() >= (6, 12) {
            IWARP_SNAPSHOTS_LINUX_6_12
        } else {
            IWARP_SNAPSHOTS
        });
    }
    settings.bind(f);
}

/// Where an iWARP device's snapshots live, relative to a test group's directory.
pub const IWARP_SNAPSHOTS: &str = "../snapshots/iwarp";
/// Where they live on Linux 6.12 and later (see [`snapshots`]).
pub const IWARP_SNAPSHOTS_LINUX_6_12: &str = "../snapshots/iwarp/linux-6.12";

/// Every snapshot lives in `tests/snapshots/`, named `<file>__<name>.snap` after the test
/// file that makes it (`steps__08_poll_cq-client.snap`). The tests are modules of one
/// binary per group (`tests/device/steps.rs`), so insta's own prefix would be the module
/// path (`device__steps__`) and its directory the group's: the callers spell the prefix,
/// and the path points one level up.
fn snapshot_settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("../snapshots");
    settings
}
