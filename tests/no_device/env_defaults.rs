//! The steps' `-d`, `-i` and `-g` default to `RDMA_DEVICE`, `RDMA_IB_PORT` and
//! `RDMA_GID_INDEX` (src/cli/mod.rs, `DeviceArgs`): what the lab VM and the classroom image
//! export, so a book command typed without `-g` works there. What needs no device: the
//! help names the variables, a value taken from one is the first line of the trace (printed
//! before the device is opened), a flag wins, an empty variable is unset, and a bad value
//! blames the variable. tests/device/env_defaults.rs runs a pair on the device this way.

use std::process::{Command, Output, Stdio};

use rdma_dissect::trace::COLUMN;

const VARS: [&str; 3] = ["RDMA_DEVICE", "RDMA_IB_PORT", "RDMA_GID_INDEX"];

/// `program args` with exactly `envs` of the three variables set.
fn run(program: &str, envs: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(program);
    for var in VARS {
        cmd.env_remove(var);
    }
    cmd.args(args).envs(envs.iter().copied()).env("NO_COLOR", "1").stdin(Stdio::null());
    cmd.output().unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

fn text(out: &Output) -> String {
    format!("--- stdout\n{}--- stderr\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn getenv(var: &str, value: &str, flag: &str) -> String {
    format!("{:<COLUMN$} {var}={value} flag={flag}\n", "getenv")
}

#[test]
fn help_names_the_variables_but_not_their_values() {
    let out = run(env!("CARGO_BIN_EXE_05_modify_qp_rtr"), &[("RDMA_GID_INDEX", "7")], &["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    for var in VARS {
        assert!(help.contains(&format!("[env: {var}]")), "{var}:\n{help}");
    }
    assert!(!help.contains("RDMA_GID_INDEX=7"), "{help}");
}

#[test]
fn a_default_from_the_environment_opens_the_trace() {
    // A device no machine has: the step fails after the getenv lines, with or without RDMA.
    let envs = [("RDMA_DEVICE", "no-such-rdma-dev"), ("RDMA_IB_PORT", "1"), ("RDMA_GID_INDEX", "0x1")];
    let out = run(env!("CARGO_BIN_EXE_01_open_device"), &envs, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let want = getenv("RDMA_DEVICE", "no-such-rdma-dev", "-d")
        + &getenv("RDMA_IB_PORT", "1", "-i")
        + &getenv("RDMA_GID_INDEX", "0x1", "-g");
    assert!(stdout.starts_with(&want), "want the trace to begin with\n{want}{}", text(&out));
    assert!(!out.status.success(), "{}", text(&out));
}

#[test]
fn break_help_lists_the_cases_alone() {
    let out = run(env!("CARGO_BIN_EXE_05_modify_qp_rtr"), &[("RDMA_GID_INDEX", "1")], &["--break", "help"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Mistakes this step can make"), "{}", text(&out));
}

#[test]
fn a_flag_wins_and_an_empty_variable_is_unset() {
    let bin = env!("CARGO_BIN_EXE_01_open_device");
    let flags = run(bin, &[("RDMA_DEVICE", "no-such-rdma-dev"), ("RDMA_GID_INDEX", "1")], &["-d", "x", "-g", "2"]);
    assert!(!String::from_utf8_lossy(&flags.stdout).contains("getenv"), "{}", text(&flags));
    // `RDMA_GID_INDEX= 05_modify_qp_rtr`: rc_pingpong's default, no GID (the no-GID lesson).
    let empty = run(bin, &[("RDMA_DEVICE", "no-such-rdma-dev"), ("RDMA_GID_INDEX", "")], &[]);
    let stdout = String::from_utf8_lossy(&empty.stdout);
    assert!(stdout.starts_with(&getenv("RDMA_DEVICE", "no-such-rdma-dev", "-d")), "{}", text(&empty));
    assert!(!stdout.contains("RDMA_GID_INDEX"), "{}", text(&empty));
    assert_ne!(empty.status.code(), Some(2), "an empty variable is not a usage error:\n{}", text(&empty));
}

#[test]
fn a_bad_value_blames_the_variable() {
    for (var, value, flag) in
        [("RDMA_IB_PORT", "0", "-i"), ("RDMA_GID_INDEX", "one", "-g"), ("RDMA_GID_INDEX", "-1", "-g")]
    {
        let out = run(env!("CARGO_BIN_EXE_05_modify_qp_rtr"), &[(var, value)], &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}={value}: {}", text(&out));
        assert!(
            stderr.contains(&format!("{var}=\"{value}\" in the environment is not a value for {flag}")),
            "{stderr}"
        );
        assert!(out.stdout.is_empty(), "{var}={value}: nothing runs: {}", text(&out));
    }
}
