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
        insta::with_settings!({ omit_expression => true }, {
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

#[test]
fn step_05_sends_nothing_on_the_wire() {
    let run = across_two_hosts("05", "", "05");
    // Moving a QP through INIT and RTR is local state: no packet until something is posted.
    assert!(run.packets.is_empty(), "{:?}", run.packets);
}

#[test]
fn step_06_sends_nothing_on_the_wire() {
    let run = across_two_hosts("06", "", "06");
    assert!(run.packets.is_empty(), "{:?}", run.packets);
}

#[test]
fn step_07_sends_one_send_each_way_starting_at_the_exchanged_psns() {
    let run = across_two_hosts("07", "", "07");
    for (sender, receiver, ip) in [("h2", "h1", "192.0.2.2"), ("h1", "h2", "192.0.2.1")] {
        let psn = run.local_psn(sender);
        let sends: Vec<&Packet> = run.packets.iter().filter(|p| p.src == ip && p.opcode.contains("Send")).collect();
        // 4096 bytes at path MTU 1024: First, Middle, Middle, Last, with consecutive PSNs
        // starting at the PSN the sender announced (its sq_psn, the receiver's rq_psn).
        let opcodes: Vec<&str> = sends.iter().map(|p| p.opcode.as_str()).collect();
        assert_eq!(opcodes, ["RC Send First", "RC Send Middle", "RC Send Middle", "RC Send Last"], "{sender}");
        for (i, p) in sends.iter().enumerate() {
            assert_eq!(p.psn, (psn + i as u32) & 0xff_ffff, "{sender} packet {i}: {p:?}");
        }
        assert!(sends[3].rest.contains("ack-req"));
        let acked =
            run.packets.iter().any(|p| p.src != ip && p.opcode == "RC Acknowledge" && p.psn == (psn + 3) & 0xff_ffff);
        assert!(acked, "{receiver} never acknowledged {sender}'s last packet: {:?}", run.packets);
    }
    snapshot("wire-07_post_send", &wire_view(&run));
}

#[test]
fn step_08_ping_pong_crosses_the_wire() {
    // Three round trips of one-packet messages (1024 bytes at path MTU 1024: SEND Only),
    // so the whole conversation fits on a page of the book.
    let run = across_two_hosts("08", "-n 3 -s 1024", "08");
    run.assert_iters(3);
    let (client, server) = (run.local_psn("h2"), run.local_psn("h1"));
    // In time, the conversation is fixed by causality, so the test can demand it packet by
    // packet: ping i (client's PSN + i), its ACK, pong i (server's PSN + i), its ACK. The
    // responder acknowledges a SEND before its application can see the receive completion
    // (rxe sends the ACK from the same kernel context that completed the receive, before
    // the single vCPU goes back to user space), and the next ping waits for both the pong
    // and the ACK of the previous ping: the loop's `pending` rule.
    let mut expected = Vec::new();
    for i in 0..3u32 {
        expected.push(("192.0.2.2", "RC Send Only", (client + i) & 0xff_ffff));
        expected.push(("192.0.2.1", "RC Acknowledge", (client + i) & 0xff_ffff));
        expected.push(("192.0.2.1", "RC Send Only", (server + i) & 0xff_ffff));
        expected.push(("192.0.2.2", "RC Acknowledge", (server + i) & 0xff_ffff));
    }
    run.assert_in_time(&expected, "not the ping, ACK, pong, ACK alternation, one PSN more per message each way");
    // Every SEND asks for its acknowledgement, and the ACK's MSN counts the messages the
    // responder has completed so far: i + 1.
    for (i, p) in run.packets.iter().enumerate() {
        if p.opcode == "RC Send Only" {
            assert!(p.rest.contains("ack-req"), "{p:?}");
        } else {
            assert!(p.rest.contains(&format!("msn={}", i / 4 + 1)), "{p:?}");
        }
    }
    snapshot("wire-08_poll_cq", &wire_in_time(&run));
}

#[test]
fn step_09_writes_with_the_exchanged_rkey_and_address() {
    let run = across_two_hosts("09", "", "09");
    let rkey = run.local("h1", "RKEY");
    let addr = run.local("h1", "ADDR");
    let psn = run.local_psn("h2");
    let writes: Vec<&Packet> = run.packets.iter().filter(|p| p.opcode.contains("RDMA Write")).collect();
    assert!(!writes.is_empty(), "no RDMA WRITE on the wire: {:?}", run.packets);
    // Only the initiator sends: the target's CPU and its QP's send queue stay idle.
    assert!(writes.iter().all(|p| p.src == "192.0.2.2" && p.dst == "192.0.2.1"));
    assert_eq!(writes[0].psn, psn, "the first WRITE carries the client's exchanged PSN");
    for (i, p) in writes.iter().enumerate() {
        assert_eq!(p.psn, (psn + i as u32) & 0xff_ffff, "PSNs are consecutive: {p:?}");
    }
    // Every First or Only packet has a RETH naming the target's memory: exactly the rkey
    // and address the server sent over TCP.
    let with_reth: Vec<&&Packet> = writes.iter().filter(|p| p.rest.contains("RETH")).collect();
    assert!(!with_reth.is_empty());
    for p in with_reth {
        assert!(p.rest.contains(&format!("rkey={rkey}")), "RETH rkey is not the exchanged {rkey}: {p:?}");
        assert!(p.rest.contains(&format!("va={addr}")), "RETH va is not the exchanged {addr}: {p:?}");
    }
    assert!(writes.last().unwrap().opcode.contains("Immediate"), "the notice is a WRITE WITH IMMEDIATE");
    snapshot("wire-09_rdma_write", &wire_view(&run));
}

/// Step 13 across two hosts: each fetch-and-add is one *Fetch Add* packet whose AtomicETH
/// names the server's word — the rkey and address it sent over TCP — and the addend, and
/// one *Atomic Acknowledge* answers it, its AtomicAckETH carrying the word's original value.
#[test]
fn step_13_atomics_name_the_word_and_bring_back_its_original() {
    let run = across_two_hosts("13", "-n 3", "13");
    let (rkey, addr) = (run.local("h1", "RKEY"), run.local("h1", "ADDR"));
    let requests: Vec<&Packet> = run.packets.iter().filter(|p| p.rest.contains("AtomicETH")).collect();
    assert_eq!(requests.len(), 3, "one packet per atomic: {:?}", run.packets);
    for p in &requests {
        assert!(p.src == "192.0.2.2" && p.opcode.contains("Fetch Add"), "{p:?}");
        assert!(p.rest.contains(&format!("va={addr} rkey={rkey} swap_add=1 ")), "not the exchanged word, +1: {p:?}");
    }
    let answers: Vec<&Packet> = run.packets.iter().filter(|p| p.rest.contains("AtomicAckETH")).collect();
    assert_eq!(answers.len(), 3, "one answer per atomic: {:?}", run.packets);
    for (i, p) in answers.iter().enumerate() {
        assert!(p.src == "192.0.2.1" && p.rest.ends_with(&format!("AtomicAckETH orig={i}")), "{p:?}");
    }
    snapshot("wire-13_atomics", &wire_view(&run));
}

/// Step 11 across two hosts: three round trips of datagrams. Each message is one UD SEND
/// Only packet carrying a DETH (the Q_Key the receiver's QP checks, and the sender's QP
/// number, which the receiver's completion reports as `src_qp`), and nothing else crosses the
/// wire: no acknowledgement, where RC (08's ladder) answers every SEND with one.
#[test]
fn step_11_datagrams_cross_the_wire_unacknowledged() {
    let run = across_two_hosts("11", "-n 3", "11");
    run.assert_iters(3);
    let (client, server) = (run.local_psn("h2"), run.local_psn("h1"));
    // Causality fixes the order, as for 08: ping i (the client's PSN + i), then pong i
    // (the server's PSN + i), which the server sends only once ping i has arrived. A UD
    // QP's PSN counts its packets too, but nobody checks it: a receiver takes datagrams
    // from any sender, in any order.
    let mut expected = Vec::new();
    for i in 0..3u32 {
        expected.push(("192.0.2.2", "UD Send Only", (client + i) & 0xff_ffff));
        expected.push(("192.0.2.1", "UD Send Only", (server + i) & 0xff_ffff));
    }
    run.assert_in_time(&expected, "not ping, pong, one PSN more per datagram each way, and nothing else");
    for p in &run.packets {
        // Every datagram names the receiver's QP (the BTH) and carries the Q_Key that QP
        // was given at INIT and the sender's own QP number (the DETH): what the exchange
        // announced.
        let (sender, receiver) = if p.src == "192.0.2.2" { ("h2", "h1") } else { ("h1", "h2") };
        assert_eq!(qpn(&p.qp), qpn(&run.local(receiver, "QPN")), "{p:?}");
        let src_qp = p.rest.split_whitespace().find_map(|w| w.strip_prefix("src_qp=")).expect("a DETH");
        assert_eq!(qpn(src_qp), qpn(&run.local(sender, "QPN")), "{p:?}");
        assert!(p.rest.contains("qkey=0x11111111"), "{p:?}");
    }
    snapshot("wire-11_ud_pingpong", &wire_in_time(&run));
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

#[test]
fn a_path_mtu_above_the_link_mtu_puts_nothing_on_the_wire() {
    // -m 4096 on both sides, over Ethernet with MTU 1500 (rxe's active_mtu: 1024), and a
    // message bigger than the link carries (-s 4096, 07's default): one 4096-byte packet.
    let (h1, h2) = runner_roles("07", common::tcp_port(), "-- -m 4096 -s 4096 --timeout 5");
    let run = across_two_hosts_as("07-mtu-4096", &format!("{h1}; {COUNTERS}"), &format!("{h2}; {COUNTERS}"), 1);
    assert_eq!(run.status, Some(1), "{}", run.output);
    for host in ["h1", "h2"] {
        // The TCP exchange crossed the wire and RTR accepted path MTU 4096 above the port's
        // active MTU 1024 (rxe checks it against max_mtu, 4096, only)...
        assert!(run.output.contains(&format!("[{host}]   remote address:")), "{}", run.output);
        assert!(run.output.contains(&format!("[{host}] warning: path MTU IBV_MTU_4096 is above")), "{}", run.output);
    }
    // ...and the server, whose receive waits for a SEND that never comes, sees nothing
    // complete until --timeout. It sent nothing and failed at nothing.
    assert!(run.output.contains("[h1]   cause: no completion within 5 s"), "{}", run.output);
    assert_eq!(counter(&run, "h1", "rxe0:", "sent_pkts"), 0);
    assert_eq!(counter(&run, "h1", "rxe0:", "send_err"), 0);
    // Not one RoCE packet on the wire.
    assert!(run.packets.is_empty(), "{:?}", run.packets);
    // Where the client's SEND went: rxe built one 4096-byte packet; IP, with the DF bit set
    // (RoCE packets are never fragmented), refused it (FragFails) and told itself so (ICMP
    // fragmentation needed), and rxe's transmit failed (send_err). The packet never left,
    // so no retransmit timer ran and retry_cnt was never consumed.
    let send_err = counter(&run, "h2", "rxe0:", "send_err");
    assert_eq!(counter(&run, "h2", "rxe0:", "sent_pkts"), 0);
    assert_eq!(counter(&run, "h2", "rxe0:", "completer_retry_err"), 0);
    assert_eq!(counter(&run, "h2", "rxe0:", "retry_exceeded_err"), 0);
    assert_eq!(counter(&run, "h2", "ip:", "FragFails"), send_err);
    assert_eq!(counter(&run, "h2", "ip:", "OutDestUnreachs"), send_err);
    // What rxe does next depends on the kernel (the lab's guest kernel is the host's Debian
    // release's).
    let kernel = kernel_of(&run, "h2");
    let name = if kernel < (6, 12) {
        // Linux 6.1 (Debian 12) takes a failed transmit for "try again" and resubmits at
        // once, thousands of times a second. Nothing completes; only --timeout ends it.
        assert!(send_err > 100, "{send_err} failed transmissions: far more than any retry_cnt allows");
        assert!(run.output.contains("[h2]   cause: no completion within 5 s"), "{}", run.output);
        eprintln!("the client's rxe0 tried {send_err} times in 5 s");
        "mtu-4096-07_post_send"
    } else {
        // Linux 6.12 (Debian 13) takes it for a local QP error, once: the QP goes to the
        // error state, and its send queue is flushed, this SEND included.
        assert_eq!(send_err, 1);
        let flushed = "[h2] error: work request wr_id 2 (status Work Request Flushed Error (5)";
        assert!(run.output.contains(flushed), "{}", run.output);
        "mtu-4096-07_post_send-linux-6.12"
    };
    let counted = ["rxe0:", "ip:"];
    snapshot(
        name,
        &(complaints(&run, "h1")
            + &lines(&run, "h1", &counted)
            + &complaints(&run, "h2")
            + &lines(&run, "h2", &counted)
            + "on the wire: no RoCE packet\n"),
    );
}

#[test]
fn a_host_that_dies_mid_run_leaves_the_survivor_to_its_watchdog() {
    // One-packet messages, so a retransmission is one packet with one PSN.
    let (h1, h2) = runner_roles("08", common::tcp_port(), "--live -- -n 1000000 -s 1024 --timeout 5");
    // h1, the server, dies one second into the ping-pong: sysrq 'b' resets its VM at once,
    // the nearest thing to pulling the plug. (Its trace is watched for the exchange's last
    // line so that the ping-pong is surely running: its runner passes it on as it comes,
    // --live, which also puts h1's output in lab/run's before the reset.)
    //
    // A second before that, h1 goes deaf: a tc filter drops everything arriving at its
    // eth0. That makes the survivor's side of the story the same every time. Whatever
    // message was in flight, h2 ends up with a SEND that is never acknowledged: its ping
    // was lost, or h1's pong still went out (sending works), h2 received it and sent the
    // next ping. Without it, a reset that falls after h1 acknowledged a ping and before it
    // sent the pong leaves h2 with nothing but a receive posted, and nothing to retransmit.
    // The ingress qdisc that holds the filter goes in before the ping-pong starts: adding a
    // qdisc deactivates the interface for a moment, and on Linux 6.12 a packet rxe cannot
    // hand to it fails h1's QP at once (seen once in three runs: h1's SEND flushed, send_err
    // 1, before the reset). Adding the filter later changes nothing on the way out.
    let h1 = format!(
        "tc qdisc add dev eth0 ingress || exit 2; \
         {h1} 2>&1 | tee /tmp/h1.out & \
         until grep -q 'remote address' /tmp/h1.out 2>/dev/null; do sleep 0.1; done; sleep 1; \
         tc filter add dev eth0 ingress matchall action drop || exit 2; \
         sleep 1; echo b > /proc/sysrq-trigger"
    );
    // The capture is taken at h2's NIC, the survivor's: h1's ends when its VM does.
    let run = across_two_hosts_as("08-host-dies", &h1, &format!("{h2}; {COUNTERS}"), 2);
    // h1 failed first, and without an exit status of its own: lab/run says so and exits
    // 125. The survivor, h2, exits 1 after its watchdog's explained error.
    assert_eq!(run.status, Some(125), "{}", run.output);
    let lab_says = "lab/run: h1's VM stopped before its command finished";
    assert!(run.output.contains(lab_says), "{}", run.output);
    assert!(!run.output.contains("[h1] error:") && !run.output.contains("iters in"), "{}", run.output);
    assert!(run.output.contains("[h2] error: waiting for a completion (ibv_poll_cq) failed"), "{}", run.output);

    // After h1's last packet the survivor sends one thing only: its last SEND, the same
    // packet with the same PSN, again and again (and at most an acknowledgement of h1's
    // last packet). Nobody acknowledges it.
    let last_from_h1 = run.packets.iter().rposition(|p| p.src == "192.0.2.1").expect("h1 sent packets");
    let h1_last_psn = run.packets[last_from_h1].psn;
    let after: Vec<&Packet> = run.packets[last_from_h1 + 1..]
        .iter()
        .filter(|p| !(p.opcode == "RC Acknowledge" && p.psn == h1_last_psn))
        .collect();
    assert!(after.len() >= 3, "{after:?}");
    let psn = after[0].psn;
    assert!(after.iter().all(|p| p.src == "192.0.2.2" && p.opcode == "RC Send Only" && p.psn == psn), "{after:?}");
    assert!(!run.packets.iter().any(|p| p.opcode == "RC Acknowledge" && p.psn == psn), "{psn:#x} was acknowledged");
    // The retransmissions are paced by the retransmit timer, the local ACK timeout that
    // rc_pingpong sets: timeout = 14, 4.096 µs × 2^14 = 67 ms, not by a busy loop. (The
    // first one can come sooner: rxe arms the timer once and pushes it further out as
    // ACKs arrive, instead of restarting it for every packet it sends.)
    let times = times_of(&run, "192.0.2.2", psn);
    let mut gaps: Vec<f64> = times.windows(2).skip(1).map(|w| w[1] - w[0]).collect();
    gaps.sort_by(f64::total_cmp);
    let median = gaps[gaps.len() / 2];
    // Only the median: the capture's clock is the host's, and a busy host can hand qemu
    // two packets of a descheduled guest at once.
    assert!((0.050..0.150).contains(&median), "gaps between retransmissions: {gaps:?}");
    // rxe counted each expiry as a transport retry, and with retry_cnt = 7 never ran out.
    assert!(counter(&run, "h2", "rxe0:", "completer_retry_err") >= after.len() as u64 - 1);
    assert_eq!(counter(&run, "h2", "rxe0:", "retry_exceeded_err"), 0);
    eprintln!(
        "after the server's last packet, the client sent the same SEND {} times, median {:.1} ms apart",
        after.len(),
        median * 1000.0
    );

    let client = run.local_psn("h2");
    let line = row(&run, after[0]).3.replace(&format!("client+{}", psn.wrapping_sub(client) & 0xff_ffff), "client+[N]");
    let view = format!(
        "{lab_says} (a reset, a kernel panic or a crash of qemu).\nlab/run's exit status: 125\n{}\
         the wire after the server's last packet, captured at the client:\n{line}\n{line}\n{line}\n\
         … the same packet again, one retransmit timeout later each time, until the client's watchdog gives up\n",
        complaints(&run, "h2") + &lines(&run, "h2", &["rxe0:"]),
    );
    snapshot("host-dies-08_poll_cq", &view);
}

/// A break-it case across the two hosts, with one-packet messages (`-s 1024`, the link's
/// active_mtu), so that every retry is one packet. Both sides take the case, as in one VM.
/// The capture is taken at the client, h2: it makes the mistake and is the last to give up
/// (the server's VM may stop first, and its capture with it).
fn break_across_two_hosts(step: &str, case: &str) -> Run {
    let (h1, h2) = runner_roles(step, common::tcp_port(), &format!("-- -s 1024 --timeout 4 --break {case}"));
    across_two_hosts_as(&format!("break-{case}"), &h1, &h2, 2)
}

/// The packets of a failure in the order each causes the next (`order` holds indices into
/// the asserted packets). On a loaded machine the capture can record them otherwise — a
/// NAK that a descheduled VM sent late lands after the ACK timer's retransmission — so the
/// snapshot and the book show the causal order the test has checked, not the capture's.
fn causal_view(run: &Run, order: &[&Packet]) -> String {
    order.iter().map(|p| row(run, p).3 + "\n").collect()
}

/// The RNR NAK, and the retry it asks for: the server posted no receive, so its device
/// answers the SEND "receiver not ready" (AETH type 01, with the server's min_rnr_timer,
/// 12: 0.64 ms); the client waits that long and sends the same packet again, once
/// (rnr_retry = 1 in this case), then fails with IBV_WC_RNR_RETRY_EXC_ERR.
#[test]
fn an_rnr_nak_and_its_retry_on_the_wire() {
    let run = break_across_two_hosts("07", "no-recv-rnr-retry");
    assert!(run.output.contains("[h2] error: work request"), "{}", run.output);
    assert!(run.output.contains("RNR retry counter exceeded"), "{}", run.output);
    let psn = run.local_psn("h2");
    let sends: Vec<&Packet> =
        run.packets.iter().filter(|p| p.src == "192.0.2.2" && p.opcode == "RC Send Only").collect();
    let naks: Vec<&Packet> =
        run.packets.iter().filter(|p| p.src == "192.0.2.1" && p.rest.contains("syndrome=0x2c")).collect();
    // The first try and one retry, each the same packet, each answered by an RNR NAK
    // (0x2c: type 01 RNR NAK, timer code 12). On a loaded host a NAK can arrive after the
    // client's ACK timer (timeout 14: ≈67 ms) fired: the client then also retransmits the
    // same packet for that, and the server NAKs that copy too. Those extra copies change
    // nothing in the lesson; the first two of each are what the book shows.
    assert!(sends.len() >= 2, "{:?}", run.packets);
    assert!(sends.iter().all(|p| p.psn == psn), "{:?}", run.packets);
    assert!(naks.len() >= 2, "{:?}", run.packets);
    assert!(naks.iter().all(|p| p.psn == psn), "{:?}", run.packets);
    if sends.len() > 2 {
        eprintln!("{} copies of the SEND and {} RNR NAKs (a late NAK let the ACK timer fire)", sends.len(), naks.len());
    }
    snapshot("break-07_post_send-no-recv-rnr-retry", &causal_view(&run, &[sends[0], naks[0], sends[1], naks[1]]));
}

/// The PSN sequence NAK: the client starts one PSN past the one it announced, so the
/// server's responder answers its first packet once with a NAK (AETH 0x60: type 11 NAK,
/// code 0 PSN sequence error) naming the PSN it expects — one before anything the client
/// has outstanding, which the client drops. The client's retry after the ACK timeout gets
/// no answer, and it fails with IBV_WC_RETRY_EXC_ERR.
#[test]
fn a_psn_sequence_nak_on_the_wire() {
    let run = break_across_two_hosts("06", "wrong-sq-psn");
    assert!(run.output.contains("transport retry counter exceeded"), "{}", run.output);
    let psn = run.local_psn("h2");
    let sends: Vec<&Packet> =
        run.packets.iter().filter(|p| p.src == "192.0.2.2" && p.opcode == "RC Send Only").collect();
    let naks: Vec<&Packet> =
        run.packets.iter().filter(|p| p.src == "192.0.2.1" && p.rest.contains("syndrome=0x60")).collect();
    assert_eq!(sends.len(), 2, "{:?}", run.packets);
    assert!(sends.iter().all(|p| p.psn == (psn + 1) & 0xff_ffff), "{:?}", run.packets);
    assert_eq!(naks.len(), 1, "one NAK, not one per packet: {:?}", run.packets);
    assert_eq!(naks[0].psn, psn, "the NAK names the PSN the server expects");
    snapshot("break-06_modify_qp_rts-wrong-sq-psn", &causal_view(&run, &[sends[0], naks[0], sends[1]]));
}

/// Retransmission after the ACK timeout: the client's QP names a QP the server does not
/// have, so the server's device drops the SEND without a word; after the ACK timeout
/// (14: 67 ms) the client sends it again (retry_cnt = 1 in this case), then fails with
/// IBV_WC_RETRY_EXC_ERR.
#[test]
fn a_retransmission_after_the_ack_timeout_on_the_wire() {
    let run = break_across_two_hosts("05", "wrong-dest-qpn");
    assert!(run.output.contains("transport retry counter exceeded"), "{}", run.output);
    let psn = run.local_psn("h2");
    assert!(run.packets.iter().all(|p| p.src == "192.0.2.2"), "the server answered: {:?}", run.packets);
    assert_eq!(run.packets.len(), 2, "{:?}", run.packets);
    assert!(run.packets.iter().all(|p| p.opcode == "RC Send Only" && p.psn == psn), "{:?}", run.packets);
    // Shown, not asserted (no timing assertions: the capture's clock is the loaded host's).
    let times = times_of(&run, "192.0.2.2", psn);
    eprintln!("the retry crossed the wire {:.1} ms after the first try", (times[1] - times[0]) * 1000.0);
    snapshot("break-05_modify_qp_rtr-wrong-dest-qpn", &causal_view(&run, &run.packets.iter().collect::<Vec<_>>()));
}

/// The QPs `host` announced, in its order: (QPN, PSN) of each `local address:` line (step
/// 12 prints one per QP; its QP i talks to the peer's QP i).
fn local_qps(run: &Run, host: &str) -> Vec<(u32, u32)> {
    let prefix = format!("[{host}]   local address:");
    let field = |line: &str, key: &str| {
        let value = line.split(", ").find_map(|f| f.trim().split_once(&format!("{key} ")).map(|(_, v)| v)).unwrap();
        qpn(value)
    };
    run.output.lines().filter(|l| l.starts_with(&prefix)).map(|l| (field(l, "QPN"), field(l, "PSN"))).collect()
}

/// An SRQ that runs dry, on the wire (`12 --break srq-dry`): the client's four QPs each send
/// one SEND; the server's four QPs share an SRQ that holds two receives. Two of the SENDs
/// take them and are acknowledged; the other two find the pool empty, and
/// the server's device answers each with an RNR NAK — on the QP the SEND came to, as
/// for an empty receive queue of its own. The client retries after the server's
/// min_rnr_timer (12: 0.64 ms), rnr_retry = 1 time, gets a second RNR NAK and fails the
/// SEND with IBV_WC_RNR_RETRY_EXC_ERR. The server's application is told nothing.
#[test]
fn an_srq_that_runs_dry_rnr_naks_on_the_wire() {
    let run = break_across_two_hosts("12", "srq-dry");
    assert!(run.output.contains("[h2] error: work request"), "{}", run.output);
    assert!(run.output.contains("RNR retry counter exceeded"), "{}", run.output);
    let (clients, servers) = (local_qps(&run, "h2"), local_qps(&run, "h1"));
    assert_eq!((clients.len(), servers.len()), (4, 4), "{}", run.output);
    // Each packet's pair of QPs: a request goes to the server's QP i, an answer to the
    // client's QP i.
    let pair_of = |p: &Packet| {
        let to = qpn(&p.qp);
        let own = if p.src == "192.0.2.2" { &servers } else { &clients };
        own.iter().position(|(n, _)| *n == to).unwrap_or_else(|| panic!("a packet to no QP of the run: {p:?}"))
    };
    let mut served = Vec::new();
    let mut starved = Vec::new();
    // The pairs in the order their first SEND crossed the wire, which is the order they
    // reached the server: one virtual wire keeps its order. (Which two the pool serves is
    // the device's affair: the test does not demand the first two.)
    let mut pairs: Vec<usize> = Vec::new();
    for p in run.packets.iter().filter(|p| p.src == "192.0.2.2") {
        let i = pair_of(p);
        if !pairs.contains(&i) {
            pairs.push(i);
        }
    }
    assert_eq!(pairs.len(), 4, "not one SEND on each QP: {:?}", run.packets);
    for &i in &pairs {
        let psn = clients[i].1;
        let of = |p: &&Packet| pair_of(p) == i;
        let sends: Vec<&Packet> = run.packets.iter().filter(|p| p.src == "192.0.2.2").filter(of).collect();
        let answers: Vec<&Packet> = run.packets.iter().filter(|p| p.src == "192.0.2.1").filter(of).collect();
        // One message per QP: every packet on a pair, every copy and every answer, has the
        // PSN the client's QP announced.
        assert!(sends.iter().chain(&answers).all(|p| p.psn == psn), "{i}: {sends:?} {answers:?}");
        assert!(sends.iter().all(|p| p.opcode == "RC Send Only"), "{sends:?}");
        match answers.first() {
            Some(a) if a.rest.contains("syndrome=0x1f") => served.push((i, sends[0], *a)),
            // 0x2c: type 01 (RNR NAK), timer code 12, the server's min_rnr_timer.
            Some(a) if a.rest.contains("syndrome=0x2c") => {
                let naks: Vec<&Packet> = answers.iter().copied().filter(|p| p.rest.contains("syndrome=0x2c")).collect();
                assert_eq!(naks.len(), answers.len(), "a starved QP got something other than RNR NAKs: {answers:?}");
                starved.push((i, sends, naks));
            }
            _ => panic!("pair {i}: no ACK or RNR NAK for its SEND: {:?}", run.packets),
        }
    }
    // Two receives in the pool: two SENDs served, two starved.
    assert_eq!((served.len(), starved.len()), (2, 2), "{:?}", run.packets);
    // The first starved pair to fail ends the client; the retry of a starved pair and its
    // second NAK are on the wire at least once (a NAK's late arrival can also let the ACK
    // timer send another copy: see an_rnr_nak_and_its_retry_on_the_wire).
    let retried = starved.iter().filter(|(_, sends, naks)| sends.len() >= 2 && naks.len() >= 2).count();
    assert!(retried >= 1, "no starved SEND was retried and NAKed again: {:?}", run.packets);
    eprintln!(
        "starved pairs: {}",
        starved
            .iter()
            .map(|(_, s, n)| format!("{} SENDs, {} RNR NAKs", s.len(), n.len()))
            .collect::<Vec<_>>()
            .join("; ")
    );
    // The view: the pairs named a–d, the two served (in the order their SENDs reached the
    // server) then the two starved, with PSNs relative to each client QP's announced PSN;
    // the served pairs' SEND and ACK, the starved pairs' first SEND and RNR NAK, then the
    // retry and second RNR NAK of the first starved pair that shows both (whether the
    // other's retry went out before the client stopped depends on timing).
    let named: Vec<usize> = served.iter().map(|(i, ..)| *i).chain(starved.iter().map(|(i, ..)| *i)).collect();
    let name = |p: &Packet| {
        let i = pair_of(p);
        let label = ["a", "b", "c", "d"][named.iter().position(|&j| j == i).unwrap()];
        let offset = p.psn.wrapping_sub(clients[i].1) & 0xff_ffff;
        let rest = common::redact_packet(&p.rest);
        format!(
            "{:<6} → {:<6}  {:<34} PSN qp-{label}+{offset}{}{rest}\n",
            who(&p.src),
            who(&p.dst),
            p.opcode,
            if rest.is_empty() { "" } else { " " }
        )
    };
    let (_, sends, naks) = starved.iter().find(|(_, sends, naks)| sends.len() >= 2 && naks.len() >= 2).unwrap();
    let mut order: Vec<&Packet> = served.iter().flat_map(|(_, s, a)| [*s, *a]).collect();
    order.extend(starved.iter().flat_map(|(_, s, n)| [s[0], n[0]]));
    order.extend([sends[1], naks[1]]);
    snapshot("break-12_srq_pingpong-srq-dry", &order.into_iter().map(name).collect::<String>());
}

/// One run of the bad-wire lesson: lab/impair's options on each host ("" for none), the
/// message size, the round trips and `--timeout` (the watchdog, and how long the server
/// waits for the client's connection and the client retries it).
struct Impaired {
    tag: &'static str,
    h1: &'static str,
    h2: &'static str,
    size: u32,
    iters: u32,
    timeout: u32,
}

/// The bad wire, in the order one boot runs it: a clean run to compare with, netem on both hosts (both directions) for
/// the three impairments RC repairs, then outages of h2's side mid-run: the wire cut (eth0
/// up, dropping all it sends) short and long, the interface down short and long. The
/// impairments are validated (`-c`) 4096-byte messages, four packets each, so a loss or a
/// reordering can fall inside a message; the outages use one-packet messages.
const BAD_WIRE: &[Impaired] = &[
    Impaired { tag: "clean", h1: "", h2: "", size: 4096, iters: 300, timeout: 5 },
    Impaired { tag: "loss", h1: "--netem 'loss 5%'", h2: "--netem 'loss 5%'", size: 4096, iters: 300, timeout: 5 },
    Impaired {
        tag: "reorder",
        h1: "--netem 'delay 2ms reorder 30% 50%'",
        h2: "--netem 'delay 2ms reorder 30% 50%'",
        size: 4096,
        iters: 300,
        // The loss run before it can end with one side's watchdog (the last ACK, below),
        // 5 s after the other side moved on to this run: this run waits longer for it.
        timeout: 12,
    },
    Impaired {
        tag: "duplicate",
        h1: "--netem 'duplicate 10%'",
        h2: "--netem 'duplicate 10%'",
        size: 4096,
        iters: 300,
        timeout: 5,
    },
    Impaired { tag: "cut-1s", h1: "", h2: "--cut 1", size: 1024, iters: 2000, timeout: 5 },
    Impaired { tag: "cut-7s", h1: "", h2: "--cut 7", size: 1024, iters: 2000, timeout: 5 },
    Impaired { tag: "down-1s", h1: "", h2: "--down 1", size: 1024, iters: 2000, timeout: 5 },
    Impaired { tag: "down-6s", h1: "", h2: "--down 6", size: 1024, iters: 2000, timeout: 5 },
];

/// After each run, each host prints what its rxe0 counted so far (the test takes the
/// differences) and its interface's state.
const WIRE_COUNTERS: &str = r#"c=/sys/class/infiniband/rxe0/ports/1/hw_counters; echo "rxe0: $(for k in sent_pkts completer_retry_err retry_exceeded_err duplicate_request rcvd_seq_err send_err; do printf '%s=%s ' $k $(cat $c/$k); done)eth0=$(cat /sys/class/net/eth0/operstate) carrier_changes=$(cat /sys/class/net/eth0/carrier_changes)""#;

/// One host's output, cut at the `=== TAG` line each run starts with.
fn segments(run: &Run, host: &str) -> Vec<(String, String)> {
    let prefix = format!("[{host}] ");
    let mut out: Vec<(String, String)> = Vec::new();
    for line in run.output.lines().filter_map(|l| l.strip_prefix(&prefix)) {
        if let Some(tag) = line.strip_prefix("=== ") {
            out.push((tag.to_string(), String::new()));
        } else if let Some((_, text)) = out.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

/// The value of `key=` on the `rxe0:` line of a segment.
fn count(segment: &str, key: &str) -> u64 {
    let line = segment.lines().find(|l| l.starts_with("rxe0:")).unwrap_or_else(|| panic!("no rxe0 line:\n{segment}"));
    line.split(' ').find_map(|w| w.strip_prefix(&format!("{key}="))).unwrap().parse().unwrap()
}

/// A QP number as the trace prints it (`QPN 0x000011`) or tshark does (decimal or 0x…).
fn qpn(text: &str) -> u32 {
    match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).unwrap(),
        None => text.parse().unwrap(),
    }
}

/// The requests (not acknowledgements) a segment's QPs received that crossed the wire more
/// than once: (sender, opcode, PSN) → how many times.
fn repeated(run: &Run, segment: &str) -> Vec<(String, String, u32, usize)> {
    let qps: Vec<u32> = segment
        .lines()
        .filter(|l| l.starts_with("  local address:"))
        .filter_map(|l| l.split(", ").find_map(|f| f.trim().strip_prefix("QPN ")))
        .map(qpn)
        .collect();
    let mut seen: std::collections::BTreeMap<(String, String, u32), usize> = Default::default();
    for p in run.packets.iter().filter(|p| !p.opcode.contains("Acknowledge") && !p.qp.is_empty()) {
        if qps.contains(&qpn(&p.qp)) {
            *seen.entry((p.src.clone(), p.opcode.clone(), p.psn)).or_default() += 1;
        }
    }
    seen.into_iter().filter(|(_, n)| *n > 1).map(|((s, o, psn), n)| (s, o, psn, n)).collect()
}

/// The QP numbers a segment's two sides announced: (server's, client's).
fn segment_qps(s1: &str, s2: &str) -> (u32, u32) {
    let qp = |s: &str| {
        let line = s.lines().find(|l| l.starts_with("  local address:")).unwrap_or_else(|| panic!("{s}"));
        qpn(line.split(", ").find_map(|f| f.trim().strip_prefix("QPN ")).unwrap())
    };
    (qp(s1), qp(s2))
}

/// Go-back-N after a loss, found in a capture: the client sent a four-packet SEND (First
/// at PSN e-1, Middles e and e+1, Last e+2) whose first Middle netem dropped before it
/// reached the wire; the server's responder, seeing e+1 where it expected e, answered with
/// one PSN sequence NAK naming e; the client sent again from e to the end of the message,
/// and the server acknowledged the Last. Returns the packets in that causal order (the
/// capture may interleave them otherwise: see causal_view), with their PSNs relative to
/// the message's First and the ACK's MSN hidden.
fn go_back_n(run: &Run, (server_qp, client_qp): (u32, u32)) -> Option<String> {
    let requests: Vec<&Packet> = run
        .packets
        .iter()
        .filter(|p| p.src == "192.0.2.2" && !p.opcode.contains("Acknowledge") && qpn(&p.qp) == server_qp)
        .collect();
    let answers: Vec<&Packet> = run
        .packets
        .iter()
        .filter(|p| p.src == "192.0.2.1" && p.opcode.contains("Acknowledge") && qpn(&p.qp) == client_qp)
        .collect();
    let sent = |psn: u32, opcode: &str| requests.iter().filter(|p| p.psn == psn && p.opcode == opcode).count();
    for nak in answers.iter().filter(|p| p.rest.contains("syndrome=0x60")) {
        let e = nak.psn;
        let (first, next, last) = (e.wrapping_sub(1) & 0xff_ffff, (e + 1) & 0xff_ffff, (e + 2) & 0xff_ffff);
        let shape = sent(first, "RC Send First") == 1
            && sent(e, "RC Send Middle") == 1
            && sent(next, "RC Send Middle") == 2
            && sent(last, "RC Send Last") == 2;
        let Some(ack) = answers.iter().find(|p| p.psn == last && p.rest.contains("syndrome=0x1f")) else {
            continue;
        };
        if !shape {
            continue;
        }
        let pick = |psn: u32| *requests.iter().find(|p| p.psn == psn).unwrap();
        let order = [pick(first), pick(next), pick(last), nak, pick(e), pick(next), pick(last), ack];
        let base = run.local_psn("h2");
        let rows = order.iter().map(|p| {
            let offset = p.psn.wrapping_sub(base) & 0xff_ffff;
            let k = p.psn.wrapping_sub(first) & 0xff_ffff;
            let name = if k == 0 { "[N]".to_string() } else { format!("[N+{k}]") };
            let text = row(run, p).3.replace(&format!("PSN client+{offset}"), &format!("PSN client+{name}"));
            let text = match text.split_once(" msn=") {
                Some((head, _)) => format!("{head} msn=[MSN]"),
                None => text,
            };
            text + "\n"
        });
        return Some(rows.collect());
    }
    None
}

/// RC on a bad wire, in one boot of the two hosts: under loss, reordering and duplication
/// the validated ping-pong completes, and the capture shows the retransmissions; an outage
/// of the wire ends as rxe ends it, explained by what the program can read.
#[test]
fn rc_on_a_bad_wire() {
    // Each run's port, and the one after it for its runners' link.
    let first = common::tcp_ports(2 * BAD_WIRE.len() as u16);
    let start = format!("echo \"kernel: $(uname -r)\"; echo '=== start'; {WIRE_COUNTERS}");
    let (mut h1, mut h2) = (start.clone(), start);
    for (i, r) in BAD_WIRE.iter().enumerate() {
        // lab/impair wraps the role of the host it impairs. Each host's runner starts its
        // role in turn, the client's once the server's says the server listens: after an
        // outage, the server of the run before can still be waiting for its --timeout.
        let wrap = |role: &str, impair: &str| match impair {
            "" => String::new(),
            _ => format!(" --{role}-wrap \"lab/impair {impair} --\""),
        };
        let opts = format!(
            "{}{} -- -c -s {} -n {} --timeout {}",
            wrap("server", r.h1),
            wrap("client", r.h2),
            r.size,
            r.iters,
            r.timeout
        );
        let (server, client) = runner_roles("08", first + 2 * i as u16, &opts);
        // stderr into stdout, so that each run's error stays in its segment.
        let cmd =
            |role: &str| format!("; echo '=== {}'; {role} 2>&1; echo \"exit status: $?\"; {WIRE_COUNTERS}", r.tag);
        h1.push_str(&cmd(&server));
        h2.push_str(&cmd(&client));
    }
    let run = across_two_hosts_as("bad-wire", &h1, &h2, 1);
    // Kept next to the capture, for reading the runs in full.
    std::fs::write(run.pcap.with_extension("out"), &run.output).unwrap();
    let (s1, s2) = (segments(&run, "h1"), segments(&run, "h2"));
    // rxe's answer to an interface that is down changed between the lab's kernels.
    let linux_6_1 = kernel_of(&run, "h2") < (6, 12);
    assert_eq!(s1.len(), BAD_WIRE.len() + 1, "{}", run.output);
    assert_eq!(s2.len(), BAD_WIRE.len() + 1, "{}", run.output);
    let delta = |s: &[(String, String)], i: usize, key: &str| count(&s[i + 1].1, key) - count(&s[i].1, key);
    let done = |out: &str| out.contains("exit status: 0") && out.contains("ok=yes");
    let mut report = String::new();
    for (i, r) in BAD_WIRE.iter().enumerate() {
        let (a, b) = (&s1[i + 1].1, &s2[i + 1].1);
        let retries = delta(&s1, i, "completer_retry_err") + delta(&s2, i, "completer_retry_err");
        let repeats = repeated(&run, &format!("{a}{b}"));
        let rate = b.lines().find(|l| l.contains("iters in")).map(|l| l.rsplit("= ").next().unwrap().to_string());
        report.push_str(&format!(
            "{:<10} {:<22} go-back-N restarts {retries:>4}, requests seen more than once {:>4}, duplicates {:>4}, seq NAKs {:>3}\n",
            r.tag,
            rate.unwrap_or_else(|| "failed".into()),
            repeats.len(),
            delta(&s1, i, "duplicate_request") + delta(&s2, i, "duplicate_request"),
            delta(&s1, i, "rcvd_seq_err") + delta(&s2, i, "rcvd_seq_err"),
        ));
        match r.tag {
            "clean" | "loss" | "reorder" | "duplicate" | "cut-1s" => {
                // RC repairs it: every message arrives, once, in order, and the check of
                // every byte passes. One ending is not repaired: when the ACK of one side's
                // last SEND is lost, the other side, done, exits and takes its QP with it;
                // the first side retransmits to a QP that no longer exists until its
                // watchdog gives up, having received every message. Its explanation says so.
                let n = r.iters;
                let last_ack_lost = |out: &str| {
                    out.contains(&format!("after {} of {n} sends and {n} of {n} receives", n - 1))
                        && out.contains("our device is retransmitting")
                        && out.contains("the peer's program ended")
                };
                assert!(
                    (done(a) && done(b)) || (done(a) && last_ack_lost(b)) || (last_ack_lost(a) && done(b)),
                    "{}:\n[h1]\n{a}\n[h2]\n{b}",
                    r.tag
                );
                if !(done(a) && done(b)) {
                    eprintln!("{}: the ACK of a last SEND was lost; its peer had exited", r.tag);
                }
                // ...by sending again. Under loss, reordering and duplication the capture shows
                // it: the same request, same PSN, more than once on the wire. (The clean wire
                // may show a few too: on a loaded host an ACK can take longer than the ACK
                // timeout.) A cut drops the copies before the wire, and only the device's
                // count of go-back-N restarts (completer_retry_err: timeouts and sequence
                // NAKs alike) shows them.
                match r.tag {
                    "clean" => {}
                    "cut-1s" => assert!(retries > 0, "cut-1s: no go-back-N restart"),
                    _ => assert!(!repeats.is_empty(), "{}: no request crossed the wire twice", r.tag),
                }
            }
            "cut-7s" => {
                // Longer than --timeout: rxe retries forever (retry_cnt 7), so the watchdogs
                // end it, and whichever side has a packet unacknowledged says it is
                // retransmitting. The interface stayed up: nothing blames it.
                for out in [a, b] {
                    assert!(out.contains("no completion for 5 s"), "{out}");
                    assert!(!out.contains("link is down") && !out.contains("crashed"), "{out}");
                }
                assert!(format!("{a}{b}").contains("our device is retransmitting"), "{a}{b}");
                assert_eq!(delta(&s2, i, "retry_exceeded_err"), 0);
            }
            _ => {
                // The interface down. rxe notices only when h2 next transmits, which is what
                // nearly every run meets: h2 had received h1's message and posts its next
                // SEND, or retransmits an unacknowledged one, and rxe fails the QP at once;
                // the explanation names the interface. Linux 6.1 fails the SEND with
                // LOC_QP_OP_ERR before anything reached the interface (send_err 0); 6.12
                // moves the QP to the error state and flushes the SEND. h1 is told nothing
                // by RC; its watchdog says the peer stopped, not that it crashed.
                let failed = |status: &str| b.contains(&format!("error: work request wr_id 2 (status {status}"));
                if failed("local QP operation error (2)") || failed("Work Request Flushed Error (5)") {
                    if linux_6_1 {
                        assert!(failed("local QP operation error (2)"), "{b}");
                        assert_eq!(delta(&s2, i, "send_err"), 0, "{b}");
                    } else {
                        assert!(failed("Work Request Flushed Error (5)"), "{b}");
                    }
                    assert!(b.contains("the link is down: eth0 is down (operstate down"), "{b}");
                    assert!(
                        a.contains("no completion for 5 s") && a.to_lowercase().contains("the peer stopped"),
                        "{a}"
                    );
                    assert!(!a.contains("crashed"), "{a}");
                } else {
                    // Or the whole outage fell while h2 had nothing to send: its SEND
                    // acknowledged, it waited for h1's next message, which h1 retransmitted
                    // (met once in CI on 6.1, in one run of many). Then 1 s down is carried
                    // over as a cut is; 6 s, longer than --timeout, ends by the watchdogs,
                    // h2's naming its interface, h1's the silence.
                    eprintln!("{}: h2 sent nothing while its interface was down; h1 retransmitted", r.tag);
                    assert!(delta(&s1, i, "completer_retry_err") > 0, "{}: h1 did not retransmit:\n{a}", r.tag);
                    if r.tag == "down-1s" {
                        assert!(done(a) && done(b), "{}:\n[h1]\n{a}\n[h2]\n{b}", r.tag);
                    } else {
                        let (a, b) = (a.to_lowercase(), b.to_lowercase());
                        assert!(
                            b.contains("no completion for 5 s") && b.contains("our link is down: eth0 is down"),
                            "{b}"
                        );
                        assert!(
                            a.contains("no completion for 5 s") && a.contains("the peer stopped acknowledging"),
                            "{a}"
                        );
                    }
                }
            }
        }
    }
    eprintln!("{report}");
    // The lesson of loss, from the capture: one packet missing, one NAK, go-back-N.
    let loss = BAD_WIRE.iter().position(|r| r.tag == "loss").unwrap() + 1;
    let episode = go_back_n(&run, segment_qps(&s1[loss].1, &s2[loss].1))
        .expect("no go-back-N after a lost Middle in the loss run's capture");
    snapshot("bad-wire-loss-go-back-n", &episode);
    let down = &s2[BAD_WIRE.iter().position(|r| r.tag == "down-1s").unwrap() + 1].1;
    let error: String = down
        .lines()
        .skip_while(|l| !l.starts_with("error:"))
        .take_while(|l| l.starts_with("error:") || l.starts_with("  "))
        .map(|l| format!("{l}\n"))
        .collect();
    // On 6.12 the flush's list also counts the packets the interface refused while it went
    // down, as many as were in flight: a number of lines that varies, so no snapshot.
    // No error when the outage was survived (above): then there is nothing to snapshot.
    if linux_6_1 && !error.is_empty() {
        snapshot("bad-wire-down-1s-08_poll_cq", &error);
    }
}

/// Step 10 across two hosts: the connection manager's messages (management datagrams to
/// QP 1), then one ping of rping's protocol (a SEND, an RDMA READ of the client's buffer, a
/// SEND each way, an RDMA WRITE into the client's sink, a SEND), then the disconnect. In
/// time order: each packet is caused by the one before it. RC PSNs are counted from the
/// first PSN the CM chose for each flow (`sq_psn`, from `rdma_init_qp_attr` in each side's
/// trace); a READ's responses and an ACK belong to the requester's flow. QP 1's own PSNs
/// are shown as they are.
#[test]
fn step_10_connects_with_the_cm_and_reads() {
    // A CM client is rejected while nobody listens: h2's runner starts it once h1's says
    // its server listens.
    let (h1, h2) = runner_roles("10", common::tcp_port(), "--client-flags '-C 1' -- -V");
    let mut run = across_two_hosts_as("10", &h1, &h2, 1);
    assert_eq!(run.status, Some(0), "10 across two hosts failed:\n{}", run.output);
    let mut seen = std::collections::HashSet::new();
    run.packets.retain(|p| seen.insert((p.src.clone(), p.opcode.clone(), p.psn)));
    let opcodes: Vec<&str> = run.packets.iter().map(|p| p.opcode.as_str()).collect();
    assert_eq!(opcodes[..3], ["CM: ConnectRequest", "CM: ConnectReply", "CM: ReadyToUse"], "{opcodes:?}");
    assert_eq!(opcodes[opcodes.len() - 2..], ["CM: DisconnectRequest", "CM: DisconnectReply"], "{opcodes:?}");
    // The READ names the buffer the client announced in its first SEND.
    let announced = run
        .output
        .lines()
        .find_map(|l| l.strip_prefix("[h2] rping_info"))
        .unwrap_or_else(|| panic!("no rping_info from the client:\n{}", run.output));
    let rkey = announced.split_whitespace().find_map(|w| w.strip_prefix("rkey=")).unwrap();
    let read = run.packets.iter().find(|p| p.opcode == "RC RDMA Read Request").expect("an RDMA READ on the wire");
    assert!(read.src == "192.0.2.1" && read.rest.contains(&format!("rkey={rkey}")), "{read:?} vs {announced}");
    let sq_psn = |host: &str| {
        let prefix = format!("[{host}]   IBV_QP_SQ_PSN");
        let line = run.output.lines().find(|l| l.starts_with(&prefix)).expect("the CM's sq_psn in the trace");
        u32::from_str_radix(line.rsplit("=0x").next().unwrap(), 16).unwrap()
    };
    let (client, server) = (sq_psn("h2"), sq_psn("h1"));
    let text: String = run
        .packets
        .iter()
        .map(|p| {
            let psn = if p.opcode.starts_with("CM: ") {
                p.psn.to_string()
            } else {
                let requester =
                    if p.opcode.contains("Acknowledge") || p.opcode.contains("Response") { &p.dst } else { &p.src };
                let base = if who(requester) == "server" { server } else { client };
                format!("{}+{}", who(requester), p.psn.wrapping_sub(base) & 0xff_ffff)
            };
            let rest = common::redact_packet(&p.rest);
            format!(
                "{:<6} → {:<6}  {:<34} PSN {psn}{}{rest}\n",
                who(&p.src),
                who(&p.dst),
                p.opcode,
                if rest.is_empty() { "" } else { " " }
            )
        })
        .collect();
    snapshot("wire-10_rdma_cm", &text);
}

/// Step 10 over iWARP (`LAB_DEVICE=siw`: siw0 on each host): what goes on the wire instead
/// of RoCE's packets. A TCP connection, MPA's request and reply on it (the CM's whole
/// handshake), then rping's messages as RDMAP over DDP — untagged SENDs with their queue
/// and message numbers, the READ request naming both buffers, the READ response and the
/// WRITE placed by STag and offset — with no acknowledgement of their own (TCP's ACKs,
/// left out, do that), and TCP's FIN for the disconnect. No RoCE packet at all.
#[test]
fn step_10_over_iwarp_is_rdmap_over_tcp() {
    let port = common::tcp_port();
    let (h1, h2) = runner_roles("10", port, "--client-flags '-C 1' -- -V");
    let Ran { output, status, pcap } = lab_run_two_hosts("10-iwarp", &h1, &h2, 1, &[("LAB_DEVICE", "siw")]);
    assert_eq!(status, Some(0), "10 over iWARP across two hosts failed:\n{output}");
    // Step 10's connection only: the runners' own link crosses the wire as TCP too.
    let decoded = Command::new(project().join("lab/packets")).arg(&pcap).arg(port.to_string()).output().unwrap();
    assert!(decoded.status.success(), "{}", String::from_utf8_lossy(&decoded.stderr));
    let decoded = String::from_utf8_lossy(&decoded.stdout).into_owned();
    assert!(!decoded.contains(" PSN "), "RoCE packets on an iWARP wire:\n{decoded}");
    // The READ's source is the buffer the client announced in its first SEND.
    let announced = output
        .lines()
        .find_map(|l| l.strip_prefix("[h2] rping_info"))
        .unwrap_or_else(|| panic!("no rping_info from the client:\n{output}"));
    let rkey = announced.split_whitespace().find_map(|w| w.strip_prefix("rkey=")).unwrap();
    assert!(
        decoded.lines().any(|l| l.contains("Read Request") && l.contains(&format!("source STag {rkey}"))),
        "no READ of the client's buffer {rkey}:\n{decoded}"
    );
    // A run's STags (the rkeys) and tagged offsets (the buffers' addresses) are its own.
    let redact = |what: &str| {
        let mut words: Vec<String> = what.split(' ').map(str::to_string).collect();
        for i in 1..words.len() {
            let placeholder = match words[i - 1].as_str() {
                "STag" => "[RKEY]",
                "TO" => "[ADDR]",
                _ => continue,
            };
            let comma = if words[i].ends_with(',') { "," } else { "" };
            words[i] = format!("{placeholder}{comma}");
        }
        words.join(" ")
    };
    let text: String = decoded
        .lines()
        .map(|l| {
            let (src, rest) = l.split_once(" → ").expect("who → whom");
            let (dst, what) = rest.trim_start().split_once("  ").expect("then the message");
            let what = redact(what);
            format!("{:<6} → {:<6}  {what}\n", who(src.trim()), who(dst.trim()))
        })
        .collect();
    let first: Vec<&str> = text.lines().take(4).map(|l| l.split_once("  ").unwrap().1).collect();
    assert_eq!(first, ["TCP SYN", "TCP SYN, ACK", "MPA Request (CRC off)", "MPA Reply (CRC off)"], "{text}");
    assert!(text.trim_end().ends_with("TCP FIN"), "{text}");
    snapshot("wire-10_rdma_cm-iwarp", &text);
}
