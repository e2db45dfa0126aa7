//! The tests that need no RDMA device and no VM: the wire format and its fuzzing, the
//! book's drift checks, the instructor's guide, the consistency of the step list with
//! everything that hangs off it, the steps' defaults from the environment, and lab scripts'
//! decisions on a pretend machine (files the scripts are pointed at, no namespace). `cargo
//! test --test no_device` runs them on any host, a chroot included; `lab/test` runs them on
//! the host, before the device's tests in the lab VM.

mod book;
mod class_roster;
mod class_vm_book;
mod cm_layout;
mod consistency;
mod env_defaults;
mod instructor;
mod lab_scripts;
mod wire;
mod wire_fuzz;

use std::path::{Path, PathBuf};

/// The project's checkout, where the lab scripts and the book are.
fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A directory of this test's own, removed first if a previous run left it.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rdma-dissect-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
