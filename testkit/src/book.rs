//! The book's real outputs: what each snapshot shows redacted, kept unredacted.

use std::path::PathBuf;

use crate::{device, root};

/// Where the book keeps the real, unredacted output behind each snapshot.
pub fn book_output_dir() -> PathBuf {
    root().join("book/src/output")
}

/// Where it keeps an iWARP device's (beside `tests/snapshots/iwarp/`), with that device's
/// own `device.txt`.
pub fn iwarp_output_dir() -> PathBuf {
    book_output_dir().join("iwarp")
}

/// With `RDMA_DISSECT_BOOK=write`, keeps `raw` — what the snapshot `<test>__<name>` shows
/// redacted — as the book's `output/<test>__<name>.txt`, and the device it ran on as
/// `output/device.txt`. `tests/no_device/book.rs` checks, without a device, that each file redacts
/// to its snapshot. Regenerate them all in the lab VM with
/// `RDMA_DISSECT_BOOK=write lab/run cargo test --test device -- steps:: break_it::`.
pub fn book_output(test: &str, name: &str, raw: &str) {
    if std::env::var("RDMA_DISSECT_BOOK").as_deref() != Ok("write") {
        return;
    }
    let dir = if device().is_iwarp() { iwarp_output_dir() } else { book_output_dir() };
    // The book shows Linux 6.1's iWARP runs; 6.12's have snapshots of their own only.
    if device().is_iwarp() && crate::running_kernel() >= (6, 12) {
        return;
    }
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("device.txt"), &device().text).unwrap();
    std::fs::write(dir.join(format!("{test}__{name}.txt")), raw).unwrap();
}
