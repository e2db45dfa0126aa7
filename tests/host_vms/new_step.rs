//! `cargo xtask new-step` as a contributor meets it: in a clone of the committed tree, a new
//! pair step after the last, and then the tests that need no device — the list, the book,
//! the prose that must not count the steps, the tooling's own — pass with no other edit.
//! On the host, not in a VM: it builds a second copy of the crate (its own target dir), the
//! dependencies from crates.io taken from this build, as a contributor's warm cache.

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

/// Seeds `target` with this build's `debug/` outputs but its executables: what cargo's
/// fingerprints find fresh (the crates.io dependencies, built from the same lock file) is
/// not built again; the clone's own crates are, its sources being newer than those outputs.
/// Copies, not links: cargo rewrites a fingerprint in place, and the clone's crates share
/// their file names with this tree's (cargo hashes a path package's path from the workspace
/// root).
fn seed(target: &Path) {
    let exe = std::env::current_exe().unwrap();
    let ours = exe.parent().and_then(Path::parent).expect("the test runs from <target>/debug/deps");
    let debug = target.join("debug");
    std::fs::create_dir_all(debug.join("deps")).unwrap();
    // cp -a: with their times, which cargo compares with its dependents' outputs.
    let cp = |from: Vec<PathBuf>, to: &Path| {
        let out = Command::new("cp").arg("-a").args(&from).arg(to).output().unwrap();
        assert!(out.status.success(), "cp -a into {}: {}", to.display(), String::from_utf8_lossy(&out.stderr));
    };
    cp(vec![ours.join("build"), ours.join(".fingerprint")], &debug);
    let libraries = std::fs::read_dir(ours.join("deps"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| matches!(path.extension().and_then(|e| e.to_str()), Some("rlib" | "rmeta" | "so" | "d")))
        .collect();
    cp(libraries, &debug.join("deps"));
}

#[test]
fn a_new_pair_step_passes_the_no_device_tests_with_no_other_edit() {
    let scratch = std::env::temp_dir().join(format!("rdma-dissect-new-step-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let (clone, target) = (scratch.join("clone"), scratch.join("target"));
    seed(&target);
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
