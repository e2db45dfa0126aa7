//! The benchmark's statistics, tables and plot, from the raw file `lab/bench` writes.
//!
//! The raw file is tab-separated, one line per run of a tool:
//! `case  size  iterations  round  slot  tool  value  [rate]`, where the slot is the run's
//! position in its round (`ab1` C, `ab2` ours, `aa1`/`aa2` C again: the A/A control) and the
//! value is the tool's own usec/iter or MiB/s (a sweep's bandwidth rows add the message rate
//! in Mpps). Lines `#  key  value` record the run's conditions (clock, seconds, load, qemu).
//!
//! The output is what the book and the README show, so it is pinned byte for byte by the
//! tests against the recorded runs in `book/src/bench/`.

mod plot;
mod sweep;
mod table;

use std::collections::HashMap;

/// `cargo xtask bench WHAT RAW`: the text to print.
pub fn run(what: &str, path: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let raw = Raw::parse(&text).map_err(|e| format!("{path}: {e}"))?;
    match what {
        "table" => table::render(&raw),
        "sweep-table" => Ok(sweep::table(&sweep::Sweep::new(&raw))),
        "sweep-plot" => Ok(plot::render(&sweep::Sweep::new(&raw))),
        _ => Err(format!("unknown bench output '{what}': table, sweep-table or sweep-plot")),
    }
}

/// One run of one tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The case (`lat`, `lat-e`, `bw`, `sweep-lat`, `sweep-bw`, `mtu-1024`, `warm-up`, …).
    pub case: String,
    /// `-s`, as the file spells it (the tables print it so).
    pub size: String,
    /// `-n`, as the file spells it.
    pub iters: String,
    /// The round, from 1 (the warm-up round, which the headline table drops).
    pub round: u32,
    /// `ab1`, `ab2`, `aa1` or `aa2`.
    pub slot: String,
    /// usec/iter or MiB/s.
    pub value: f64,
    /// A sweep's bandwidth rows: the message rate in Mpps.
    pub rate: Option<f64>,
}

/// A raw file: the runs in file order and the recorded conditions.
#[derive(Debug, Default)]
pub struct Raw {
    pub rows: Vec<Row>,
    /// `#  key  value` lines; a later line with the same key wins.
    pub meta: HashMap<String, String>,
}

impl Raw {
    pub fn parse(text: &str) -> Result<Raw, String> {
        let mut raw = Raw::default();
        for (i, line) in text.lines().enumerate() {
            let f: Vec<&str> = line.split('\t').collect();
            if f[0] == "#" {
                if let (Some(k), Some(v)) = (f.get(1), f.get(2)) {
                    raw.meta.insert(k.to_string(), v.to_string());
                }
                continue;
            }
            if line.is_empty() {
                continue;
            }
            let bad = |what: &str| format!("line {}: {what}: `{line}`", i + 1);
            if f.len() < 7 {
                return Err(bad("want case, size, iterations, round, slot, tool, value[, rate]"));
            }
            let number = |s: &str, what: &str| s.parse::<f64>().map_err(|_| bad(&format!("{what} is not a number")));
            raw.rows.push(Row {
                case: f[0].to_string(),
                size: f[1].to_string(),
                iters: f[2].to_string(),
                round: f[3].parse().map_err(|_| bad("the round is not a whole number"))?,
                slot: f[4].to_string(),
                value: number(f[6], "the value")?,
                rate: f.get(7).map(|r| number(r, "the rate")).transpose()?,
            });
        }
        Ok(raw)
    }

    pub fn meta(&self, key: &str) -> &str {
        self.meta.get(key).map_or("", String::as_str)
    }

    /// The cases run alone in a boot of their own (`lab/bench --only NAME --record`): re-run,
    /// `# rerun-NAME SECONDS s[, sizes from B B]`, whose rows replace the recorded ones of
    /// the same case and size, or added, `# added-NAME …`, a case the recorded run did not
    /// have: a sentence each for the table's footer, empty when there are none.
    pub fn rerun_note(&self) -> String {
        let mut reruns: Vec<_> = self
            .meta
            .iter()
            .filter_map(|(k, v)| {
                let (how, case) = k.split_once('-')?;
                matches!(how, "rerun" | "added").then_some((case, how, v))
            })
            .collect();
        reruns.sort();
        reruns
            .iter()
            .map(|(case, how, seconds)| match *how {
                "rerun" => format!(
                    " The {case} rows were re-run alone, in a boot of their own ({seconds}), in place of that case's first runs."
                ),
                _ => format!(" The {case} rows were run alone, in a boot of their own ({seconds}), and added."),
            })
            .collect()
    }

    /// Whether the run's clock was the instruction count (`# clock icount`).
    pub fn icount(&self) -> bool {
        self.meta("clock") == "icount"
    }
}

/// One case (or sweep point) compared: ours against C, with the A/A control.
///
/// ours/C is the median of the ours runs (slot `ab2`) over the median of all C runs (`ab1`,
/// `aa1`, `aa2`). The A/A control is the same statistic with C against itself: for each of
/// C's three positions in a round, the median of the runs there over the median of C's other
/// runs. Each has as many runs as ours (and the other side twice as many, where ours/C's
/// side has three times as many), so it is what an identical program would show with this
/// many rounds; the A/A resolution is the largest |ratio - 1| of the three. The run spread,
/// (max - min) / median of all C runs, is the spread of single runs.
#[derive(Debug, PartialEq)]
pub struct Compared {
    pub c: f64,
    pub ours: f64,
    pub resolution: f64,
    pub spread: f64,
}

/// The C slots of a round, then ours.
pub const C_SLOTS: [&str; 3] = ["ab1", "aa1", "aa2"];
pub const OURS_SLOTS: [&str; 1] = ["ab2"];

/// [`Compared`] from `(slot, value)` runs.
pub fn compare(runs: &[(&str, f64)]) -> Compared {
    let med = |slots: &[&str]| median(&runs.iter().filter(|r| slots.contains(&r.0)).map(|r| r.1).collect::<Vec<_>>());
    let resolution = C_SLOTS
        .iter()
        .map(|&one| {
            let others: Vec<&str> = C_SLOTS.iter().copied().filter(|&s| s != one).collect();
            (med(&[one]) / med(&others) - 1.).abs()
        })
        .fold(0., f64::max);
    let all: Vec<f64> = runs.iter().filter(|r| C_SLOTS.contains(&r.0)).map(|r| r.1).collect();
    let (lo, hi) = all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    Compared { c: med(&C_SLOTS), ours: med(&OURS_SLOTS), resolution, spread: (hi - lo) / median(&all) }
}

/// What the clock was, in words.
pub fn clock_name(icount: bool) -> &'static str {
    if icount {
        "the instruction clock (qemu -icount shift=0, one vCPU: 1 instruction = 1 ns of guest time)"
    } else {
        "wall-clock time"
    }
}

/// The median; of an even count, the mean of the two middle values.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.
    }
}

/// C's `%.Pg`: `P` significant digits, trailing zeros dropped, an exponent outside
/// `-4 <= e < P`.
pub fn g(v: f64, p: usize) -> String {
    if v == 0. || !v.is_finite() {
        return if v == 0. { "0".into() } else { format!("{v}") };
    }
    let sci = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e}'s exponent is a number");
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= p as i32 {
        format!("{}e{}{:02}", trim(mantissa), if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        trim(&format!("{:.*}", (p as i32 - 1 - exp) as usize, v))
    }
}

/// A number as awk prints it with `%s` or joins it to a string: a whole number as an
/// integer, anything else as `%.6g`.
pub fn num(v: f64) -> String {
    if v.fract() == 0. && v.abs() < 2f64.powi(31) {
        format!("{}", v as i64)
    } else {
        g(v, 6)
    }
}

/// C's `%d` of a double: truncated toward zero.
pub fn int(v: f64) -> i64 {
    v as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3., 1., 2.]), 2.);
        assert_eq!(median(&[4., 1., 3., 2.]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn g_is_c_printf() {
        assert_eq!(g(123.456, 4), "123.5");
        assert_eq!(g(1234.5, 4), "1234");
        assert_eq!(g(12345., 4), "1.234e+04");
        assert_eq!(g(0.0790, 4), "0.079");
        assert_eq!(g(0.00001234, 4), "1.234e-05");
        assert_eq!(g(0.995, 6), "0.995");
        assert_eq!(g(100., 4), "100");
        assert_eq!(g(9999.6, 4), "1e+04");
    }

    #[test]
    fn num_is_awk_output() {
        assert_eq!(num(1.005), "1.005");
        assert_eq!(num(100000.), "100000");
        assert_eq!(num(0.5), "0.5");
        assert_eq!(num(1.0 / 3.0), "0.333333");
    }

    #[test]
    fn parse_reads_rows_and_conditions() {
        let raw = Raw::parse(
            "#\tclock\ticount\nsweep-bw\t1\t20000\t1\tab1\tc\t0.08\t0.079261\nlat\t64\t10\t2\tab2\tours\t41.5\n",
        )
        .unwrap();
        assert!(raw.icount());
        assert_eq!(raw.rows.len(), 2);
        assert_eq!(raw.rows[0].rate, Some(0.079261));
        assert_eq!(raw.rows[1].rate, None);
        assert_eq!(raw.rows[1].round, 2);
        let err = Raw::parse("lat\t64\t10\tx\tab2\tours\t41.5\n").unwrap_err();
        assert!(err.contains("line 1: the round"), "{err}");
    }
}
