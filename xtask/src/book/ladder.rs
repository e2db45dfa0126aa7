//! The ladder (sequence) diagrams of the wire, `book/src/diagrams/ladder-*.svg`: each drawn
//! from a two-host snapshot of decoded packets (`tests/host_vms/two_hosts/`, from the capture of a
//! real run), so a diagram shows what the capture showed and cannot drift from it.

use std::path::Path;

use super::Generated;

/// The directory the diagrams go to, relative to the project (beside hand-drawn ones).
pub const DIR: &str = "book/src/diagrams";

/// The diagrams: (two-host snapshot, SVG file, title).
pub const LADDERS: &[(&str, &str, &str)] = &[
    ("two_hosts__wire-07_post_send", "ladder-07.svg", "07: one SEND each way (each direction in PSN order)"),
    ("two_hosts__wire-08_poll_cq", "ladder-08.svg", "08: three round trips of the ping-pong, in time order"),
    ("two_hosts__wire-09_rdma_write", "ladder-09.svg", "09: an RDMA WRITE and its WRITE WITH IMMEDIATE notice"),
    (
        "two_hosts__wire-10_rdma_cm",
        "ladder-10.svg",
        "10: the CM on QP 1, one rping (SEND, READ, WRITE), the disconnect",
    ),
    ("two_hosts__wire-11_ud_pingpong", "ladder-11.svg", "11: three round trips of datagrams, and no acknowledgement"),
    ("two_hosts__wire-13_atomics", "ladder-13.svg", "13: three fetch-and-adds, each answered with the original"),
    (
        "two_hosts__break-07_post_send-no-recv-rnr-retry",
        "ladder-rnr-nak.svg",
        "07 --break no-recv-rnr-retry: RNR NAK, one retry, RNR NAK again",
    ),
    (
        "two_hosts__break-12_srq_pingpong-srq-dry",
        "ladder-srq-dry.svg",
        "12 --break srq-dry: two SENDs served, two RNR NAKed, one retry",
    ),
    (
        "two_hosts__break-06_modify_qp_rts-wrong-sq-psn",
        "ladder-psn-nak.svg",
        "06 --break wrong-sq-psn: one PSN sequence NAK, then silence",
    ),
    (
        "two_hosts__break-05_modify_qp_rtr-wrong-dest-qpn",
        "ladder-ack-timeout.svg",
        "05 --break wrong-dest-qpn: no answer; a retry after the ACK timeout",
    ),
    (
        "two_hosts__bad-wire-loss-go-back-n",
        "ladder-go-back-n.svg",
        "08 under 5 % loss: a Middle lost, one PSN sequence NAK, go-back-N",
    ),
];

/// What an AETH syndrome says, in words (bits 6–5: the type; bits 4–0: its value).
fn aeth_words(syndrome: u8) -> String {
    let value = syndrome & 0x1f;
    match (syndrome >> 5) & 3 {
        0 => "ACK".to_string(),
        1 => format!("RNR NAK (retry after timer code {value})"),
        3 => match value {
            0 => "NAK: PSN sequence error".to_string(),
            1 => "NAK: invalid request".to_string(),
            2 => "NAK: remote access error".to_string(),
            3 => "NAK: remote operational error".to_string(),
            v => format!("NAK {v}"),
        },
        _ => format!("AETH 0x{syndrome:02x}"),
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// One packet line of a two-host snapshot (`client → server  RC Send Only  PSN client+0 …`)
/// as (from the client?, label, kind: "req", "data", "ack" or "nak"). `read_len` is the
/// length the last RDMA READ request asked for: an `Only` response carries all of it.
///
/// Only an `Acknowledge` is labelled by its AETH's meaning. Other packets carry an AETH too
/// — a READ response (the data coming back; its AETH acknowledges the request), an atomic
/// acknowledge (the word's original value coming back) — and keep their opcode, with the
/// AETH's meaning after it.
fn ladder_row(line: &str, read_len: Option<&str>) -> (bool, String, &'static str) {
    let (who, rest) = line.split_once("  ").expect("who → whom, then the packet");
    let from_client = who.trim_start().starts_with("client");
    let (opcode, psn_and_more) = rest.trim().split_once(" PSN ").expect("a PSN on every packet");
    // Every ladder but 11's is RC, which goes without saying; 11's "UD" stays: that these
    // are datagrams is its lesson.
    let opcode = opcode.trim().trim_start_matches("RC ");
    let mut words = psn_and_more.split_whitespace();
    let psn = words.next().unwrap();
    let mut label = format!("{opcode} · PSN {psn}");
    let mut kind = match opcode {
        "Acknowledge" => "ack",
        o if o.starts_with("RDMA Read Response") || o == "Atomic Acknowledge" => "data",
        _ => "req",
    };
    // An AtomicETH's operands: an add has one (swap_add is the addend, cmp unused), a
    // compare-and-swap two.
    let compare = opcode == "Compare Swap";
    if opcode == "RDMA Read Response Only" {
        if let Some(len) = read_len {
            label += &format!(" · {len} B of data");
        }
    }
    for w in words {
        if let Some(s) = w.strip_prefix("syndrome=0x") {
            let syndrome = u8::from_str_radix(s, 16).unwrap();
            if syndrome >> 5 != 0 {
                kind = "nak";
            }
            label = if opcode == "Acknowledge" {
                format!("{} · PSN {psn}", aeth_words(syndrome))
            } else {
                format!("{label} · AETH {}", aeth_words(syndrome))
            };
        } else if let Some(m) = w.strip_prefix("msn=") {
            label += &format!(" · MSN {m}");
        } else if w == "RETH" {
            label += " · RETH";
        } else if let Some(l) = w.strip_prefix("len=") {
            label += &format!(" len {l}");
        } else if let Some(i) = w.strip_prefix("imm=") {
            label += &format!(" · imm {i}");
        } else if w == "ack-req" {
            label += " · ack-req";
        } else if let Some(q) = w.strip_prefix("qkey=") {
            label += &format!(" · Q_Key {q}");
        } else if let Some(v) = w.strip_prefix("swap_add=") {
            label += &if compare { format!(" · swap {v}") } else { format!(" · add {v}") };
        } else if let Some(v) = w.strip_prefix("cmp=").filter(|_| compare) {
            label += &format!(" if {v}");
        } else if let Some(v) = w.strip_prefix("orig=") {
            label += &format!(" · original {v}");
        }
    }
    (from_client, label, kind)
}

/// The DMA length of an RDMA READ request's line (`… RETH va=… rkey=… len=64`).
fn read_request_len(line: &str) -> Option<&str> {
    if !line.contains("RDMA Read Request") {
        return None;
    }
    line.split_whitespace().find_map(|w| w.strip_prefix("len="))
}

/// A ladder diagram: the client's and the server's lifelines, one arrow per packet, time
/// flowing down.
fn ladder_svg(title: &str, packets: &[String]) -> String {
    let (left, right, top, step) = (140, 500, 78, 34);
    let height = top + step * packets.len() + 30;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"{height}\" viewBox=\"0 0 640 {height}\" \
         font-family=\"monospace\" font-size=\"12\">\n\
         <title>{}</title>\n\
         <defs><marker id=\"head\" markerWidth=\"8\" markerHeight=\"8\" refX=\"7\" refY=\"4\" orient=\"auto\">\
         <path d=\"M0,0 L8,4 L0,8 z\" fill=\"context-stroke\"/></marker></defs>\n\
         <rect width=\"640\" height=\"{height}\" fill=\"white\"/>\n\
         <text x=\"320\" y=\"20\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>\n\
         <text x=\"{left}\" y=\"48\" text-anchor=\"middle\">client (h2, 192.0.2.2)</text>\n\
         <text x=\"{right}\" y=\"48\" text-anchor=\"middle\">server (h1, 192.0.2.1)</text>\n\
         <line x1=\"{left}\" y1=\"56\" x2=\"{left}\" y2=\"{}\" stroke=\"#555\"/>\n\
         <line x1=\"{right}\" y1=\"56\" x2=\"{right}\" y2=\"{}\" stroke=\"#555\"/>\n",
        xml_escape(title),
        xml_escape(title),
        height - 10,
        height - 10
    );
    let mut read_len = None;
    for (i, line) in packets.iter().enumerate() {
        read_len = read_request_len(line).or(read_len);
        let (from_client, label, kind) = ladder_row(line, read_len);
        let (x1, x2) = if from_client { (left, right) } else { (right, left) };
        let y = top + step * i;
        let color = match kind {
            "req" => "#1f5fa8",
            "ack" => "#777777",
            "data" => "#1e8449",
            _ => "#c0392b",
        };
        svg += &format!(
            "<text x=\"320\" y=\"{}\" text-anchor=\"middle\" fill=\"{color}\">{}</text>\n\
             <line x1=\"{x1}\" y1=\"{y}\" x2=\"{}\" y2=\"{}\" stroke=\"{color}\" stroke-width=\"1.5\" marker-end=\"url(#head)\"/>\n",
            y - 4,
            xml_escape(&label),
            if from_client { x2 - 2 } else { x2 + 2 },
            y + 14
        );
    }
    svg + "</svg>\n"
}

/// Every diagram of [`LADDERS`], from the snapshots in the project at `root`.
pub fn generate(root: &Path) -> Result<Generated, String> {
    let mut files = Vec::new();
    for (snapshot, svg_name, title) in LADDERS {
        let path = root.join(format!("tests/snapshots/{snapshot}.snap"));
        let snap = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let packets = packets(&snap).ok_or_else(|| format!("tests/snapshots/{snapshot}.snap: no insta header"))?;
        if packets.is_empty() {
            return Err(format!("{snapshot} has no packets"));
        }
        files.push((svg_name.to_string(), ladder_svg(title, &packets)));
    }
    // The directory holds hand-drawn diagrams too.
    Ok(Generated { dir: DIR, whole_dir: false, files })
}

/// The packets: the snapshot's lines after insta's header, up to the first that is not a
/// packet (the host-dies view goes on with prose). None without the header.
fn packets(snap: &str) -> Option<Vec<String>> {
    let body = snap.splitn(3, "---\n").nth(2)?;
    Some(body.lines().take_while(|l| l.contains(" → ") && l.contains(" PSN ")).map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_line_becomes_an_arrow_label() {
        let send = "client → server  RC Send Only                       PSN client+0 ack-req";
        assert_eq!(ladder_row(send, None), (true, "Send Only · PSN client+0 · ack-req".to_string(), "req"));
        let rnr = "server → client  RC Acknowledge                     PSN client+0 AETH syndrome=0x2c msn=0";
        assert_eq!(
            ladder_row(rnr, None),
            (false, "RNR NAK (retry after timer code 12) · PSN client+0 · MSN 0".to_string(), "nak")
        );
        let ack = "server → client  RC Acknowledge                     PSN client+3 AETH syndrome=0x1f msn=1";
        assert_eq!(ladder_row(ack, None), (false, "ACK · PSN client+3 · MSN 1".to_string(), "ack"));
        let write = "client → server  RC RDMA Write Only Immediate       PSN client+4 ack-req RETH va=[ADDR] \
                     rkey=[RKEY] len=0 imm=0x00001000";
        assert_eq!(
            ladder_row(write, None).1,
            "RDMA Write Only Immediate · PSN client+4 · ack-req · RETH len 0 · imm 0x00001000"
        );
        assert_eq!(aeth_words(0x60), "NAK: PSN sequence error");
        let datagram = "client → server  UD Send Only                       PSN client+0 DETH qkey=0x11111111 \
                        src_qp=[QPN]";
        assert_eq!(
            ladder_row(datagram, None),
            (true, "UD Send Only · PSN client+0 · Q_Key 0x11111111".to_string(), "req")
        );
    }

    #[test]
    fn a_read_response_is_the_data_coming_back_not_an_ack() {
        let req = "server → client  RC RDMA Read Request               PSN server+0 ack-req RETH va=[ADDR] \
                   rkey=[RKEY] len=64";
        assert_eq!(read_request_len(req), Some("64"));
        let resp = "client → server  RC RDMA Read Response Only         PSN server+0 AETH syndrome=0x1f msn=1";
        assert_eq!(read_request_len(resp), None);
        assert_eq!(
            ladder_row(resp, Some("64")),
            (true, "RDMA Read Response Only · PSN server+0 · 64 B of data · AETH ACK · MSN 1".to_string(), "data")
        );
    }

    #[test]
    fn an_atomic_shows_its_operands_and_its_answer_the_original() {
        let add = "client → server  RC Fetch Add                       PSN client+1 ack-req AtomicETH va=[ADDR] \
                   rkey=[RKEY] swap_add=1 cmp=0";
        assert_eq!(ladder_row(add, None), (true, "Fetch Add · PSN client+1 · ack-req · add 1".to_string(), "req"));
        let cas = "client → server  RC Compare Swap                    PSN client+0 ack-req AtomicETH va=[ADDR] \
                   rkey=[RKEY] swap_add=1 cmp=0";
        assert_eq!(ladder_row(cas, None).1, "Compare Swap · PSN client+0 · ack-req · swap 1 if 0");
        let answer = "server → client  RC Atomic Acknowledge              PSN client+1 AETH syndrome=0x1f msn=2 \
                      AtomicAckETH orig=1";
        assert_eq!(
            ladder_row(answer, None),
            (false, "Atomic Acknowledge · PSN client+1 · AETH ACK · MSN 2 · original 1".to_string(), "data")
        );
    }

    #[test]
    fn the_packets_are_the_lines_after_the_header_up_to_the_prose() {
        let snap = "---\nsource: tests/two_hosts.rs\n---\nclient → server  RC Send Only  PSN client+0\n\
                    server → client  RC Acknowledge  PSN client+0 AETH syndrome=0x00 msn=1\nthen h1 dies\n\
                    client → server  RC Send Only  PSN client+1\n";
        let rows = packets(snap).unwrap();
        assert_eq!(rows.len(), 2);
        let svg = ladder_svg("a <title>", &rows);
        assert!(svg.contains("<title>a &lt;title&gt;</title>") && svg.contains("height=\"176\""), "{svg}");
        assert_eq!(svg.matches("marker-end").count(), 2);
        assert_eq!(packets("no header"), None);
    }
}
