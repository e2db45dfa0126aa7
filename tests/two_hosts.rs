//! The stages across a real (virtual) wire: the two-host lab boots h1 (192.0.2.1, the
//! server) and h2 (192.0.2.2, the client), each with its own rxe0, captures the wire
//! between them and decodes it with tshark (lab/packets). Host-only, as it boots VMs:
//! `cargo test --features lab-host --test two_hosts` (lab/test runs it).
//!
//! The decoded packets of 07, 08 and 09 are checked against what the two sides exchanged over
//! TCP — the first PSN on the wire is the sender's exchanged PSN, the RETH carries the
//! target's exchanged rkey and address — and kept as snapshots, which the book's "What
//! goes on the wire" sections include. Two lessons only two hosts can teach close the file:
//! a path MTU above the link's, and a host that dies mid-run.

use std::path::Path;
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
    psn: u32,
    rest: String,
}

/// What one run across the two hosts produced.
struct Run {
    output: String,
    packets: Vec<Packet>,
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
}

/// Runs `exe ARGS` across the two hosts, server on h1 and client on h2; both must succeed.
///
/// Retransmissions are dropped from its packets: on a loaded machine an ACK can take longer
/// than the 67 ms ACK timeout (`timeout = 14`), and the sender then sends the same packet
/// again (same PSN), which the responder acknowledges again. That is RC working as it
/// should, but it depends on the machine's load, not on the stage.
fn across_two_hosts(exe: &str, args: &str, tag: &str) -> Run {
    let mut run =
        across_two_hosts_as(tag, &format!("{exe} -g 1 {args}"), &format!("{exe} -g 1 {args} 192.0.2.1"), Some(0));
    let mut seen = std::collections::HashSet::new();
    run.packets.retain(|p| seen.insert(format!("{p:?}")));
    run
}

/// Runs `h1` (the server's command) and `h2` (the client's) across the two hosts, and
/// checks lab/run's exit status is `expect`.
fn across_two_hosts_as(tag: &str, h1: &str, h2: &str, expect: Option<i32>) -> Run {
    let dir = project().join("target/two-hosts");
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join(format!("{tag}.pcap"));
    let _ = std::fs::remove_file(&pcap);
    let out = Command::new(project().join("lab/run"))
        .args(["--hosts", "2", "--pcap"])
        .arg(&pcap)
        .arg(h1)
        .arg(h2)
        .current_dir(project())
        .output()
        .expect("spawn lab/run");
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), expect, "{tag} across two hosts: unexpected exit status:\n{output}");
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
            let opcode = words.take_while(|w| *w != "QP").collect::<Vec<_>>().join(" ");
            let (psn, rest) = tail.split_at(6);
            Packet { src, dst, opcode, psn: u32::from_str_radix(psn, 16).unwrap(), rest: rest.trim().to_string() }
        })
        .collect();
    Run { output, packets }
}

/// The packets as a stable text for snapshots and the book: one flow at a time (a
/// sender's requests in PSN order, each acknowledgement after the packet it acknowledges)
/// — the interleaving of the two directions in time depends on scheduling, the order
/// within a flow does not — with device-chosen values replaced by what they are.
fn wire_view(run: &Run) -> String {
    let who = |ip: &str| if ip == "192.0.2.1" { "server" } else { "client" };
    let base = |host: &str| run.local_psn(if host == "server" { "h1" } else { "h2" });
    let mut rows: Vec<(u8, u32, bool, String)> = run
        .packets
        .iter()
        .map(|p| {
            let ack = p.opcode.contains("Acknowledge");
            // Requests flow from their sender; an acknowledgement belongs to the flow it
            // acknowledges, whose PSN space it uses.
            let flow = if ack { who(&p.dst) } else { who(&p.src) };
            let offset = p.psn.wrapping_sub(base(flow)) & 0xff_ffff;
            let rest = redact(&p.rest);
            let text = format!(
                "{:<6} → {:<6}  {:<34} PSN {flow}+{offset}{}{rest}",
                who(&p.src),
                who(&p.dst),
                p.opcode,
                if rest.is_empty() { "" } else { " " }
            );
            (u8::from(flow == "server"), offset, ack, text)
        })
        .collect();
    rows.sort_by_key(|(flow, offset, ack, _)| (*flow, *offset, *ack));
    rows.into_iter().map(|(_, _, _, text)| text + "\n").collect()
}

fn redact(rest: &str) -> String {
    rest.split(' ')
        .map(|word| match word.split_once('=') {
            Some(("va", _)) => "va=[ADDR]".to_string(),
            Some(("rkey", _)) => "rkey=[RKEY]".to_string(),
            _ => word.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({ prepend_module_to_snapshot => true, omit_expression => true }, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn step_05_sends_nothing_on_the_wire() {
    let run = across_two_hosts(env!("CARGO_BIN_EXE_05_modify_qp_rtr"), "-p 18701", "05");
    // Moving a QP through INIT and RTR is local state: no packet until something is posted.
    assert!(run.packets.is_empty(), "{:?}", run.packets);
}

#[test]
fn step_06_sends_nothing_on_the_wire() {
    let run = across_two_hosts(env!("CARGO_BIN_EXE_06_modify_qp_rts"), "-p 18702", "06");
    assert!(run.packets.is_empty(), "{:?}", run.packets);
}

#[test]
fn step_07_sends_one_send_each_way_starting_at_the_exchanged_psns() {
    let run = across_two_hosts(env!("CARGO_BIN_EXE_07_post_send"), "-p 18703", "07");
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
        let acked = run.packets.iter().any(|p| {
            p.src != ip && p.opcode == "RC Acknowledge" && p.psn == (psn + 3) & 0xff_ffff
        });
        assert!(acked, "{receiver} never acknowledged {sender}'s last packet: {:?}", run.packets);
    }
    snapshot("wire-07_post_send", &wire_view(&run));
}

#[test]
fn step_08_ping_pong_crosses_the_wire() {
    // Three round trips of one-packet messages (1024 bytes at path MTU 1024: SEND Only),
    // so the whole conversation fits on a page of the book.
    let run = across_two_hosts(env!("CARGO_BIN_EXE_08_poll_cq"), "-p 18704 -n 3 -s 1024", "08");
    assert!(run.output.contains("[h1] 3 iters in"), "{}", run.output);
    assert!(run.output.contains("[h2] 3 iters in"), "{}", run.output);
    for (sender, ip) in [("h2", "192.0.2.2"), ("h1", "192.0.2.1")] {
        let psn = run.local_psn(sender);
        let sends: Vec<&Packet> = run.packets.iter().filter(|p| p.src == ip && p.opcode.contains("Send")).collect();
        // One SEND Only per message, each with the next PSN from the exchanged one, and
        // each acknowledged by the peer.
        assert_eq!(sends.len(), 3, "{sender}: {:?}", run.packets);
        for (i, p) in sends.iter().enumerate() {
            assert_eq!(p.opcode, "RC Send Only", "{sender}: {p:?}");
            assert_eq!(p.psn, (psn + i as u32) & 0xff_ffff, "{sender} message {i}: {p:?}");
            let acked = run.packets.iter().any(|a| a.src != ip && a.opcode == "RC Acknowledge" && a.psn == p.psn);
            assert!(acked, "{sender}'s message {i} was never acknowledged: {:?}", run.packets);
        }
    }
    snapshot("wire-08_poll_cq", &wire_view(&run));
}

#[test]
fn step_09_writes_with_the_exchanged_rkey_and_address() {
    let run = across_two_hosts(env!("CARGO_BIN_EXE_09_rdma_write"), "-p 18705", "09");
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

/// The lines of `host`'s output that say what went wrong (warnings and the explained
/// error), with the counts that depend on timing redacted.
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
            let line: String = line
                .split(' ')
                .map(|w| if w.chars().all(|c| c.is_ascii_digit()) && w.len() > 1 && w != "1000000" { "[N]" } else { w })
                .collect::<Vec<_>>()
                .join(" ");
            out.push_str(&format!("[{host}] {line}\n"));
        }
    }
    out
}

#[test]
fn a_path_mtu_above_the_link_mtu_puts_nothing_on_the_wire() {
    // -m 4096 on both sides, over Ethernet with MTU 1500 (rxe's active_mtu: 1024). RTR
    // accepts it; each 4096-byte SEND is one 4096-byte packet, too big for the link.
    let exe = env!("CARGO_BIN_EXE_07_post_send");
    let args = "-g 1 -p 18706 -m 4096 --timeout 5";
    let run = across_two_hosts_as("07-mtu-4096", &format!("{exe} {args}"), &format!("{exe} {args} 192.0.2.1"), Some(1));
    for host in ["h1", "h2"] {
        // The TCP exchange crossed the wire, so the QPs were connected...
        assert!(run.output.contains(&format!("[{host}]   remote address:")), "{}", run.output);
        // ...and stage 05 said the MTU was too big for the link.
        assert!(run.output.contains(&format!("[{host}] warning: path MTU IBV_MTU_4096 is above")), "{}", run.output);
        assert!(run.output.contains(&format!("[{host}]   cause: no completion within 5 s")), "{}", run.output);
    }
    // Not one RoCE packet: the client's SEND is dropped before the wire (RoCE packets are
    // never fragmented), retried forever (rxe's retry_cnt 7), dropped again.
    assert!(run.packets.is_empty(), "{:?}", run.packets);
    snapshot("mtu-4096-07_post_send", &(complaints(&run, "h1") + &complaints(&run, "h2") + "on the wire: no RoCE packet\n"));
}

#[test]
fn a_host_that_dies_mid_run_leaves_the_survivor_to_its_watchdog() {
    let exe = env!("CARGO_BIN_EXE_08_poll_cq");
    // One-packet messages, so a retransmission is one packet with one PSN.
    let args = "-g 1 -p 18707 -n 1000000 -s 1024 --timeout 5";
    // h2, the client, dies one second into the ping-pong: sysrq 'b' resets its VM at once,
    // the nearest thing to pulling the plug. Its trace is watched for the exchange's last
    // line so that the ping-pong is surely running. (The capture is taken at h1, the
    // survivor, so it goes on after h2 is gone.)
    let h2 = format!(
        "{exe} {args} 192.0.2.1 | tee /tmp/h2.out & \
         until grep -q 'remote address' /tmp/h2.out 2>/dev/null; do sleep 0.1; done; \
         sleep 1; echo b > /proc/sysrq-trigger"
    );
    // lab/run's status is the survivor's: the dead host never reports one.
    let run = across_two_hosts_as("08-host-dies", &format!("{exe} {args}"), &h2, Some(1));
    assert!(!run.output.contains("[h2] error:") && !run.output.contains("iters in"), "{}", run.output);
    assert!(run.output.contains("[h1] error: waiting for a completion (ibv_poll_cq) failed"), "{}", run.output);
    // After h2's last packet the survivor sends nothing new: if its last SEND was still
    // unacknowledged, it retransmits that one packet, same PSN, again and again (rxe's
    // retry_cnt 7 never runs out); otherwise it sends nothing at all.
    let last_from_h2 = run.packets.iter().rposition(|p| p.src == "192.0.2.2").expect("h2 sent packets");
    let after = &run.packets[last_from_h2 + 1..];
    assert!(after.iter().all(|p| p.src == "192.0.2.1" && p.psn == after[0].psn), "{after:?}");
    eprintln!("after the client's last packet, the server sent {} packets", after.len());
    snapshot("host-dies-08_poll_cq", &complaints(&run, "h1"));
}
