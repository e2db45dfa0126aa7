//! `cargo xtask new-step` as a contributor meets it: in a clone of the committed tree, a new
//! pair step after the last, and then the tests that need no device — the list, the book,
//! the prose that must not count the steps, the tooling's own — pass with no other edit.
//! On the host, not in a VM: it builds a second copy of the crate (its own target dir).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `program args` in `dir`; its exit status and what it said.
fn run(dir: &Path, program: &str, args: &[&str], target: &Path) -> (bool, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

#[test]
fn a_new_pair_step_passes_the_no_device_tests_with_no_other_edit() {
    let scratch = std::env::temp_dir().join(format!("rdma-dissect-new-step-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let (clone, target) = (scratch.join("clone"), scratch.join("target"));
    let (ok, said) = run(&root(), "git", &["clone", "--quiet", ".", &clone.to_string_lossy()], &target);
    assert!(ok, "git clone: {said}");
    let next = format!("{:02}_example", testkit::steps().len() + 1);
    let (ok, said) = run(&clone, "cargo", &["xtask", "new-step", &next, "pair"], &target);
    assert!(ok && said.contains(&format!("added step {next}")), "new-step: {said}");
    // The runner, the grader and lab/pair-test read it from the list.
    let (ok, said) = run(&clone, "cargo", &["xtask", "steps", "--roles", "pair", "--field", "c-peer"], &target);
    assert!(ok && said.lines().any(|l| l == format!("{next} no")), "steps: {said}");
    for args in [&["test", "--test", "no_device"][..], &["test", "-p", "xtask", "-p", "testkit"]] {
        let (ok, said) = run(&clone, "cargo", args, &target);
        assert!(ok, "cargo {} after new-step {next}:\n{said}", args.join(" "));
    }
    std::fs::remove_dir_all(&scratch).ok();
}
