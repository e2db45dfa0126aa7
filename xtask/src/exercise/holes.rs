//! The exercise: the stage with its holes.

use std::path::Path;

use super::variant::{self, Variant};
use super::{root, step, Exercise};

/// One hole of a stage.
#[derive(Clone)]
struct Hole {
    name: String,
    /// The binding's type, for a `let` hole (`HOLE(T)`).
    ty: Option<String>,
    hint: String,
    /// The answer: the lines between the markers.
    lines: Vec<String>,
    /// 1-based line of the first answer line in the stage file.
    line: usize,
}

enum Piece {
    Line(String),
    Hole(Hole),
}

/// Splits a stage's source into plain lines and holes.
fn parse(src: &str, file: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut lines = src.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("// ANCHOR: hole_") else {
            pieces.push(Piece::Line(line.to_string()));
            continue;
        };
        let (name, marker) = rest.split_once(' ').unwrap_or((rest, ""));
        let name = format!("hole_{name}");
        let (ty, hint) = if let Some(m) = marker.strip_prefix("HOLE(") {
            let (ty, hint) =
                m.split_once("): ").ok_or_else(|| format!("{file}:{}: `HOLE(TYPE): hint` expected", i + 1))?;
            (Some(ty.to_string()), hint)
        } else {
            let hint = marker
                .strip_prefix("HOLE: ")
                .ok_or_else(|| format!("{file}:{}: `// ANCHOR: {name} HOLE: hint` expected", i + 1))?;
            (None, hint)
        };
        let end = format!("// ANCHOR_END: {name}");
        let mut body = Vec::new();
        loop {
            match lines.next() {
                Some((_, l)) if l.trim() == end => break,
                Some((_, l)) if l.contains("ANCHOR") => {
                    return Err(format!("{file}: an anchor line inside {name}: holes do not nest"))
                }
                Some((_, l)) => body.push(l.to_string()),
                None => return Err(format!("{file}: {name} has no `{end}`")),
            }
        }
        if body.iter().all(|l| l.trim().is_empty()) {
            return Err(format!("{file}: {name} is empty"));
        }
        pieces.push(Piece::Hole(Hole { name, ty, hint: hint.to_string(), lines: body, line: i + 2 }));
    }
    Ok(pieces)
}

/// The stage file of `step`, its path relative to the project, and its holes.
fn stage_source(step: &Exercise) -> Result<(String, String), String> {
    let rel = format!("src/stages/{}.rs", step.stage);
    let path = root()?.join(&rel);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((rel, text))
}

/// A string literal's body: `todo!` takes a format string, so braces are doubled too.
fn literal(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('{', "{{").replace('}', "}}")
}

/// What compiles in place of `hole`: see the module doc.
fn fill(hole: &Hole, file: &str) -> Result<Vec<String>, String> {
    let first = &hole.lines[0];
    let indent = &first[..first.len() - first.trim_start().len()];
    let first = first.trim();
    let last = hole.lines.last().unwrap().trim_end();
    let todo = format!("todo!(\"{}\")", literal(&hole.hint));
    if first.starts_with('|') {
        return Ok(vec![format!("{indent}// TODO({}): {}", hole.name, hole.hint)]);
    }
    if let Some(rest) = first.strip_prefix("let ") {
        let (pat, _) =
            rest.split_once(" = ").ok_or_else(|| format!("{file}: {}: `let PAT = …` expected", hole.name))?;
        let ty = hole.ty.as_ref().ok_or_else(|| {
            format!("{file}: {} is a `let`: its marker must name the type, `HOLE(TYPE): hint`", hole.name)
        })?;
        return Ok(vec![format!("{indent}let {pat}: {ty} = {todo};")]);
    }
    let field = first
        .split_once(": ")
        .filter(|(name, _)| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    if let (Some((name, _)), true) = (field, last.ends_with(',')) {
        return Ok(vec![format!("{indent}{name}: {todo},")]);
    }
    if last.ends_with(';') || last.ends_with('}') {
        return Ok(vec![format!("{indent}{todo};")]);
    }
    Ok(vec![format!("{indent}{todo}")])
}

/// The copy of step `nn`'s stage every student starts from, whoever they are: its code is
/// the same for all (a variant is a comment of its header: `exercise generate --as NAME`).
pub(crate) fn exercise_text(nn: &str) -> Result<String, String> {
    generate(&step(nn)?, None)
}

/// The student's copy of `step`'s stage; `name`'s, with their variant, when there is one.
/// A hole whose value a variant sets has the variant's hint, with or without a name.
fn generate(step: &Exercise, name: Option<&str>) -> Result<String, String> {
    let (rel, text) = stage_source(step)?;
    let pieces = parse(&text, &rel)?;
    let holes = pieces.iter().filter(|p| matches!(p, Piece::Hole(_))).count();
    if holes == 0 {
        return Err(format!("{rel} has no holes (// ANCHOR: hole_… HOLE: …)"));
    }
    let mut out = Vec::new();
    let mut header_done = false;
    for piece in &pieces {
        match piece {
            Piece::Line(l) => {
                if !header_done && !l.starts_with("//!") {
                    header_done = true;
                    out.push(String::new());
                    out.push(format!(
                        "// EXERCISE {}: this is {rel} with {holes} pieces taken out. Fill in every todo!() —",
                        step.nn
                    ));
                    out.push(
                        "// its message says what belongs there — and the `// TODO(hole_…)` lines, then run".into(),
                    );
                    out.push(format!(
                        "// `lab/check {}`: it builds the crate with this file in place of {rel}",
                        step.nn
                    ));
                    out.push(format!(
                        "// and runs step {} on the RDMA device next to the reference. `lab/exercise {} --reset`",
                        step.bin, step.nn
                    ));
                    out.push("// starts over. The chapter of the book explains every line.".into());
                    if let Some(v) = name.and_then(|n| Variant::of(n, &step.nn)) {
                        out.push("//".into());
                        out.extend(v.header());
                    }
                    out.push(
                        "#![allow(unreachable_code, unused_variables, unused_mut, unused_imports, dead_code)]".into(),
                    );
                }
                out.push(l.clone());
            }
            Piece::Hole(h) => match variant::hint(&step.nn, &h.name) {
                Some(hint) => out.extend(fill(&Hole { hint: hint.to_string(), ..h.clone() }, &rel)?),
                None => out.extend(fill(h, &rel)?),
            },
        }
    }
    Ok(out.join("\n") + "\n")
}

pub(super) fn generate_cmd(nn: &str, out: &Path, name: Option<&str>) -> Result<(), String> {
    let text = generate(&step(nn)?, name)?;
    std::fs::write(out, text).map_err(|e| format!("{}: {e}", out.display()))
}

pub(super) fn holes_cmd(nn: &str) -> Result<(), String> {
    let step = step(nn)?;
    let (rel, text) = stage_source(&step)?;
    for piece in parse(&text, &rel)? {
        if let Piece::Hole(h) = piece {
            println!("{}\t{rel}:{}\t{}", h.name, h.line, h.hint);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exercise says whose variant it is and its values; the holes those values fill
    /// say "your variant's", with or without a name, so every student's code is the same.
    #[test]
    fn the_exercise_says_its_variant() {
        let step = step("05").unwrap();
        let ada = generate(&step, Some("ada")).unwrap();
        let everyone = generate(&step, None).unwrap();
        let header = Variant::of("ada", "05").unwrap().header();
        assert!(header.iter().all(|l| ada.contains(l.as_str())), "{ada}");
        assert!(!everyone.contains("YOUR VARIANT"));
        for text in [&ada, &everyone] {
            assert!(text.contains("min_rnr_timer: todo!(\"the RNR timer code the peer waits before retrying a SEND that found no receive: your variant's"));
            assert!(!text.contains("rc_pingpong: 0.64 ms"), "the reference's hint is gone");
        }
        let code = |t: &str| t.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        assert_eq!(code(&ada), code(&everyone), "a variant is a comment of the exercise");
        // A step without a variant: no header, the stage's hints.
        let none = generate(&super::super::step("07").unwrap(), Some("ada")).unwrap();
        assert!(!none.contains("YOUR VARIANT"));
    }
}
