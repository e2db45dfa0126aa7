//! Grading: each run compared with the reference, the first line that differs named in the
//! terms of the trace, and the verdict.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::Picks;
use rdma_dissect::role::Role;
use testkit as common;

use super::report::append_result;
use super::run::{run_once, runs, Ran, RunResult, DEADLINE};
use super::variant::{Note, Variant};
use super::{step, Exercise, Partner};

/// The C tool prints no `ibv_create_qp` line: its QPN is in its `local address:` line.
/// Said the way our trace says it, the redaction can name it `[QPN:server]`/`[QPN:client]`.
fn with_c_qpn(text: &str) -> String {
    let qpn = text.lines().find_map(|l| {
        let rest = l.strip_prefix("  local address:")?;
        let at = rest.find("QPN ")?;
        Some(rest[at + 4..].split(',').next()?.trim().to_string())
    });
    match qpn {
        Some(q) => format!("{text}ibv_create_qp qp_num={q}\n"),
        None => text.to_string(),
    }
}

/// Our side's and the peer's stdout, redacted as the snapshots are.
fn redacted(run: &RunResult, c_peer: bool, cm: bool) -> (String, Option<String>) {
    let dev = common::device();
    let ours = &run.ours.stdout;
    let Some(peer) = &run.peer else {
        return (common::redact(ours, None, &Picks::alone(ours), dev), None);
    };
    let peer_text = if c_peer { with_c_qpn(&peer.stdout) } else { peer.stdout.clone() };
    let (server, client) =
        if run.side == Some(Role::Server) { (ours.clone(), peer_text) } else { (peer_text, ours.clone()) };
    let picks = Picks::pair(&server, &client);
    let peer_side = run.side.map(Role::peer);
    // A step on rdma_cm (10) also shows what only the CM does.
    let redact = |text: &str, side| {
        let text = common::redact(text, side, &picks, dev);
        if cm {
            common::cm::redact_cm_values(&text, dev)
        } else {
            text
        }
    };
    (redact(ours, run.side), Some(redact(&peer.stdout, peer_side)))
}

/// A trace line as label (the verb or mask-bit column, or the whole line) and its fields.
struct Parsed {
    label: String,
    fields: Vec<(String, String)>,
}

fn parse_line(line: &str) -> Parsed {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let first_kv = tokens.iter().position(|t| t.contains('='));
    match first_kv {
        None => Parsed { label: line.trim().to_string(), fields: vec![] },
        Some(i) => {
            let mut fields = Vec::new();
            for t in &tokens[i..] {
                match t.split_once('=') {
                    Some((k, v)) => fields.push((k.to_string(), v.to_string())),
                    None => fields.push(("state change".to_string(), t.to_string())),
                }
            }
            Parsed { label: tokens[..i].join(" "), fields }
        }
    }
}

/// The event line a trace line belongs to (itself, or the last unindented line before it).
fn event_of(lines: &[&str], i: usize) -> String {
    lines[..=i.min(lines.len().saturating_sub(1))]
        .iter()
        .rev()
        .find(|l| !l.starts_with(' '))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The mask bits (`IBV_QP_…` detail lines) of the event block that starts at `start`.
fn mask_bits(lines: &[&str], start: usize) -> Vec<String> {
    lines[start + 1..].iter().take_while(|l| l.starts_with("  IBV_QP_")).map(|l| parse_line(l).label).collect()
}

/// The section of the book to reread for a difference at `what` (a label and key).
fn reread(step: &Exercise, what: &str) -> String {
    let table: &[(&str, &str, &str)] = &[
        ("dest_qp_num", "05_modify_qp_rtr", "Break it › --break wrong-dest-qpn"),
        ("is_global", "05_modify_qp_rtr", "Break it › --break no-grh"),
        ("grh.dgid", "05_modify_qp_rtr", "Break it › --break no-grh"),
        ("sgid_index", "05_modify_qp_rtr", "Break it › --break bad-gid-index"),
        ("sq_psn", "06_modify_qp_rts", "Break it › --break wrong-sq-psn"),
        ("INIT→RTS", "06_modify_qp_rts", "Break it › --break rts-from-init"),
        ("ibv_reg_mr", "03_reg_mr", "What this stage does, and why"),
        ("cqe", "04_create_qp", "Break it › --break cq-too-small"),
        ("byte_len", "07_post_send", "Break it › --break recv-too-small"),
        ("wr.rdma", "09_rdma_write", "Break it › --break wrong-rkey"),
        ("imm_data", "09_rdma_write", "What this stage does, and why"),
    ];
    let (chapter, section) =
        table.iter().find(|(needle, _, _)| what.contains(needle)).map(|(_, c, s)| (*c, *s)).unwrap_or_else(|| {
            let section = if what.starts_with("mask ") && step.nn == "05" {
                "Break it › --break missing-attr"
            } else {
                "What this stage does, and why"
            };
            (step.bin.as_str(), section)
        });
    format!("book chapter {} (book/src/{chapter}.md), section “{section}”", &chapter[..2])
}

/// The first difference between the reference's lines and the student's, explained; None
/// when they are the same. `notes` are the lines a variant changed in `expected`: a
/// difference there says which value the variant asks for.
pub(super) fn first_difference(step: &Exercise, expected: &str, got: &str, notes: &[Note]) -> Option<String> {
    let e: Vec<&str> = expected.lines().collect();
    let g: Vec<&str> = got.lines().collect();
    let i = (0..e.len().max(g.len())).find(|&i| e.get(i) != g.get(i))?;
    let note = notes.iter().find(|n| n.line == i);
    let mut msg = String::new();
    match (e.get(i), g.get(i)) {
        (Some(want), None) => {
            let _ = writeln!(msg, "the trace stops early, in {}", event_of(&e, i));
            let _ = writeln!(msg, "    expected next: {want}");
            let _ = writeln!(msg, "    got:           (nothing more)");
            let _ = write!(msg, "  reread: {}", reread(step, want));
        }
        (None, Some(extra)) => {
            let _ = writeln!(msg, "the trace goes on where the reference's ends");
            let _ = writeln!(msg, "    expected:      (nothing more)");
            let _ = write!(msg, "    got:           {extra}\n  reread: {}", reread(step, extra));
        }
        (Some(want), Some(have)) => {
            let (pw, ph) = (parse_line(want), parse_line(have));
            let event = event_of(&e, i);
            if pw.label == ph.label {
                let mut what = Vec::new();
                for (k, v) in &pw.fields {
                    let mine = if note.is_some_and(|n| n.key == k) { " (your variant's value)" } else { "" };
                    match ph.fields.iter().find(|(hk, _)| hk == k) {
                        Some((_, hv)) if hv != v => what.push(format!("{k}: expected {v}{mine}, got {hv}")),
                        None => what.push(format!("{k}: expected {v}, got nothing")),
                        _ => {}
                    }
                }
                for (k, v) in &ph.fields {
                    if !pw.fields.iter().any(|(wk, _)| wk == k) {
                        what.push(format!("{k}: not expected, got {v}"));
                    }
                }
                let place = if want.starts_with("  IBV_QP_") {
                    format!("in {event}, attribute {}", pw.label)
                } else if want.starts_with(' ') {
                    format!("in {event}, {}", pw.label)
                } else {
                    format!("in {}", pw.label)
                };
                let key = what.first().and_then(|w| w.split(':').next()).unwrap_or("").to_string();
                let _ = writeln!(
                    msg,
                    "{place}: {}",
                    if what.is_empty() { "the line differs".into() } else { what.join("; ") }
                );
                let _ = writeln!(msg, "    expected: {want}");
                let _ = writeln!(msg, "    got:      {have}");
                let _ = write!(msg, "  reread: {}", reread(step, &format!("{} {key} {event}", pw.label)));
            } else if want.starts_with("  IBV_QP_") || have.starts_with("  IBV_QP_") {
                // Lines before i are equal: the event line both blocks start at is the same.
                let start = (0..i).rev().find(|&j| !e[j].starts_with(' ')).unwrap_or(0);
                let (ebits, gbits) = (mask_bits(&e, start), mask_bits(&g, start));
                let missing: Vec<&String> = ebits.iter().filter(|b| !gbits.contains(b)).collect();
                let extra: Vec<&String> = gbits.iter().filter(|b| !ebits.contains(b)).collect();
                let mut parts = Vec::new();
                if !missing.is_empty() {
                    parts.push(format!(
                        "the mask lacks {}",
                        missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                    ));
                }
                if !extra.is_empty() {
                    parts.push(format!(
                        "the mask has {} too, which the reference does not set",
                        extra.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                    ));
                }
                if parts.is_empty() {
                    parts.push("the same mask bits, in another order".into());
                }
                let _ = writeln!(msg, "in {event}: {}", parts.join("; "));
                let _ = writeln!(msg, "    expected mask: {}", ebits.join(" | "));
                let _ = writeln!(msg, "    got mask:      {}", gbits.join(" | "));
                let _ = write!(msg, "  reread: {}", reread(step, &format!("mask {event}")));
            } else {
                let _ = writeln!(msg, "expected {} here, got {}", pw.label, ph.label);
                let _ = writeln!(msg, "    expected: {want}");
                let _ = writeln!(msg, "    got:      {have}");
                let _ = write!(msg, "  reread: {}", reread(step, &format!("{} {}", pw.label, event)));
            }
        }
        (None, None) => unreachable!(),
    }
    if let Some(n) = note {
        let _ = write!(msg, "\n  {}", n.text);
    }
    Some(msg)
}

/// The part of a failed program's stderr worth showing: a `todo!()` left in, or the error.
fn why_it_failed(ran: &Ran, step: &Exercise, source: &str) -> Option<String> {
    let stage_file = format!("src/stages/{}.rs", step.stage);
    if let Some(at) = ran.stderr.find("panicked at ") {
        let rest = &ran.stderr[at + "panicked at ".len()..];
        let (place, message) = rest.split_once(":\n").unwrap_or((rest, ""));
        let message = message.lines().next().unwrap_or("");
        let place = match place.rsplit_once(&stage_file) {
            Some((_, line_col)) => format!("{source}{line_col}"),
            None => place.to_string(),
        };
        if let Some(hint) = message.strip_prefix("not yet implemented: ") {
            return Some(format!("a hole is still empty, at {place}:\n    todo!(\"{hint}\")"));
        }
        return Some(format!("{} panicked at {place}: {message}", ran.what));
    }
    match ran.status {
        None => Some(format!(
            "{} did not finish within {} s and was stopped{}",
            ran.what,
            DEADLINE.as_secs(),
            if ran.stderr.trim().is_empty() { String::new() } else { format!("; it said:\n{}", indent(&ran.stderr)) }
        )),
        Some(0) if ran.stderr.trim().is_empty() => None,
        Some(code) => Some(format!("{} exited with status {code}; it said:\n{}", ran.what, indent(&ran.stderr))),
    }
}

fn indent(text: &str) -> String {
    text.trim_end().lines().map(|l| format!("    {l}\n")).collect::<String>().trim_end().to_string()
}

/// The reference's runs of one step, made once and compared with every program graded
/// against it: once a check for `lab/check`, once a class for `cargo xtask grade` (whose
/// files are graded several at a time: each run is made once, whoever asks first).
pub(crate) struct ReferenceRuns {
    step: Exercise,
    reference: String,
    runs: Vec<OnceLock<RunResult>>,
}

impl ReferenceRuns {
    /// The runs of step `nn`, `reference` its binary; none is made before it is needed.
    pub(crate) fn new(nn: &str, reference: &str) -> Result<Self, String> {
        let step = step(nn)?;
        let runs = runs(&step).iter().map(|_| OnceLock::new()).collect();
        Ok(ReferenceRuns { step, reference: reference.to_string(), runs })
    }

    /// Makes every run now (a class's grader bounds the students' runs by these); the
    /// slowest one's time.
    pub(crate) fn run_all(&self) -> Duration {
        (0..self.runs.len())
            .map(|n| {
                let t = Instant::now();
                self.run(n);
                t.elapsed()
            })
            .max()
            .unwrap_or_default()
    }

    /// Run `n`, made the first time it is asked for.
    fn run(&self, n: usize) -> &RunResult {
        self.runs[n].get_or_init(|| {
            let (extra, side) = runs(&self.step).swap_remove(n);
            run_once(&self.step, &self.reference, &[], &self.reference, &extra, side)
        })
    }
}

/// Grades one step, `program` run under the words `under` (see [`run_once`]): Ok(summary)
/// when every run matches the reference's, Err(report) at the first difference. With `student`, their variant of the step (if it has one) is applied to
/// the reference's trace: their program must print its values in their fields.
pub(crate) fn grade(
    refs: &ReferenceRuns,
    program: &str,
    under: &[String],
    source: &str,
    student: Option<&str>,
) -> Result<String, String> {
    let step = &refs.step.clone();
    let variant = student.and_then(|name| Variant::of(name, &step.nn));
    let theirs = variant.as_ref().map_or(String::new(), |v| format!(" with your variant ({})", v.id()));
    let c_peer = step.partner == Some(Partner::C);
    let runs = runs(step);
    let mut lines = 0;
    // Run by run, the student's program and then the reference: the first difference ends
    // the check, so a step that fails in its first run does not wait through the others.
    for (n, (extra, side)) in runs.iter().enumerate() {
        let t = &run_once(step, program, under, &refs.reference, extra, *side);
        let r = refs.run(n);
        let run = format!("run {} of {} ({}{})", n + 1, runs.len(), "your step ", t.label);
        if let Some(why) = why_it_failed(&r.ours, step, "src/stages/")
            .or_else(|| r.peer.as_ref().and_then(|p| if step.c_outlasts { None } else { why_it_failed(p, step, "") }))
        {
            return Err(format!(
                "the REFERENCE failed in {run}: the device or the lab is broken, not your code\n  {why}"
            ));
        }
        let (rt, rp) = redacted(r, c_peer, step.cm);
        let (rt, notes) = match &variant {
            Some(v) => v.expected(&rt),
            None => (rt, Vec::new()),
        };
        let (tt, tp) = redacted(t, c_peer, step.cm);
        let failed = why_it_failed(&t.ours, step, source);
        if let Some(diff) = first_difference(step, &rt, &tt, &notes) {
            let mut report = format!("{run}: your trace differs from the reference's{theirs}\n  {diff}");
            if let Some(why) = failed {
                report = format!("{run}: {why}\n  first difference from the reference's trace: {diff}");
            }
            return Err(report);
        }
        if let Some(why) = failed {
            return Err(format!("{run}: same trace as the reference, but {why}"));
        }
        let peer_checked = !step.c_outlasts;
        if let (Some(rp), Some(tp), true) = (&rp, &tp, peer_checked) {
            let peer = t.peer.as_ref().unwrap();
            if let Some(why) = why_it_failed(peer, step, "") {
                return Err(format!("{run}: your trace matches, but the peer failed: {why}"));
            }
            if let Some(diff) = first_difference(step, rp, tp, &[]) {
                return Err(format!(
                    "{run}: your trace matches, but the peer ({}) saw something else than with the reference:\n  {diff}",
                    peer.what
                ));
            }
        }
        lines += rt.lines().count();
    }
    Ok(format!("{} runs, {lines} trace lines, all as the reference's{theirs}", runs.len()))
}

pub(super) fn grade_cmd(cases: &[String], results: Option<&Path>, student: Option<&str>) -> ExitCode {
    common::require_device();
    let reference_dir = match super::reference_dir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("exercise: {e}");
            return ExitCode::from(2);
        }
    };
    let mut failed = 0;
    for case in cases.chunks(3) {
        let (nn, program, source) = (&case[0], &case[1], &case[2]);
        let step = match step(nn) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("exercise: {e}");
                return ExitCode::from(2);
            }
        };
        let reference = reference_dir.join(&step.bin);
        let refs = match ReferenceRuns::new(nn, &reference.to_string_lossy()) {
            Ok(refs) => refs,
            Err(e) => {
                eprintln!("exercise: {e}");
                return ExitCode::from(2);
            }
        };
        let dev = common::device();
        println!("== check {} ({source}) on {} port {} GID index {}", step.nn, dev.name, dev.port, dev.gid_index);
        if let Some(v) = student.and_then(|name| Variant::of(name, &step.nn)) {
            println!("   {}'s variant: {}", v.name, v.id());
        }
        let start = Instant::now();
        let verdict = grade(&refs, program, &[], source, student);
        let seconds = start.elapsed().as_secs_f64();
        match &verdict {
            Ok(summary) => println!("PASS {}: {summary} ({seconds:.1} s)", step.nn),
            Err(report) => {
                failed += 1;
                println!("FAIL {}: {report}", step.nn);
            }
        }
        if let Some(file) = results {
            if let Err(e) = append_result(file, &step.nn, &verdict, seconds) {
                eprintln!("exercise: cannot write the verdict to {}: {e}", file.display());
                return ExitCode::from(2);
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
