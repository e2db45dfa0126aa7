//! The stages across a real (virtual) wire: the two-host lab boots h1 (192.0.2.1, the
//! server) and h2 (192.0.2.2, the client), each with its own rxe0, captures the wire
//! between them and decodes it with tshark (lab/packets). Host-only, as it boots VMs:
//! `cargo test --test host_vms two_hosts::` (lab/test runs it).
//!
//! The decoded packets of 07, 08 and 09 are checked against what the two sides exchanged over
//! TCP — the first PSN on the wire is the sender's exchanged PSN, the RETH carries the
//! target's exchanged rkey and address — and kept as snapshots, which the book's "What
//! goes on the wire" sections include. Two lessons only two hosts can teach follow: a path
//! MTU above the link's, and a host that dies mid-run. Step 11's datagrams cross with no
//! acknowledgement at all. Four break-it cases close the file, seen on the wire: an RNR NAK
//! and its retry, the same on the QPs of an SRQ that ran dry (12), a PSN sequence NAK, and
//! a retransmission after the ACK timeout. `cargo xtask book` draws the book's ladder
//! diagrams from these snapshots. Snapshots go through the shared redaction table (testkit).
//!
//! Here, what every run across the wire shares: the runners, the capture's packets and the
//! views of them; the tests in `ladders` (each step's packets), `lessons` (the path MTU,
//! the dying host, the bad wire) and `break_cases`.

use testkit as common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// One decoded RoCE v2 packet, as lab/packets prints it.
#[derive(Debug)]
struct Packet {
    src: String,
    dst: String,
    opcode: String,
    /// The destination QP, as tshark prints it.
    qp: String,
    psn: u32,
    rest: String,
}

/// What one run across the two hosts produced.
struct Run {
    output: String,
    /// lab/run's exit status.
    status: Option<i32>,
    packets: Vec<Packet>,
    pcap: PathBuf,
}

impl Run {
    /// A field of a host's `  local address:` line, e.g. ("h1", "PSN").
    fn local(&self, host: &str, key: &str) -> String {
        let prefix = format!("[{host}]   local address:");
        let line = self
            .output
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no local address line from {host}:\n{}", self.output));
        let value = line
            .split(", ")
            .chain(line.split(":  "))
            .find_map(|field| field.trim().strip_prefix(&format!("{key} ")))
            .unwrap_or_else(|| panic!("no {key} in {line}"));
        value.to_string()
    }

    fn local_psn(&self, host: &str) -> u32 {
        u32::from_str_radix(self.local(host, "PSN").trim_start_matches("0x"), 16).unwrap()
    }

    /// Both hosts printed the statistics of a loop of `n` iterations.
    fn assert_iters(&self, n: u32) {
        for host in ["h1", "h2"] {
            assert!(self.output.contains(&format!("[{host}] {n} iters in")), "{}", self.output);
        }
    }

    /// The packets, in the order they crossed the wire, are exactly `expected`: (sender,
    /// opcode, PSN) each.
    fn assert_in_time(&self, expected: &[(&str, &str, u32)], what: &str) {
        let seen: Vec<(&str, &str, u32)> =
            self.packets.iter().map(|p| (p.src.as_str(), p.opcode.as_str(), p.psn)).collect();
        assert_eq!(seen, expected, "{what}");
    }
}

/// The runner (`xtask run`, testkit's runner) for step `step` on `port` across the two hosts: the
/// server's command on h1 (192.0.2.1) and the client's on h2, each host's runner running its
/// role with `opts` (its options, then `-- FLAGS` for both processes) on the device its lab VM made (lab/run
/// sets RDMA_DEVICE, RDMA_IB_PORT and RDMA_GID_INDEX in each VM). The two runners start the
/// client once the server is ready.
fn runner_roles(step: &str, port: u16, opts: &str) -> (String, String) {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let built = Command::new(env!("CARGO"))
            .args(["build", "--locked", "--quiet", "--package", "xtask"])
            .current_dir(project())
            .status()
            .expect("spawn cargo");
        assert!(built.success(), "cargo build --package xtask failed");
    });
    let xtask = project().join("target/debug/xtask");
    let run = format!("{} run {step} --host 192.0.2.1 --port {port}", xtask.display());
    (format!("{run} --as server {opts}"), format!("{run} --as client {opts}"))
}

/// Runs step `step` with `flags` across the two hosts, server on h1 and client on h2; both
/// must succeed.
///
/// Retransmissions are dropped from its packets: on a loaded machine an ACK can take longer
/// than the 67 ms ACK timeout (`timeout = 14`), and the sender then sends the same packet
/// again (same PSN), which the responder acknowledges again. That is RC working as it
/// should, but it depends on the machine's load, not on the stage.
fn across_two_hosts(step: &str, flags: &str, tag: &str) -> Run {
    let (h1, h2) = runner_roles(step, common::tcp_port(), &format!("-- {flags}"));
    let mut run = across_two_hosts_as(tag, &h1, &h2, 1);
    assert_eq!(run.status, Some(0), "{tag} across two hosts failed:\n{}", run.output);
    // A retransmission repeats its packet's sender, opcode and PSN; its acknowledgement
    // repeats the first one's. Keep the first of each.
    let mut seen = std::collections::HashSet::new();
    run.packets.retain(|p| seen.insert((p.src.clone(), p.opcode.clone(), p.psn)));
    run
}

/// What lab/run printed and its exit status, and the capture of the wire.
struct Ran {
    output: String,
    status: Option<i32>,
    pcap: PathBuf,
}

/// Runs `h1` (the server's command) and `h2` (the client's) across the two hosts with `env`
/// added to lab/run's environment, the wire captured at host `pcap_host`'s NIC (both
/// directions pass it; the capture ends when that host's VM does) into `target/two-hosts/TAG.pcap`.
fn lab_run_two_hosts(tag: &str, h1: &str, h2: &str, pcap_host: u8, env: &[(&str, &str)]) -> Ran {
    let dir = project().join("target/two-hosts");
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join(format!("{tag}.pcap"));
    let _ = std::fs::remove_file(&pcap);
    let out = Command::new(project().join("lab/run"))
        .envs(env.iter().copied())
        .args(["--hosts", "2", "--pcap-host", &pcap_host.to_string(), "--pcap"])
        .arg(&pcap)
        .arg(h1)
        .arg(h2)
        .current_dir(project())
        .output()
        .expect("spawn lab/run");
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ran { output, status: out.status.code(), pcap }
}

/// [`lab_run_two_hosts`] on RoCE, with the capture's packets decoded.
fn across_two_hosts_as(tag: &str, h1: &str, h2: &str, pcap_host: u8) -> Run {
    let Ran { output, status, pcap } = lab_run_two_hosts(tag, h1, h2, pcap_host, &[]);
    let decoded = Command::new(project().join("lab/packets")).arg(&pcap).output().unwrap();
    assert!(decoded.status.success(), "{}", String::from_utf8_lossy(&decoded.stderr));
    let packets = String::from_utf8_lossy(&decoded.stdout)
        .lines()
        .map(|line| {
            let (head, tail) = line.split_once(" PSN 0x").expect("a PSN on every packet");
            let mut words = head.split_whitespace();
            let src = words.next().unwrap().to_string();
            words.next(); // →
            let dst = words.next().unwrap().to_string();
            let opcode = words.by_ref().take_while(|w| *w != "QP").collect::<Vec<_>>().join(" ");
            let qp = words.next().unwrap_or_default().to_string();
            let (psn, rest) = tail.split_at(6);
            Packet { src, dst, opcode, qp, psn: u32::from_str_radix(psn, 16).unwrap(), rest: rest.trim().to_string() }
        })
        .collect();
    Run { output, status, packets, pcap }
}

/// When each of `src`'s packets with this PSN crossed the wire, in seconds from the start
/// of the capture (lab/packets leaves time out: the stage's snapshots must not depend on it).
fn times_of(run: &Run, src: &str, psn: u32) -> Vec<f64> {
    let filter = format!("infiniband.bth.psn == {psn} && ip.src == {src}");
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&run.pcap)
        .args(["-Y", &filter, "-T", "fields", "-e", "frame.time_relative"])
        .output()
        .expect("spawn tshark");
    String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim().parse().unwrap()).collect()
}

/// One packet as a line of the book: who sent it to whom, the opcode, and its PSN relative
/// to the PSN its flow's sender announced in the exchange, with device-chosen values
/// replaced by what they are. Also its flow (0 client's, 1 server's), PSN offset and whether
/// it is an acknowledgement, to sort by.
fn row(run: &Run, p: &Packet) -> (u8, u32, bool, String) {
    let ack = p.opcode.contains("Acknowledge");
    // Requests flow from their sender; an acknowledgement belongs to the flow it
    // acknowledges, whose PSN space it uses.
    let flow = if ack { who(&p.dst) } else { who(&p.src) };
    let base = run.local_psn(if flow == "server" { "h1" } else { "h2" });
    let offset = p.psn.wrapping_sub(base) & 0xff_ffff;
    let rest = common::redact_packet(&p.rest);
    let text = format!(
        "{:<6} → {:<6}  {:<34} PSN {flow}+{offset}{}{rest}",
        who(&p.src),
        who(&p.dst),
        p.opcode,
        if rest.is_empty() { "" } else { " " }
    );
    (u8::from(flow == "server"), offset, ack, text)
}

/// The packets as a stable text for snapshots and the book: one flow at a time (a
/// sender's requests in PSN order, each acknowledgement after the packet it acknowledges)
/// — the interleaving of the two directions in time depends on scheduling, the order
/// within a flow does not.
fn wire_view(run: &Run) -> String {
    let mut rows: Vec<_> = run.packets.iter().map(|p| row(run, p)).collect();
    rows.sort_by_key(|(flow, offset, ack, _)| (*flow, *offset, *ack));
    rows.into_iter().map(|(_, _, _, text)| text + "\n").collect()
}

/// The packets in the order they crossed the wire, for a conversation whose order in time
/// is fixed by causality (a ping-pong: see step_08_ping_pong_crosses_the_wire).
fn wire_in_time(run: &Run) -> String {
    run.packets.iter().map(|p| row(run, p).3 + "\n").collect()
}

fn snapshot(name: &str, text: &str) {
    common::with_filters(|| {
        // insta finds snapshots from the asserting file's directory: this one is a level
        // deeper than the test files whose "../snapshots" the kit's settings name.
        insta::with_settings!({ omit_expression => true, snapshot_path => "../../snapshots" }, {
            insta::assert_snapshot!(format!("two_hosts__{name}"), text);
        });
    });
}

/// Who sent a packet, by address, in the words the book uses.
fn who(ip: &str) -> &'static str {
    if ip == "192.0.2.1" {
        "server"
    } else {
        "client"
    }
}

/// The lines of `host`'s output that say what went wrong: warnings and the explained
/// error, with their indented continuation lines.
fn complaints(run: &Run, host: &str) -> String {
    let prefix = format!("[{host}] ");
    let mut keep = false;
    let mut out = String::new();
    for line in run.output.lines().filter_map(|l| l.strip_prefix(&prefix)) {
        if line.starts_with("warning:") || line.starts_with("error:") {
            keep = true;
        } else if !line.starts_with("  ") {
            keep = false;
        }
        if keep {
            out.push_str(&format!("[{host}] {line}\n"));
        }
    }
    out
}

/// The lines of `host`'s output that start with one of `starts`.
fn lines(run: &Run, host: &str, starts: &[&str]) -> String {
    let prefix = format!("[{host}] ");
    run.output
        .lines()
        .filter(|l| l.strip_prefix(&prefix).is_some_and(|l| starts.iter().any(|s| l.starts_with(s))))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A shell line that prints, after the command before it, what the kernel counted: rxe0's
/// packets sent, its failed transmissions (`send_err`), its transport retries
/// (`completer_retry_err`: retransmit timer expiries) and retries exhausted; and the IP
/// layer's packets it refused to fragment (`FragFails`) with the ICMP "fragmentation
/// needed" it then sent itself (`OutDestUnreachs`); and the kernel's release, since rxe's
/// answer to a failed transmission changed between the lab's kernels. Keeps the command's
/// exit status.
const COUNTERS: &str = r#"rc=$?; echo "kernel: $(uname -r)"; c=/sys/class/infiniband/rxe0/ports/1/hw_counters; echo "rxe0: sent_pkts=$(cat $c/sent_pkts) send_err=$(cat $c/send_err) completer_retry_err=$(cat $c/completer_retry_err) retry_exceeded_err=$(cat $c/retry_exceeded_err)"; awk '/^(Ip|Icmp):/ { if (!($1 in h)) { for (i = 2; i <= NF; i++) h[$1, $i] = i; h[$1] = 1 } else if ($1 == "Ip:") ip = "ip: FragFails=" $h["Ip:", "FragFails"]; else icmp = "icmp: OutDestUnreachs=" $h["Icmp:", "OutDestUnreachs"] } END { print ip, icmp }' /proc/net/snmp; exit $rc"#;

/// The value of `key=` on `host`'s line that starts with `line`.
fn counter(run: &Run, host: &str, line: &str, key: &str) -> u64 {
    let start = format!("[{host}] {line}");
    let l = run.output.lines().find(|l| l.starts_with(&start)).unwrap_or_else(|| panic!("no {start}:\n{}", run.output));
    let word =
        l.split(' ').find_map(|w| w.strip_prefix(&format!("{key}="))).unwrap_or_else(|| panic!("no {key} in {l}"));
    word.parse().unwrap()
}

/// The (major, minor) release of the kernel `host` ran, from its `kernel:` line.
fn kernel_of(run: &Run, host: &str) -> (u32, u32) {
    let start = format!("[{host}] kernel: ");
    let release = run
        .output
        .lines()
        .find_map(|l| l.strip_prefix(&start))
        .unwrap_or_else(|| panic!("no {start}:\n{}", run.output));
    common::kernel_version(release)
}

/// A QP number as the trace prints it (`QPN 0x000011`) or tshark does (decimal or 0x…).
fn qpn(text: &str) -> u32 {
    match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).unwrap(),
        None => text.parse().unwrap(),
    }
}

mod break_cases;
mod ladders;
mod lessons;
