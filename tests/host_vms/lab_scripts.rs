//! Tests of the lab's shell scripts: they are the first thing a newcomer runs, so they must
//! never die silently, must pass shellcheck, and must use a machine's own Soft-RoCE when
//! its kernel has one rather than boot a VM. Host-only:
//! `cargo test --test host_vms lab_scripts::` (lab/test runs it).

use std::path::{Path, PathBuf};
use std::process::Command;

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every shell script of the project: the executables under lab/, lab/ci/ and book/ with a shell
/// shebang, lab/common.sh (sourced) and .ci/run.
fn scripts() -> Vec<PathBuf> {
    let mut all = vec![project().join("lab/common.sh"), project().join(".ci/run")];
    for dir in ["lab", "lab/ci", "book"] {
        for entry in std::fs::read_dir(project().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let first = text.lines().next().unwrap_or("");
            if first.starts_with("#!") && (first.contains("bash") || first.ends_with(" sh") || first.ends_with("/sh")) {
                all.push(path);
            }
        }
    }
    all.sort();
    all
}

#[test]
fn shellcheck_is_clean() {
    let scripts = scripts();
    assert!(scripts.len() >= 15, "found only {scripts:?}");
    let out = Command::new("shellcheck")
        .arg("-x")
        .args(&scripts)
        .current_dir(project())
        .output()
        .expect("run shellcheck (lab/setup --tests installs it)");
    assert!(
        out.status.success(),
        "shellcheck (settings in .shellcheckrc):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The error report comes from lab/common.sh, so every bash script sources it — but
/// lab/shell, whose one command is `exec lab/run`, and lab/impair, a wrapper run inside a
/// lab VM whose exit status is its command's: it must not stop at the first failure (no
/// `set -e`), and it restores the wire whatever happened.
#[test]
fn every_bash_script_sources_the_error_report() {
    for path in scripts() {
        let text = std::fs::read_to_string(&path).unwrap();
        let exempt = ["lab/common.sh", "lab/shell", "lab/impair"];
        if exempt.iter().any(|e| path.ends_with(e)) || !text.starts_with("#!/usr/bin/env bash") {
            continue;
        }
        let sources = text.lines().any(|l| l.trim_start().starts_with(". ") && l.contains("common.sh"));
        assert!(sources, "{} does not source lab/common.sh", path.display());
    }
}

#[test]
fn an_unexpected_failure_names_file_line_and_command() {
    let dir = std::env::temp_dir().join(format!("lab-scripts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("dies");
    // The shape every lab script has; the failure is inside a function and a $(…).
    std::fs::write(
        &script,
        format!(
            "#!/usr/bin/env bash\nset -euo pipefail\n. {}/lab/common.sh\nprobe() {{\n    ls /no/such/dir\n}}\nx=$(probe)\necho \"not reached $x\"\n",
            project().display()
        ),
    )
    .unwrap();
    let out = Command::new("bash").arg(&script).output().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("not reached"));
    assert!(stderr.contains(&format!("{}:5: command failed (exit 2): ls /no/such/dir", script.display())), "{stderr}");
    assert!(stderr.contains(&format!("{}:7: command failed (exit 2): x=$(probe)", script.display())), "{stderr}");
}

/// A classroom VM: its kernel has rdma_rxe but no RDMA link. The walkthrough must make the
/// Soft-RoCE device itself (as root), say how to undo it, find the GID index and run the
/// steps there — no nested VM. Not as root, lab/rxe prints the commands instead.
/// The lab VM is such a machine once its rxe0 is deleted.
#[test]
fn walkthrough_makes_its_own_soft_roce_on_a_kernel_with_rdma_rxe() {
    let script = "set -e
rdma link delete rxe0
unset RDMA_DEVICE RDMA_GID_INDEX RDMA_IB_PORT
echo '--- lab/rxe up as nobody' >&2
# nobody may not read the project (a fresh root keeps it in /root, mode 700): a copy of the
# two files lab/rxe needs, where anyone can read them.
copy=$(mktemp -d) && mkdir \"$copy/lab\" && cp lab/rxe lab/common.sh \"$copy/lab/\" && chmod -R a+rX \"$copy\"
status=0; setpriv --reuid 65534 --regid 65534 --clear-groups \"$copy/lab/rxe\" up || status=$?
echo \"--- status $status\" >&2
echo '--- lab/walkthrough as root' >&2
lab/walkthrough
lab/rxe status";
    let out = Command::new(project().join("lab/run"))
        .args(["bash", "-c", script])
        .current_dir(project())
        .env_remove("RDMA_DEVICE")
        .env_remove("RDMA_GID_INDEX")
        .env_remove("RDMA_IB_PORT")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let all = format!("--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{all}");
    // Not root: the exact commands, and nothing created.
    let nobody = stderr.split("--- lab/rxe up as nobody").nth(1).unwrap().split("--- lab/walkthrough").next().unwrap();
    assert!(
        nobody.contains("sudo modprobe -a rdma_rxe rdma_ucm\n  sudo rdma link add rxe0 type rxe netdev eth0"),
        "{all}"
    );
    assert!(nobody.contains("--- status 1"), "{all}");
    // Root: made here, on the only interface with an address, and said how to undo it.
    assert!(stderr.contains("created the Soft-RoCE device rxe0 on eth0 (192.0.2.1)"), "{all}");
    assert!(stderr.contains("rdma link delete rxe0"), "{all}");
    assert!(stderr.contains("the steps on this machine: rxe0, GID index 1"), "{all}");
    assert!(!stderr.contains("in the lab VM"), "booted a nested VM:\n{all}");
    assert!(stdout.contains(&format!("All {} steps ran on the device", testkit::steps().len())), "{all}");
    assert!(stdout.contains("=== 09_rdma_write"), "{all}");
    assert!(stdout.contains("=== 10_rdma_cm"), "{all}");
    assert!(stdout.contains("rxe0: port 1 4: ACTIVE"), "{all}");
}
