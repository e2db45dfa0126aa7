//! Lab scripts' decisions that need no VM and no device, made on a pretend machine: the
//! scripts read which system this is and its RDMA devices from `LAB_OS_RELEASE` and
//! `LAB_SYS_RDMA` (lab/common.sh), which these tests point at a fake `/etc/os-release` or a
//! fake `/sys/class/infiniband` in a scratch directory — no namespace, so they pass in a
//! chroot or an unprivileged container too. The tests that boot VMs are in
//! tests/host_vms/lab_scripts.rs.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::{project, scratch};

/// Runs `script` with bash in the project's directory, `$1`… being `args`, with `env` set
/// and none of the RDMA_* or LAB_VM variables of the caller.
fn pretend(script: &str, args: &[&str], env: &[(&str, &Path)]) -> Output {
    Command::new("bash")
        .args(["-c", script, "bash"])
        .args(args)
        .current_dir(project())
        .env_remove("RDMA_DEVICE")
        .env_remove("RDMA_IB_PORT")
        .env_remove("RDMA_GID_INDEX")
        .env_remove("LAB_VM")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run bash")
}

fn text(out: &Output) -> String {
    format!(
        "({})\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Ubuntu cannot be tried from where this is built (its archive is out of reach): the two
/// scripts that would install things stop at once with the commands Ubuntu needs, and say
/// that they are untested — before lab/provision's root check and lab/walkthrough's setup.
#[test]
fn provision_and_walkthrough_stop_on_ubuntu_with_its_commands() {
    let dir = scratch("ubuntu");
    let ubuntu = dir.join("ubuntu");
    std::fs::write(
        &ubuntu,
        "PRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nID=ubuntu\nID_LIKE=debian\n",
    )
    .unwrap();
    // A system built on Ubuntu says so in ID_LIKE.
    let mint = dir.join("mint");
    std::fs::write(&mint, "PRETTY_NAME=\"Linux Mint 22\"\nID=linuxmint\nID_LIKE=\"ubuntu debian\"\n").unwrap();
    let rust_version = std::fs::read_to_string(project().join("Cargo.toml"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \"")?.strip_suffix('"').map(str::to_string))
        .expect("Cargo.toml has a rust-version");
    for (os_release, name) in [(&ubuntu, "Ubuntu 24.04.1 LTS"), (&mint, "Linux Mint 22")] {
        for script in ["lab/provision", "lab/walkthrough"] {
            let out = pretend("exec \"$1\"", &[script], &[("LAB_OS_RELEASE", os_release)]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let all = format!("{script} on {name} {}", text(&out));
            assert_eq!(out.status.code(), Some(1), "{all}");
            assert!(stderr.starts_with(&format!("{script}: this is {name}.")), "{all}");
            assert!(stderr.contains("nothing here has been tried\non Ubuntu"), "{all}");
            assert!(stderr.contains("sudo apt-get install linux-modules-extra-$(uname -r)"), "{all}");
            assert!(
                stderr.contains(
                    "sudo apt-get install rdma-core ibverbs-utils ibverbs-providers libibverbs-dev librdmacm-dev rdmacm-utils"
                ),
                "{all}"
            );
            assert!(stderr.contains(&format!("https://sh.rustup.rs | sh   # Rust >= {rust_version};")), "{all}");
            assert!(out.stdout.is_empty(), "{all}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// On a machine with an RDMA device of its own (here a pretend rxe0 whose GID 1 is
/// ::ffff:192.0.2.1), lab/run runs the command right there, says so in one line, and sets
/// the RDMA_* variables the VM would set, unless the caller set them (even empty).
#[test]
fn lab_run_runs_the_command_here_on_a_machine_with_a_device() {
    let dir = scratch("lab-run-here");
    let port = dir.join("rxe0/ports/1");
    std::fs::create_dir_all(port.join("gids")).unwrap();
    std::fs::create_dir_all(port.join("gid_attrs/types")).unwrap();
    for (file, text) in [
        ("link_layer", "Ethernet"),
        ("gids/0", "fe80:0000:0000:0000:5054:00ff:fe12:3401"),
        ("gids/1", "0000:0000:0000:0000:0000:ffff:c000:0201"),
        ("gid_attrs/types/0", "RoCE v2"),
        ("gid_attrs/types/1", "RoCE v2"),
    ] {
        std::fs::write(port.join(file), format!("{text}\n")).unwrap();
    }
    let sys: &[(&str, &Path)] = &[("LAB_SYS_RDMA", &dir)];
    let run = |setup: &str, cmd: &str| pretend(&format!("set -e\n{setup}\nlab/run sh -c '{cmd}'"), &[], sys);
    let show = r#"echo "$RDMA_DEVICE|$RDMA_IB_PORT|${RDMA_GID_INDEX-unset}|${LAB_GUEST-here}|$PWD"; exit 3"#;

    let out = run("", show);
    assert_eq!(out.status.code(), Some(3), "the command's own status {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, format!("rxe0|1|1|here|{}\n", project().display()), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr,
        "lab/run: this machine has an RDMA device (rxe0, GID index 1): running here, no lab VM (LAB_VM=1 boots one anyway)\n",
        "{}",
        text(&out)
    );

    let out = run("export RDMA_GID_INDEX= RDMA_IB_PORT=2", show);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("rxe0|2||here|{}\n", project().display()),
        "{}",
        text(&out)
    );

    let out = run("", "exec no-such-command-rdma-dissect");
    assert_eq!(out.status.code(), Some(127), "{}", text(&out));

    let out = pretend("lab/run no-such-command-rdma-dissect", &[], sys);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no-such-command-rdma-dissect: command not found"),
        "{}",
        text(&out)
    );

    let out = pretend("LAB_VM=yes lab/run true", &[], sys);
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    std::fs::remove_dir_all(&dir).ok();
}

/// `sudo lab/image` (and lab/fresh): sudo's secure_path hides the invoking user's
/// ~/.cargo/bin, where rustup puts cargo. lab_find_cargo finds SUDO_USER's, with
/// RUSTUP_HOME, and fails with a message when that user has none either. The user's
/// passwd entry comes from a stand-in `getent` first on PATH.
#[test]
fn sudo_finds_the_invoking_users_cargo() {
    let dir = scratch("sudo-cargo");
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::fs::create_dir_all(home.join(".rustup")).unwrap();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = |path: &Path, text: &str| {
        std::fs::write(path, text).unwrap();
        std::process::Command::new("chmod").arg("+x").arg(path).status().unwrap();
    };
    exe(
        &bin.join("getent"),
        &format!("#!/bin/sh\n[ \"$2\" = alice ] && echo 'alice:x:1000:1000::{}:/bin/bash'\n", home.display()),
    );
    exe(&home.join(".cargo/bin/cargo"), "#!/bin/sh\necho \"alice's cargo $RUSTUP_HOME\"\n");
    let script = format!(". {}/lab/common.sh\nlab_find_cargo lab/image || exit 2\ncargo", project().display());
    let run = |user: &str| {
        Command::new("/bin/bash")
            .args(["-c", &script])
            .env_clear()
            // No cargo on PATH (not even a Debian one in /usr/bin): only the stand-in getent;
            // what else the function uses is bash's own.
            .env("PATH", &bin)
            .env("HOME", "/nonexistent")
            .env("SUDO_USER", user)
            .output()
            .unwrap()
    };
    let out = run("alice");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("alice's cargo {}\n", home.join(".rustup").display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("lab/image: using alice's cargo, {}", home.join(".cargo/bin/cargo").display())),
        "{stderr}"
    );

    let out = run("bob");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("lab/image: needs cargo, and there is none on PATH nor in bob's"),
        "{}",
        text(&out)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// cloud-init's runcmd (where lab/class's user-data runs `lab/rxe install`) and systemd's
/// services start with no HOME: the lab scripts take the account's own instead of stopping
/// on `set -u`.
#[test]
fn lab_scripts_run_without_a_home() {
    let out = Command::new("/bin/bash")
        .args(["-c", ". lab/common.sh && echo \"$HOME\" && lab/rxe --help >/dev/null && echo ok"])
        .current_dir(project())
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The account's home, as the password database has it (the sixth field).
    let passwd = Command::new("sh").args(["-c", "getent passwd \"$(id -u)\""]).output().unwrap();
    let passwd = String::from_utf8_lossy(&passwd.stdout);
    let home = passwd.split(':').nth(5).expect("a passwd entry for this account");
    assert_eq!(stdout, format!("{home}\nok\n"), "{}", text(&out));
}
