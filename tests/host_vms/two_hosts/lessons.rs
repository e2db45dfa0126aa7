//! What only two hosts can show: a path MTU above the link's, a host that dies mid-run, and
//! RC on a bad wire (lab/impair).

use super::*;

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
