//! The sweep's plot, three panels: usec/iter by size (log-log, with the fit a + b*size of C
//! and the size a/b where bytes start to cost more than the overhead), MiB/s by size (log-x),
//! and the 64 KiB ping-pong by packets per iteration (the path MTUs, with rxe's per-packet
//! line). C solid blue, ours dashed red.

use std::fmt::Write;

use super::num;
use super::sweep::{fit, line, mtu, Sweep, Tool};

/// The two tools: name, slot in a round, colour, dash.
const TOOLS: [(Tool, &str, &str); 2] = [(Tool::C, "#1f77b4", ""), (Tool::Ours, "#d62728", " stroke-dasharray=\"5 3\"")];

/// x of a size on a log-2 axis starting at `x0` (1 B .. 1 MiB over 250 px).
fn lx(s: f64, x0: f64) -> f64 {
    x0 + (s.ln() / 2f64.ln()) / 20. * 250.
}

/// y of a usec/iter on the log-10 axis (10 .. 10^5 over 260 px).
fn ly(u: f64) -> f64 {
    320. - (u.ln() / 10f64.ln() - 1.) / 4. * 260.
}

fn point(out: &mut String, x: f64, y: f64, colour: &str) {
    writeln!(out, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{colour}\"/>").unwrap();
}

fn polyline(out: &mut String, points: &str, colour: &str, dash: &str) {
    writeln!(out, "<polyline points=\"{points}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\"{dash}/>")
        .unwrap();
}

/// A size as the axis shows it: 1, 4, …, 1K, …, 1M.
fn size_label(s: f64) -> String {
    if s >= 1048576. {
        format!("{}M", num(s / 1048576.))
    } else if s >= 1024. {
        format!("{}K", num(s / 1024.))
    } else {
        num(s)
    }
}

/// The SVG.
pub fn render(sw: &Sweep) -> String {
    let lat: Vec<&str> = sw.order.iter().filter(|(n, _)| n == "sweep-lat").map(|(_, s)| s.as_str()).collect();
    let mtus: Vec<(&str, &str)> =
        sw.order.iter().filter(|(n, _)| n.starts_with("mtu-")).map(|(n, s)| (n.as_str(), s.as_str())).collect();
    let mut bmax = 0f64;
    for (name, s) in sw.order.iter().filter(|(n, _)| n == "sweep-bw") {
        for (tool, ..) in TOOLS {
            bmax = bmax.max(sw.mibs(name, s, tool));
        }
    }
    let (mut pmax, mut umax) = (0f64, 0f64);
    for &(name, s) in &mtus {
        pmax = pmax.max(2. * s.parse::<f64>().unwrap_or(0.) / mtu(name));
        for (tool, ..) in TOOLS {
            umax = umax.max(sw.value(name, s, tool));
        }
    }
    let mut o = String::new();
    o.push_str("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 1000 400\" width=\"1000\" height=\"400\" font-family=\"sans-serif\" font-size=\"12\">\n");
    o.push_str("<title>Cost by message size on the instruction clock: ping-pong usec/iter, RDMA WRITE bandwidth, and the 64 KiB ping-pong by packets (path MTU), C tools and ours (lab/bench --sweep)</title>\n");
    o.push_str("<rect width=\"1000\" height=\"400\" fill=\"white\"/>\n");
    // Left: usec/iter, log 10 from 10 to 10^5.
    for e in 1..=5 {
        let u = 10f64.powi(e);
        let y = ly(u);
        writeln!(o, "<line x1=\"60\" y1=\"{y:.1}\" x2=\"310\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"55\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", y + 4., num(u)).unwrap();
    }
    // Middle: MiB/s, linear from 0.
    let step = if bmax > 100. { 50. } else { 20. };
    let top = step * (bmax / step + 1.).trunc();
    let mut t = 0.;
    while t <= top {
        let y = 320. - t / top * 260.;
        writeln!(o, "<line x1=\"380\" y1=\"{y:.1}\" x2=\"630\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"375\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", y + 4., t as i64).unwrap();
        t += step;
    }
    for s in &lat {
        let s: f64 = s.parse().unwrap_or(0.);
        let label = size_label(s);
        writeln!(o, "<text x=\"{:.1}\" y=\"338\" text-anchor=\"middle\">{label}</text><text x=\"{:.1}\" y=\"338\" text-anchor=\"middle\">{label}</text>", lx(s, 60.), lx(s, 380.)).unwrap();
    }
    o.push_str("<line x1=\"60\" y1=\"320\" x2=\"310\" y2=\"320\" stroke=\"black\"/><line x1=\"60\" y1=\"60\" x2=\"60\" y2=\"320\" stroke=\"black\"/>\n");
    o.push_str("<line x1=\"380\" y1=\"320\" x2=\"630\" y2=\"320\" stroke=\"black\"/><line x1=\"380\" y1=\"60\" x2=\"380\" y2=\"320\" stroke=\"black\"/>\n");
    o.push_str("<text x=\"185\" y=\"50\" text-anchor=\"middle\" font-weight=\"bold\">ping-pong (-e): usec/iter, log-log</text>\n");
    o.push_str(
        "<text x=\"505\" y=\"50\" text-anchor=\"middle\" font-weight=\"bold\">RDMA WRITE bandwidth: MiB/s</text>\n",
    );
    o.push_str("<text x=\"185\" y=\"356\" text-anchor=\"middle\">message size (bytes, log scale)</text><text x=\"505\" y=\"356\" text-anchor=\"middle\">message size (bytes, log scale)</text>\n");
    // The fit of C on the left, and its crossover a/b.
    if lat.len() >= 2 {
        let x: Vec<f64> = lat.iter().map(|s| s.parse().unwrap_or(0.)).collect();
        let y: Vec<f64> = lat.iter().map(|s| sw.value("sweep-lat", s, Tool::C)).collect();
        let f = fit(&x, &y);
        let mut points = String::new();
        for e in 0..=40 {
            let s = 2f64.powf(f64::from(e) / 2.);
            write!(points, "{:.1},{:.1} ", lx(s, 60.), ly(f.a + f.b * s)).unwrap();
        }
        writeln!(
            o,
            "<polyline points=\"{points}\" fill=\"none\" stroke=\"#888\" stroke-width=\"1\" stroke-dasharray=\"2 2\"/>"
        )
        .unwrap();
        let x = lx(f.a / f.b, 60.);
        writeln!(
            o,
            "<line x1=\"{x:.1}\" y1=\"70\" x2=\"{x:.1}\" y2=\"320\" stroke=\"#888\" stroke-dasharray=\"2 2\"/>"
        )
        .unwrap();
        writeln!(o, "<text x=\"{:.1}\" y=\"312\" fill=\"#555\">a/b = {:.0} B</text>", x + 4., f.a / f.b).unwrap();
        writeln!(o, "<text x=\"70\" y=\"72\" fill=\"#555\">fit (C): {:.1} us + {:.2} ns/B</text>", f.a, f.b * 1000.)
            .unwrap();
    }
    for (tool, colour, dash) in TOOLS {
        let (mut pl, mut pb) = (String::new(), String::new());
        for s in &lat {
            let x: f64 = s.parse().unwrap_or(0.);
            if sw.has("sweep-lat", s, tool) {
                let y = ly(sw.value("sweep-lat", s, tool));
                write!(pl, "{:.1},{y:.1} ", lx(x, 60.)).unwrap();
                point(&mut o, lx(x, 60.), y, colour);
            }
            if sw.has("sweep-bw", s, tool) {
                let y = 320. - sw.mibs("sweep-bw", s, tool) / top * 260.;
                write!(pb, "{:.1},{y:.1} ", lx(x, 380.)).unwrap();
                point(&mut o, lx(x, 380.), y, colour);
            }
        }
        polyline(&mut o, &pl, colour, dash);
        polyline(&mut o, &pb, colour, dash);
    }
    // Right: 64 KiB ping-pong, usec/iter by packets per iteration (linear axes from 0).
    if !mtus.is_empty() {
        let ptop = 128. * ((pmax + 127.) / 128.).trunc();
        let ustep = if umax > 4000. { 1000. } else { 500. };
        let utop = ustep * (umax / ustep + 1.).trunc();
        let mut u = 0.;
        while u <= utop {
            let y = 320. - u / utop * 260.;
            writeln!(o, "<line x1=\"720\" y1=\"{y:.1}\" x2=\"970\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"715\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", y + 4., u as i64).unwrap();
            u += ustep;
        }
        let mut q = 0.;
        while q <= ptop {
            writeln!(
                o,
                "<text x=\"{:.1}\" y=\"338\" text-anchor=\"middle\">{}</text>",
                720. + q / ptop * 250.,
                q as i64
            )
            .unwrap();
            q += ptop / 4.;
        }
        o.push_str("<line x1=\"720\" y1=\"320\" x2=\"970\" y2=\"320\" stroke=\"black\"/><line x1=\"720\" y1=\"60\" x2=\"720\" y2=\"320\" stroke=\"black\"/>\n");
        o.push_str("<text x=\"845\" y=\"50\" text-anchor=\"middle\" font-weight=\"bold\">64 KiB ping-pong by path MTU</text>\n");
        o.push_str("<text x=\"845\" y=\"356\" text-anchor=\"middle\">packets per iteration (2 x 65536 / MTU)</text>\n");
        let (mut px, mut py) = (vec![], vec![]);
        for &(name, _) in &mtus {
            let x = 2. * 65536. / mtu(name);
            let y = sw.value(name, "65536", Tool::C);
            px.push(x);
            py.push(y);
            for (tool, colour, _) in TOOLS {
                point(&mut o, 720. + x / ptop * 250., 320. - sw.value(name, "65536", tool) / utop * 260., colour);
            }
            // Both boots have a 1024 point; label it once.
            if !name.contains("@alt") || mtu(name) != 1024. {
                writeln!(
                    o,
                    "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#555\">{}</text>",
                    720. + x / ptop * 250. + 5.,
                    320. - y / utop * 260. + 12.,
                    mtu(name) as i64
                )
                .unwrap();
            }
        }
        if px.len() >= 2 {
            let f = line(&px, &py);
            writeln!(
                o,
                "<line x1=\"720\" y1=\"{:.1}\" x2=\"970\" y2=\"{:.1}\" stroke=\"#888\" stroke-dasharray=\"2 2\"/>",
                320. - f.a / utop * 260.,
                320. - (f.a + f.b * ptop) / utop * 260.
            )
            .unwrap();
            writeln!(o, "<text x=\"730\" y=\"72\" fill=\"#555\">rxe: {:.2} us per packet</text>", f.b).unwrap();
            o.push_str(
                "<text x=\"730\" y=\"86\" fill=\"#555\" font-size=\"10\">points labelled with the path MTU</text>\n",
            );
        }
    }
    o.push_str("<line x1=\"80\" y1=\"20\" x2=\"100\" y2=\"20\" stroke=\"#1f77b4\" stroke-width=\"2\"/><text x=\"106\" y=\"24\">C: ibv_rc_pingpong -e, ib_write_bw</text>\n");
    o.push_str("<line x1=\"400\" y1=\"20\" x2=\"420\" y2=\"20\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"5 3\"/><text x=\"426\" y=\"24\">ours: 08_poll_cq -e, 09_rdma_write --bw</text>\n");
    o.push_str("<line x1=\"720\" y1=\"20\" x2=\"740\" y2=\"20\" stroke=\"#888\" stroke-dasharray=\"2 2\"/><text x=\"746\" y=\"24\">least-squares fits (C)</text>\n");
    let footer = if sw.raw.icount() {
        "instruction clock: qemu -icount shift=0, 1 vCPU (1 instruction = 1 ns of guest time), Soft-RoCE loopback; sizes at path MTU 1024"
    } else {
        "wall-clock time"
    };
    writeln!(o, "<text x=\"500\" y=\"388\" text-anchor=\"middle\" fill=\"#555\">{footer}</text>").unwrap();
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::super::Raw;
    use super::*;

    #[test]
    fn axes() {
        assert_eq!(lx(1., 60.), 60.);
        assert_eq!(lx(1048576., 60.), 310.);
        assert_eq!(ly(10.), 320.);
        assert!((ly(100000.) - 60.).abs() < 1e-9);
        assert_eq!(size_label(4096.), "4K");
        assert_eq!(size_label(1048576.), "1M");
        assert_eq!(size_label(256.), "256");
    }

    #[test]
    fn the_recorded_plot_is_what_the_recorded_runs_give() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../book/src/bench/sweep");
        let raw = Raw::parse(&std::fs::read_to_string(format!("{dir}/raw.tsv")).unwrap()).unwrap();
        let recorded = std::fs::read_to_string(format!("{dir}/sweep.svg")).unwrap();
        let ours = render(&Sweep::new(&raw));
        for (i, (a, b)) in ours.lines().zip(recorded.lines()).enumerate() {
            assert_eq!(a, b, "book/src/bench/sweep/sweep.svg line {}", i + 1);
        }
        assert_eq!(ours, recorded, "book/src/bench/sweep/sweep.svg is not what its raw.tsv gives");
    }
}
