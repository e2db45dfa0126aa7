//! The headline table: ours against C per case, with the A/A control and a verdict.
//!
//! Each case is [`super::compare`]d over its kept rounds (all but the first, the warm-up);
//! the run spread is shown for the reader, not used by the verdict. The same table serves
//! `lab/bench --rping` (step 10 against rping, case `rping`), with its own column names
//! and legend.

use std::fmt::Write;

use super::{clock_name, compare, num, Raw, Row};

/// The targets on a clock: latency ours/C at most `lat`, bandwidth at least `bw`, and the
/// A/A resolution that can tell a miss of that size.
pub(super) struct Targets {
    lat: f64,
    bw: f64,
    resolution: f64,
}

impl Targets {
    pub(super) fn for_clock(icount: bool) -> Targets {
        if icount {
            Targets { lat: 1.005, bw: 0.995, resolution: 0.005 }
        } else {
            Targets { lat: 1.03, bw: 0.97, resolution: 0.03 }
        }
    }
}

/// The verdict: met only when the A/A resolution can see a miss of the target's size;
/// missed only when the miss is larger than the resolution; otherwise inconclusive.
pub(super) fn verdict(bw: bool, ratio: f64, resolution: f64, t: &Targets) -> String {
    let meets = if bw { ratio >= t.bw } else { ratio <= t.lat };
    let target = if bw { format!(">= {}", num(t.bw)) } else { format!("<= {}", num(t.lat)) };
    let margin = if bw { 1. - t.bw } else { t.lat - 1. };
    if meets && resolution <= t.resolution {
        format!("meets target ({target})")
    } else if !meets && (ratio - 1.).abs() - margin > resolution {
        format!("**misses target** ({target})")
    } else if resolution > t.resolution {
        format!("inconclusive: A/A resolution {:.2} % > {:.1} %", resolution * 100., t.resolution * 100.)
    } else {
        // A fine enough control, but the miss is smaller than it: this boot cannot tell.
        format!(
            "inconclusive: {:.2} % past the target, within the A/A resolution {:.2} %",
            ((ratio - 1.).abs() - margin) * 100.,
            resolution * 100.
        )
    }
}

/// The Markdown table and its legend.
pub fn render(raw: &Raw) -> Result<String, String> {
    let icount = raw.icount();
    let t = Targets::for_clock(icount);
    // The cases in the order of their first kept run; the warm-up round is dropped.
    let kept: Vec<&Row> = raw.rows.iter().filter(|r| r.round != 1).collect();
    let mut order: Vec<(&str, &str)> = Vec::new();
    for r in &kept {
        if !order.contains(&(r.case.as_str(), r.size.as_str())) {
            order.push((&r.case, &r.size));
        }
    }
    if order.is_empty() {
        return Err("no kept runs (every run is in round 1, the warm-up)".into());
    }
    let has = |case: &str| order.iter().any(|&(name, _)| name == case);
    let rping_only = order.iter().all(|&(name, _)| name == "rping");
    let (size_flag, count_flag) = if rping_only { ("-S", "-C") } else { ("-s", "-n") };
    let mut out = String::new();
    writeln!(
        out,
        "| case | {size_flag} | {count_flag} | C median | ours median | ours/C | A/A resolution | C run spread | verdict |"
    )
    .unwrap();
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
    let mut rounds = 0;
    for &(name, size) in &order {
        let runs: Vec<&Row> = kept.iter().copied().filter(|r| r.case == name && r.size == size).collect();
        let mut seen: Vec<u32> = runs.iter().map(|r| r.round).collect();
        seen.sort_unstable();
        seen.dedup();
        rounds = seen.len();
        let n = compare(&runs.iter().map(|r| (r.slot.as_str(), r.value)).collect::<Vec<_>>());
        let ratio = n.ours / n.c;
        let bw = name.starts_with("bw");
        let unit = if bw { " MiB/s" } else { " us" };
        let mode = match name {
            "lat" => " (polling)",
            "lat-e" => " (-e)",
            "ud" => " (11, polling)",
            "srq" => " (12, polling)",
            "atomic" => " (13, FETCH_AND_ADD)",
            "atomic-cas" => " (13, CMP_AND_SWAP)",
            _ => "",
        };
        writeln!(
            out,
            "| {name}{mode} | {size} | {} | {:.2}{unit} | {:.2}{unit} | {ratio:.4} | {:.2} % | {:.2} % | {} |",
            runs[0].iters,
            n.c,
            n.ours,
            n.resolution * 100.,
            n.spread * 100.,
            verdict(bw, ratio, n.resolution, &t)
        )
        .unwrap();
    }
    writeln!(
        out,
        "\nClock: {}. {rounds} kept rounds of C, ours, C, C per case (a warm-up round dropped) in one lab VM boot ({} s); host load average {} before, {} after; {}.{}",
        clock_name(icount),
        raw.meta("seconds").parse::<i64>().unwrap_or(0),
        raw.meta("load_before"),
        raw.meta("load_after"),
        raw.meta("qemu"),
        raw.rerun_note()
    )
    .unwrap();
    let polling: Vec<&str> = ["lat", "ud", "srq", "atomic", "atomic-cas"].into_iter().filter(|c| has(c)).collect();
    if icount && !polling.is_empty() {
        writeln!(
            out,
            "Polling cases ({}) ran both tools with lab/yield_poll.c preloaded (an empty ibv_poll_cq yields the one vCPU).",
            polling.join(", ")
        )
        .unwrap();
    }
    if has("ud") {
        out.push_str("ud: `ibv_ud_pingpong` against `11_ud_pingpong`, the same -g, -s and -n on both sides.\n");
    }
    if has("srq") {
        out.push_str("srq: `ibv_srq_pingpong` against `12_srq_pingpong`, the same -g, -s and -n on both sides and both tools' defaults -q 16 -r 500.\n");
    }
    if has("atomic") || has("atomic-cas") {
        out.push_str("atomic: `ib_atomic_lat` against `13_atomics`, the same -g (perftest's -x), -n and -A on both sides; both clients with lab/loop_clock.c preloaded (LOOP_CLOCK_BY=completions), which times the loop from its first completion to its last on the guest's clock: us per atomic (perftest's own figures are on its cycle counter).\n");
    }
    if !rping_only {
        writeln!(
            out,
            "Latency: usec/iter (lower is better; target ours/C <= {}). Bandwidth: BW average in MiB/s (higher is better; target >= {}).",
            num(t.lat),
            num(t.bw)
        )
        .unwrap();
    }
    if has("rping") {
        writeln!(
            out,
            "rping: `rping` against `10_rdma_cm`, the same flags on both sides (-s/-c, -a, -p, -S, -C); both with lab/loop_clock.c preloaded, which times the client's ping loop from its first ibv_post_send to its rdma_disconnect on the guest's clock: us per ping, over -C (lower is better; target ours/C <= {}).",
            num(t.lat)
        )
        .unwrap();
    }
    writeln!(
        out,
        "ours/C: median of the {rounds} ours runs over the median of the {} C runs. A/A resolution: the same statistic for C against itself, each of its three positions in a round ({rounds} runs) over its other two ({} runs); the largest |ratio - 1| of the three. C run spread: (max - min) / median of single C runs, not used by the verdict.",
        3 * rounds,
        2 * rounds
    )
    .unwrap();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(slot: &str, round: u32, value: f64) -> Row {
        let s = String::from;
        Row { case: s("lat"), size: s("64"), iters: s("10"), round, slot: s(slot), value, rate: None }
    }

    #[test]
    fn ratio_resolution_and_spread() {
        // Two kept rounds: C at 10, 12, 10 and 12, 10, 12; ours at 11 and 11.
        let rows = [
            row("ab1", 2, 10.),
            row("ab2", 2, 11.),
            row("aa1", 2, 12.),
            row("aa2", 2, 10.),
            row("ab1", 3, 12.),
            row("ab2", 3, 11.),
            row("aa1", 3, 10.),
            row("aa2", 3, 12.),
        ];
        let runs: Vec<&Row> = rows.iter().collect();
        let n = compare(&runs.iter().map(|r| (r.slot.as_str(), r.value)).collect::<Vec<_>>());
        assert_eq!(n.c, 11.);
        assert_eq!(n.ours, 11.);
        // Every position's median is 11 (10 and 12), so is the others': no A/A difference.
        assert_eq!(n.resolution, 0.);
        assert!((n.spread - 2. / 11.).abs() < 1e-12);
    }

    #[test]
    fn the_atomic_cases_say_what_was_timed_and_how() {
        let mut text = String::from("#\tclock\ticount\n");
        for case in ["atomic", "atomic-cas"] {
            for round in 1..=2 {
                for (slot, tool, v) in
                    [("ab1", "c", 12.7), ("ab2", "ours", 12.8), ("aa1", "c", 12.7), ("aa2", "c", 12.7)]
                {
                    text.push_str(&format!("{case}\t8\t10000\t{round}\t{slot}\t{tool}\t{v}\n"));
                }
            }
        }
        let out = render(&Raw::parse(&text).unwrap()).unwrap();
        assert!(out.contains("| atomic (13, FETCH_AND_ADD) | 8 | 10000 | 12.70 us | 12.80 us |"), "{out}");
        assert!(out.contains("| atomic-cas (13, CMP_AND_SWAP) |"), "{out}");
        assert!(out.contains("Polling cases (atomic, atomic-cas) ran both tools with lab/yield_poll.c"), "{out}");
        assert!(out.contains("LOOP_CLOCK_BY=completions"), "{out}");
    }

    #[test]
    fn verdicts() {
        let t = Targets::for_clock(true);
        assert_eq!(verdict(false, 1.004, 0.003, &t), "meets target (<= 1.005)");
        assert_eq!(verdict(false, 1.004, 0.006, &t), "inconclusive: A/A resolution 0.60 % > 0.5 %");
        assert_eq!(verdict(false, 1.02, 0.003, &t), "**misses target** (<= 1.005)");
        // A miss smaller than what the A/A control can see is no verdict.
        assert_eq!(
            verdict(false, 1.007, 0.003, &t),
            "inconclusive: 0.20 % past the target, within the A/A resolution 0.30 %"
        );
        assert_eq!(verdict(true, 0.99, 0.001, &t), "**misses target** (>= 0.995)");
        assert_eq!(verdict(true, 1.0, 0.001, &t), "meets target (>= 0.995)");
    }

    #[test]
    fn an_rping_table_names_rpings_flags_and_what_was_timed() {
        let mut text = String::from("#\tclock\ticount\n");
        for round in 1..=2 {
            for (slot, tool, v) in [("ab1", "c", 200.), ("ab2", "ours", 150.), ("aa1", "c", 200.), ("aa2", "c", 200.)] {
                text.push_str(&format!("rping\t64\t2000\t{round}\t{slot}\t{tool}\t{v}\n"));
            }
        }
        let out = render(&Raw::parse(&text).unwrap()).unwrap();
        assert!(out.starts_with("| case | -S | -C |"), "{out}");
        assert!(out.contains("| rping | 64 | 2000 | 200.00 us | 150.00 us | 0.7500 |"), "{out}");
        assert!(out.contains("lab/loop_clock.c"), "{out}");
        // Neither the polling shim nor the headline's units: no such case ran.
        assert!(!out.contains("yield_poll") && !out.contains("Bandwidth:"), "{out}");
    }

    #[test]
    fn the_recorded_table_is_what_the_recorded_runs_give() {
        for sub in ["", "/rping"] {
            let dir = format!("{}/../book/src/bench{sub}", env!("CARGO_MANIFEST_DIR"));
            let raw = Raw::parse(&std::fs::read_to_string(format!("{dir}/raw.tsv")).unwrap()).unwrap();
            let recorded = std::fs::read_to_string(format!("{dir}/table.md")).unwrap();
            assert_eq!(render(&raw).unwrap(), recorded, "{dir}/table.md is not what {dir}/raw.tsv gives");
        }
    }
}
