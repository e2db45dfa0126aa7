//! Tests of `lab/run` itself: the lab VM is the device every other test depends on, so
//! what it promises (exit status, unmixed stdout and stderr, the caller's directory and a
//! small allow-list of its environment, a ready rxe0) is checked from the host, booting
//! real VMs. Host-only: `cargo test --test host_vms lab_run::` (lab/test runs it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn lab_run(args: &[&str]) -> Command {
    let mut cmd = Command::new(project().join("lab/run"));
    cmd.args(args).current_dir(project());
    cmd
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn lab/run");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("the lab VM could not be set up"),
        "the lab VM did not come up:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn exit_status_and_streams_come_back_separately() {
    let out = run(&mut lab_run(&["sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 7"]));
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "to-stdout\n");
    // Nothing but the command's own stderr: no kernel messages, no qemu warnings.
    assert_eq!(String::from_utf8_lossy(&out.stderr), "to-stderr\n");
}

#[test]
fn large_output_arrives_byte_exact_in_a_regular_file() {
    // qemu writing to a regular-file stdout itself would lose or overwrite data; our relay
    // must not. 2 MiB of binary data with every byte value, no '\r' added.
    let dir = tempdir();
    let file = dir.join("out.bin");
    let status = lab_run(&["sh", "-c", "head -c 2097152 /dev/urandom | tee /tmp/sent | sha256sum >&2; cat /tmp/sent"])
        .stdout(std::fs::File::create(&file).unwrap())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
        .wait_with_output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let sent = String::from_utf8_lossy(&status.stderr);
    let got = Command::new("sha256sum").arg(&file).output().unwrap();
    let got = String::from_utf8_lossy(&got.stdout);
    assert_eq!(sent.split_whitespace().next(), got.split_whitespace().next());
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 2 * 1024 * 1024);
}

#[test]
fn a_missing_command_is_127_with_a_message() {
    let out = run(&mut lab_run(&["no-such-command-rdma-dissect"]));
    assert_eq!(out.status.code(), Some(127));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-command-rdma-dissect"), "{err}");
}

#[test]
fn cwd_and_allow_listed_environment_pass_through() {
    let sub = project().join("src");
    let out =
        run(lab_run(&["sh", "-c", "pwd; echo \"$NO_COLOR|$INSTA_X|$RDMA_DEVICE|${LAB_SECRET-unset}|$LAB_GUEST\""])
            .current_dir(&sub)
            .env("NO_COLOR", "1")
            .env("INSTA_X", "insta value with spaces")
            .env("RDMA_DEVICE", "rxe0")
            .env("LAB_SECRET", "must not pass"));
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some(sub.to_str().unwrap()));
    assert_eq!(lines.next(), Some("1|insta value with spaces|rxe0|unset|1"));
}

#[test]
fn rxe0_is_active_with_the_ipv4_mapped_gid_at_index_1() {
    let out = run(&mut lab_run(&["sh", "-c", "ibv_devinfo -d rxe0; cat /sys/class/infiniband/rxe0/ports/1/gids/1"]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("PORT_ACTIVE"), "{stdout}");
    assert!(stdout.contains("0000:0000:0000:0000:0000:ffff:c000:0201"), "{stdout}");
}

/// The job learns the device the VM made (RDMA_DEVICE, RDMA_IB_PORT, RDMA_GID_INDEX), and
/// LAB_RXE=alt makes the second configuration the device tests must also pass on.
#[test]
fn the_job_is_told_its_device_and_lab_rxe_alt_changes_it() {
    let script = "echo \"$RDMA_DEVICE $RDMA_IB_PORT $RDMA_GID_INDEX\"; \
        ibv_devinfo -v -d \"$RDMA_DEVICE\" | grep -E 'active_mtu|GID\\['";
    let out = run(lab_run(&["sh", "-c", script]).env_remove("RDMA_DEVICE").env_remove("RDMA_GID_INDEX"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    told_the_index_of(&stdout, "rxe0", "::ffff:192.0.2.1");
    assert!(stdout.contains("1024 (3)"), "{stdout}");

    let out = run(lab_run(&["sh", "-c", script])
        .env("LAB_RXE", "alt")
        .env_remove("RDMA_DEVICE")
        .env_remove("RDMA_GID_INDEX"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    told_the_index_of(&stdout, "rxe_alt", "::ffff:192.0.2.1");
    assert!(stdout.contains("4096 (5)"), "{stdout}");
    for gid in ["::ffff:198.51.100.1", "::ffff:192.0.2.1", "2001:db8::1"] {
        assert!(stdout.contains(gid), "{gid} missing:\n{stdout}");
    }
}

/// The job's first line, "$RDMA_DEVICE $RDMA_IB_PORT $RDMA_GID_INDEX", names `dev`, port 1
/// and the index at which `ibv_devinfo -v` lists `gid` as a RoCE v2 GID. The index is read
/// from the table, not assumed: a lab VM's rxe0 has come up listing its link-local GID
/// twice, which moves every later entry down one; lab/guest-init finds the index the same
/// way (`lab_roce_gid_index`).
fn told_the_index_of(stdout: &str, dev: &str, gid: &str) {
    let told = stdout.lines().next().unwrap_or_default();
    let index = stdout
        .lines()
        .find(|l| l.contains(gid) && l.contains("RoCE v2"))
        .and_then(|l| l.split_once("GID[")?.1.split_once(']').map(|(i, _)| i.trim().to_string()))
        .unwrap_or_else(|| panic!("no RoCE v2 GID {gid}:\n{stdout}"));
    assert_eq!(told, format!("{dev} 1 {index}"), "{stdout}");
}

/// Soft-iWARP from a clean cache: `LAB_DEVICE=siw` has lab/siw fetch Debian's kernel
/// source and headers, build siw.ko for the lab kernel and cache it, and the VM brings up
/// siw0, an iWARP device with one GID, which the job is told to use.
#[test]
fn lab_device_siw_builds_siw_ko_from_a_clean_cache_and_brings_up_siw0() {
    let cache = tempdir().join("cache");
    let script = "echo \"$RDMA_DEVICE $RDMA_IB_PORT $RDMA_GID_INDEX\"; ibv_devinfo -d siw0; ls /sys/class/infiniband";
    let out = run(lab_run(&["sh", "-c", script])
        .env("LAB_CACHE", &cache)
        .env("LAB_DEVICE", "siw")
        .env_remove("RDMA_DEVICE")
        .env_remove("RDMA_GID_INDEX"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("siw0 1 0\n"), "{stdout}");
    assert!(stdout.contains("transport:\t\t\tiWARP (1)") && stdout.contains("PORT_ACTIVE"), "{stdout}");
    assert!(!stdout.contains("rxe0"), "siw0 instead of rxe0, not beside it:\n{stdout}");
    let built = std::fs::read_dir(cache.join("siw")).unwrap().count();
    assert_eq!(built, 1, "one siw.ko, cached by kernel version");
    std::fs::remove_dir_all(&cache).unwrap();
}

#[test]
fn the_project_is_writable_and_the_host_root_is_not_touched() {
    let marker = project().join("target/lab-run-write-test");
    let _ = std::fs::remove_file(&marker);
    let out = run(&mut lab_run(&[
        "sh",
        "-c",
        "echo from-the-vm > target/lab-run-write-test && echo scribble > /etc/lab-run-scribble && cat /etc/lab-run-scribble",
    ]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "from-the-vm\n");
    // Writes outside the project land in the VM's throw-away overlay.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "scribble\n");
    assert!(!Path::new("/etc/lab-run-scribble").exists());
    std::fs::remove_file(&marker).unwrap();
}

#[test]
fn no_command_without_a_terminal_is_a_clear_error() {
    let out = lab_run(&[]).stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stdin is not a terminal"));
}

fn tempdir() -> PathBuf {
    let dir = project().join("target/lab-run-tests").join(format!("{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn two_hosts_are_joined_by_a_wire_with_labelled_output_and_the_first_failure() {
    // h2 fails first (3), h1 later (5): the first failure is the status. Each host reaches
    // the other over the wire between them and has its own MAC.
    let out = run(&mut lab_run(&[
        "--hosts",
        "2",
        "sleep 3; cat /sys/class/net/eth0/address; exit 5",
        "busybox ping -c 1 -W 5 192.0.2.1 >/dev/null && echo reached h1; cat /sys/class/net/eth0/address; echo oops >&2; exit 3",
    ]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("[h2] reached h1\n"), "{stdout}");
    assert!(stdout.contains("[h1] 52:54:00:12:34:01\n"), "{stdout}");
    assert!(stdout.contains("[h2] 52:54:00:12:34:02\n"), "{stdout}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "[h2] oops\n");
}
