//! Each step's packets on the wire, checked against what its two sides exchanged over TCP,
//! and kept as the snapshots the book's "What goes on the wire" sections and ladders show.

use super::*;

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
