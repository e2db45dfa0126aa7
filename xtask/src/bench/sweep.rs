//! The sweep's table: per size, C and ours (usec/iter, or MiB/s and the time per written
//! message), ours/C and C/C; the fits; then the path-MTU series with rxe's cost per packet.
//!
//! Bandwidth is taken from the message rate where the raw file has it and it is the more
//! precise: the tools print MiB/s with two decimals (one or two significant digits at
//! 1–16 B), the rate in Mpps with six (two significant digits at 1 MiB). Fits are least
//! squares weighted by 1/y² (relative residuals), so the 1 B point counts as much as the
//! 1 MiB point.

use std::collections::HashMap;
use std::fmt::Write;

use super::table::{verdict, Targets};
use super::{clock_name, compare, int, median, num, Compared, Raw, C_SLOTS, OURS_SLOTS};

/// Which program's runs: C's (slots `ab1`, `aa1`, `aa2` of each round) or ours (`ab2`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tool {
    C,
    Ours,
}

impl Tool {
    fn slots(self) -> &'static [&'static str] {
        match self {
            Tool::C => &C_SLOTS,
            Tool::Ours => &OURS_SLOTS,
        }
    }
}

/// One run: its slot, the tool's own number and, for bandwidth, the message rate.
type Run = (String, f64, Option<f64>);

/// A sweep's runs: for each case and size, every run of each slot (a sweep of several
/// rounds has several).
pub struct Sweep<'a> {
    pub raw: &'a Raw,
    /// (case, size) in the order of their first run.
    pub order: Vec<(String, String)>,
    runs: HashMap<(String, String), Vec<Run>>,
    iters: HashMap<(String, String), String>,
}

impl<'a> Sweep<'a> {
    pub fn new(raw: &'a Raw) -> Sweep<'a> {
        let mut s = Sweep { raw, order: Vec::new(), runs: HashMap::new(), iters: HashMap::new() };
        for r in raw.rows.iter().filter(|r| r.case != "warm-up") {
            let key = (r.case.clone(), r.size.clone());
            if !s.iters.contains_key(&key) {
                s.order.push(key.clone());
            }
            s.iters.insert(key.clone(), r.iters.clone());
            s.runs.entry(key).or_default().push((r.slot.clone(), r.value, r.rate));
        }
        s
    }

    /// Each run of `case` at `size` as `(slot, metric of the run)`.
    fn each(&self, case: &str, size: &str, metric: impl Fn(f64, Option<f64>) -> f64) -> Vec<(&str, f64)> {
        let runs = self.runs.get(&(case.to_string(), size.to_string()));
        runs.into_iter().flatten().map(|(slot, v, rate)| (slot.as_str(), metric(*v, *rate))).collect()
    }

    /// The median of `tool`'s runs by `metric`; 0 when it has none.
    fn median_of(&self, case: &str, size: &str, tool: Tool, metric: impl Fn(f64, Option<f64>) -> f64) -> f64 {
        let v: Vec<f64> = self
            .each(case, size, metric)
            .into_iter()
            .filter(|(slot, _)| tool.slots().contains(slot))
            .map(|r| r.1)
            .collect();
        if v.is_empty() {
            0.
        } else {
            median(&v)
        }
    }

    pub fn has(&self, case: &str, size: &str, tool: Tool) -> bool {
        self.median_of(case, size, tool, |v, _| v) != 0.
    }

    /// The tool's own number (usec/iter, MiB/s), median over its runs.
    pub fn value(&self, case: &str, size: &str, tool: Tool) -> f64 {
        self.median_of(case, size, tool, |v, _| v)
    }

    /// Bandwidth in MiB/s, median over the tool's runs.
    pub fn mibs(&self, case: &str, size: &str, tool: Tool) -> f64 {
        self.median_of(case, size, tool, mibs(size))
    }

    /// Time per written message in µs, median over the tool's runs.
    pub fn us_per_message(&self, case: &str, size: &str, tool: Tool) -> f64 {
        self.median_of(case, size, tool, us_per_message(size))
    }

    /// Ours against C at one point, with the A/A control, by `metric` of each run.
    pub fn compare(&self, case: &str, size: &str, metric: impl Fn(f64, Option<f64>) -> f64) -> Compared {
        compare(&self.each(case, size, metric))
    }
}

/// The message rate, where it was recorded and is the more precise number (a MiB/s below
/// 10^4 times the rate has fewer significant digits).
fn by_rate(value: f64, rate: Option<f64>) -> Option<f64> {
    rate.filter(|&rate| value < 1e4 * rate)
}

/// A bandwidth run's MiB/s, from the rate where that is the more precise.
fn mibs(size: &str) -> impl Fn(f64, Option<f64>) -> f64 {
    let s: f64 = size.parse().unwrap_or(0.);
    move |v, rate| by_rate(v, rate).map_or(v, |rate| rate * 1e6 * s / 1048576.)
}

/// A bandwidth run's time per written message, in µs.
fn us_per_message(size: &str) -> impl Fn(f64, Option<f64>) -> f64 {
    let s: f64 = size.parse().unwrap_or(0.);
    move |v, rate| by_rate(v, rate).map_or(s / (v * 1.048576), |rate| 1. / rate)
}

/// A fit's coefficients and its worst relative residual.
#[derive(Debug, Clone, Copy)]
pub struct Fit {
    pub a: f64,
    pub b: f64,
    pub c: f64,
    pub worst: f64,
}

/// y = a + b*x, least squares weighted by 1/y².
pub fn fit(x: &[f64], y: &[f64]) -> Fit {
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0., 0., 0., 0., 0.);
    for (&x, &y) in x.iter().zip(y) {
        let w = 1. / (y * y);
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
    }
    let d = sw * sxx - sx * sx;
    let b = (sw * sxy - sx * sy) / d;
    let a = (sy - b * sx) / sw;
    let worst = x.iter().zip(y).map(|(&x, &y)| ((a + b * x - y) / y).abs()).fold(0., f64::max);
    Fit { a, b, c: 0., worst }
}

/// y = a + b*x + c*q (q: packets), the same weights, by Cramer's rule.
pub fn fit3(x: &[f64], q: &[f64], y: &[f64]) -> Fit {
    let mut m = [[0f64; 4]; 3];
    for ((&x, &q), &y) in x.iter().zip(q).zip(y) {
        let w = 1. / (y * y);
        m[0][0] += w;
        m[0][1] += w * x;
        m[0][2] += w * q;
        m[1][1] += w * x * x;
        m[1][2] += w * x * q;
        m[2][2] += w * q * q;
        m[0][3] += w * y;
        m[1][3] += w * x * y;
        m[2][3] += w * q * y;
    }
    m[1][0] = m[0][1];
    m[2][0] = m[0][2];
    m[2][1] = m[1][2];
    let det3 = |c1: usize, c2: usize, c3: usize| {
        m[0][c1] * (m[1][c2] * m[2][c3] - m[2][c2] * m[1][c3]) - m[0][c2] * (m[1][c1] * m[2][c3] - m[2][c1] * m[1][c3])
            + m[0][c3] * (m[1][c1] * m[2][c2] - m[2][c1] * m[1][c2])
    };
    let d = det3(0, 1, 2);
    let (a, b, c) = (det3(3, 1, 2) / d, det3(0, 3, 2) / d, det3(0, 1, 3) / d);
    let worst = x.iter().zip(q).zip(y).map(|((&x, &q), &y)| ((a + b * x + c * q - y) / y).abs()).fold(0., f64::max);
    Fit { a, b, c, worst }
}

/// y = a + b*x, plain least squares; with the worst absolute residual.
pub fn line(x: &[f64], y: &[f64]) -> Fit {
    let n = x.len() as f64;
    let (mut sx, mut sy, mut sxx, mut sxy) = (0., 0., 0., 0.);
    for (&x, &y) in x.iter().zip(y) {
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
    }
    let b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    let a = (sy - b * sx) / n;
    let worst = x.iter().zip(y).map(|(&x, &y)| (a + b * x - y).abs()).fold(0., f64::max);
    Fit { a, b, c: 0., worst }
}

/// The path MTU of an `mtu-N` or `mtu-N@alt` case.
pub fn mtu(case: &str) -> f64 {
    case.trim_start_matches("mtu-").trim_end_matches("@alt").parse().unwrap_or(0.)
}

fn ceil(x: f64) -> f64 {
    x.ceil()
}

/// The table, the fits, the MTU series and the legend.
pub fn table(sw: &Sweep) -> String {
    let t = Targets::for_clock(sw.raw.icount());
    let mut out = String::from(
        "| kind | -s | -n | C | ours | ours/C | A/A resolution | verdict |\n|---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    let (mut lx, mut lc, mut lo, mut lq) = (vec![], vec![], vec![], vec![]);
    let (mut bx, mut bc, mut bo, mut bq) = (vec![], vec![], vec![], vec![]);
    for (name, s) in &sw.order {
        let it = &sw.iters[&(name.clone(), s.clone())];
        let size: f64 = s.parse().unwrap_or(0.);
        if name == "sweep-lat" {
            let n = sw.compare(name, s, |v, _| v);
            let ratio = n.ours / n.c;
            writeln!(
                out,
                "| ping-pong -e, usec/iter | {s} | {it} | {:.2} | {:.2} | {ratio:.4} | {:.2} % | {} |",
                n.c,
                n.ours,
                n.resolution * 100.,
                verdict(false, ratio, n.resolution, &t)
            )
            .unwrap();
            lx.push(size);
            lc.push(n.c);
            lo.push(n.ours);
            lq.push(2. * ceil(size / 1024.));
        } else if name == "sweep-bw" {
            let n = sw.compare(name, s, mibs(s));
            let ratio = n.ours / n.c;
            writeln!(
                out,
                "| RDMA WRITE, MiB/s (us/message) | {s} | {it} | {} ({:.2}) | {} ({:.2}) | {ratio:.4} | {:.2} % | {} |",
                super::g(n.c, 4),
                sw.us_per_message(name, s, Tool::C),
                super::g(n.ours, 4),
                sw.us_per_message(name, s, Tool::Ours),
                n.resolution * 100.,
                verdict(true, ratio, n.resolution, &t)
            )
            .unwrap();
            bx.push(size);
            bc.push(sw.us_per_message(name, s, Tool::C));
            bo.push(sw.us_per_message(name, s, Tool::Ours));
            bq.push(ceil(size / 1024.));
        }
    }
    let mut lb = 0.;
    if lx.len() >= 2 {
        out.push_str("\n**Ping-pong fit**, usec/iter = a + b * size (least squares, relative):\n\n");
        out.push_str("| tool | a (us per iteration) | b (ns per byte) | a/b: size where bytes cost as much as the overhead | worst relative residual |\n|---|---:|---:|---:|---:|\n");
        for (tool, y) in [("C", &lc), ("ours", &lo)] {
            let f = fit(&lx, y);
            if tool == "C" {
                lb = f.b;
            }
            writeln!(
                out,
                "| {tool} | {:.1} | {:.2} | {:.0} B | {:.0} % |",
                f.a,
                f.b * 1000.,
                f.a / f.b,
                f.worst * 100.
            )
            .unwrap();
        }
        out.push_str("\nWith packets, usec/iter = a + b * size + c * packets (packets = 2 x ceil(size / 1024): a ping and a pong at path MTU 1024):\n\n");
        out.push_str("| tool | a (us per iteration) | b (ns per byte) | c (us per packet) | worst relative residual |\n|---|---:|---:|---:|---:|\n");
        for (tool, y) in [("C", &lc), ("ours", &lo)] {
            let f = fit3(&lx, &lq, y);
            writeln!(out, "| {tool} | {:.1} | {:.2} | {:.2} | {:.1} % |", f.a, f.b * 1000., f.c, f.worst * 100.)
                .unwrap();
        }
    }
    if bx.len() >= 2 {
        out.push_str("\n**Bandwidth fit**, time per written message = a + b * size (least squares, relative); the bandwidth it tends to is 1/b, half of that is reached at size a/b:\n\n");
        out.push_str("| tool | a (us per message) | b (ns per byte) | 1/b (MiB/s) | a/b: half-bandwidth size | worst relative residual |\n|---|---:|---:|---:|---:|---:|\n");
        for (tool, y) in [("C", &bc), ("ours", &bo)] {
            let f = fit(&bx, y);
            writeln!(
                out,
                "| {tool} | {:.2} | {:.2} | {:.1} | {:.0} B | {:.0} % |",
                f.a,
                f.b * 1000.,
                1. / (f.b * 1.048576),
                f.a / f.b,
                f.worst * 100.
            )
            .unwrap();
        }
        out.push_str(
            "\nWith packets, time per written message = a + b * size + c * packets (packets = ceil(size / 1024)):\n\n",
        );
        out.push_str("| tool | a (us per message) | b (ns per byte) | c (us per packet) | worst relative residual |\n|---|---:|---:|---:|---:|\n");
        for (tool, y) in [("C", &bc), ("ours", &bo)] {
            let f = fit3(&bx, &bq, y);
            writeln!(out, "| {tool} | {:.2} | {:.2} | {:.2} | {:.1} % |", f.a, f.b * 1000., f.c, f.worst * 100.)
                .unwrap();
        }
    }
    // The 64 KiB ping-pong at each path MTU: two messages (ping and pong) per iteration.
    let series: Vec<(&str, f64, f64)> = sw
        .order
        .iter()
        .filter(|(name, _)| name.starts_with("mtu-"))
        .map(|(name, s)| (name.as_str(), 2. * s.parse::<f64>().unwrap_or(0.) / mtu(name), sw.value(name, s, Tool::C)))
        .collect();
    if series.len() >= 2 {
        let px: Vec<f64> = series.iter().map(|p| p.1).collect();
        let py: Vec<f64> = series.iter().map(|p| p.2).collect();
        let f = line(&px, &py);
        out.push_str("\n| path MTU | boot | packets per 64 KiB message | C usec/iter | ours usec/iter | ours/C | C: us per packet, against the next MTU | per-packet cost, share of the iteration | per-packet cost spread over its bytes |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for &(name, x, y) in &series {
            let m = mtu(name);
            let alt = name.contains("@alt");
            // The marginal cost against the series' next MTU (twice this one), same boot.
            let mut marg = String::from("-");
            for &(other, ox, oy) in &series {
                if other != name && other.contains("@alt") == alt && mtu(other) == 2. * m {
                    marg = format!("{:.2}", (y - oy) / (x - ox));
                }
            }
            let ours = sw.value(name, "65536", Tool::Ours);
            writeln!(
                out,
                "| {} | {} | {} | {y:.1} | {ours:.1} | {:.3} | {marg} | {:.0} % | {:.2} ns |",
                num(m),
                if alt { "LAB_RXE=alt (eth0 MTU 9000)" } else { "default (eth0 MTU 1500)" },
                int(x / 2.),
                ours / y,
                100. * f.b * x / y,
                f.b * 1000. / m
            )
            .unwrap();
        }
        write!(
            out,
            "\nrxe costs **{:.2} us of guest time (about {} instructions) per packet** (C, least squares of usec/iter over the 2 x 65536/MTU packets of an iteration, all MTUs above; worst residual {:.1} us); the rest, {:.1} us per iteration, does not depend on the MTU.",
            f.b,
            int(f.b * 1000.),
            f.worst,
            f.a
        )
        .unwrap();
        if lx.len() >= 2 {
            write!(
                out,
                " Of the ping-pong slope b = {:.2} ns per byte (path MTU 1024), {:.2} is this per-packet cost spread over 1024-byte packets (2 packets per 1024 B per iteration) and {:.2} scales with the bytes themselves.",
                lb * 1000.,
                2. * f.b * 1000. / 1024.,
                lb * 1000. - 2. * f.b * 1000. / 1024.
            )
            .unwrap();
        }
        out.push('\n');
    }
    let raw = sw.raw;
    write!(
        out,
        "\nClock: {}; {} rounds of C, ours, C, C per row after a warm-up of each program: ours/C is the median of ours over the median of C, the A/A resolution the same statistic for C against itself (each of C's three positions in a round against the other two), and the verdict is the headline table's; {} s of real time",
        clock_name(raw.icount()),
        raw.meta("rounds"),
        raw.meta("seconds").parse::<i64>().unwrap_or(0)
    )
    .unwrap();
    if !raw.meta("second_boot").is_empty() {
        out.push_str(" in two boots (the MTUs above 1024 in a second, LAB_RXE=alt)");
    }
    writeln!(
        out,
        "; host load average {} before, {} after; {}.{}",
        raw.meta("load_before"),
        raw.meta("load_after"),
        raw.meta("qemu"),
        raw.rerun_note()
    )
    .unwrap();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_recover_exact_lines() {
        let x = [1., 4., 16., 64., 256.];
        let y: Vec<f64> = x.iter().map(|x| 40. + 0.5 * x).collect();
        let f = fit(&x, &y);
        assert!((f.a - 40.).abs() < 1e-9 && (f.b - 0.5).abs() < 1e-12 && f.worst < 1e-12, "{f:?}");
        let q = [2., 2., 2., 2., 2.5];
        let y: Vec<f64> = x.iter().zip(&q).map(|(x, q)| 40. + 0.5 * x + 3. * q).collect();
        let f = fit3(&x, &q, &y);
        assert!((f.a - 40.).abs() < 1e-6 && (f.b - 0.5).abs() < 1e-9 && (f.c - 3.).abs() < 1e-6, "{f:?}");
        let f = line(&[1., 2., 3.], &[2., 4., 7.]);
        assert!((f.b - 2.5).abs() < 1e-12 && (f.a + 2. / 3.).abs() < 1e-12, "{f:?}");
    }

    #[test]
    fn mtu_of_a_case() {
        assert_eq!(mtu("mtu-1024"), 1024.);
        assert_eq!(mtu("mtu-4096@alt"), 4096.);
    }

    #[test]
    fn the_recorded_sweep_table_is_what_the_recorded_runs_give() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../book/src/bench/sweep");
        let raw = Raw::parse(&std::fs::read_to_string(format!("{dir}/raw.tsv")).unwrap()).unwrap();
        let recorded = std::fs::read_to_string(format!("{dir}/table.md")).unwrap();
        assert_eq!(table(&Sweep::new(&raw)), recorded, "book/src/bench/sweep/table.md is not what its raw.tsv gives");
    }
}
