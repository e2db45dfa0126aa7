//! Break-it cases seen on the wire: an RNR NAK and its retry, the same on the QPs of an SRQ
//! that ran dry, a PSN sequence NAK, and a retransmission after the ACK timeout.

use super::*;

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
