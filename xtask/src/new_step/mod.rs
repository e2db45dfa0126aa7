//! `cargo xtask new-step NN_name alone|pair|cm [--base NN]`: adds a step, everything
//! `steps/list.txt` implies, as a skeleton to fill in; `cargo xtask new-step --remove
//! NN_name` takes it all out again. CONTRIBUTING.md walks through it.
//!
//! The new step is its base's file (`--base`, else the last listed step with the same
//! roles) with one more stage called at the end of the base's new lines: a stage module
//! whose `stage` anchor holds one hole and no verb yet. So until the stage does something,
//! the step prints exactly what its base prints, and its snapshots and the book's outputs
//! start as copies of the base's — true, not invented; `lab/test` re-records them once the
//! stage prints its verbs. What it writes (each text a function of `texts`):
//!
//! - `steps/list.txt`: its line; Cargo.toml: its `[[bin]]`;
//! - `steps/NN_name.rs`, `src/stages/name.rs` (and `pub mod name;` in `src/stages/mod.rs`),
//!   its row in `src/lib.rs`'s step table;
//! - the chapter `book/src/NN_name.md` (the book's template) and its SUMMARY.md line; its
//!   answers page in the instructor's guide and that SUMMARY.md's line;
//! - the snapshots and outputs copied from the base's; the tests the list implies
//!   (`tests/device/steps.rs`'s `step_NN_name`, and the step in `break_it.rs`'s test of
//!   steps without cases), then `cargo xtask book`'s generated files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use testkit::{Roles, Step};

mod texts;

use texts::{
    answers_page, base_verbs, bin_block, c_includes, chapter, exe, lib_row, list_line, run_names, snapshot_test,
    stage_file, step_file,
};

/// The new step, its base and the project it goes into.
struct New {
    root: PathBuf,
    bin: String,
    roles: Roles,
    base: Step,
    /// The list's last step before this one (`base=` is written only when the base
    /// is another).
    previous: Step,
}

impl New {
    fn nn(&self) -> &str {
        &self.bin[..2]
    }

    fn stage(&self) -> &str {
        &self.bin[3..]
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `text` with `line` inserted after the last line that `after` accepts.
fn insert_after(text: &str, after: impl Fn(&str) -> bool, line: &str, what: &str) -> Result<String, String> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().rposition(|l| after(l)).ok_or_else(|| format!("{what}: nowhere to add `{line}`"))?;
    let mut out: Vec<&str> = lines[..=at].to_vec();
    out.push(line);
    out.extend(&lines[at + 1..]);
    Ok(out.join("\n") + "\n")
}

/// `text` without the lines `gone` accepts.
fn without_lines(text: &str, gone: impl Fn(&str) -> bool) -> String {
    text.lines().filter(|l| !gone(l)).map(|l| format!("{l}\n")).collect()
}

/// Checks the command line against the list: the next number, a free name, a base of the
/// same roles.
fn plan(root: &Path, steps: &[Step], bin: &str, roles: &str, base: Option<&str>) -> Result<New, String> {
    let roles = Roles::parse(roles).ok_or_else(|| format!("`{roles}`: the roles are alone, pair or cm"))?;
    let nn = format!("{:02}", steps.len() + 1);
    let named = bin.len() > 3
        && bin.starts_with(&format!("{nn}_"))
        && bin[3..].bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !named {
        return Err(format!("`{bin}`: the next step is {nn}_name, with name in [a-z0-9_] (its stage module)"));
    }
    if steps.iter().any(|s| s.stage() == &bin[3..]) {
        return Err(format!("a step's stage is already called {}", &bin[3..]));
    }
    let base = match base {
        Some(b) => {
            let b = if b.len() == 1 { format!("0{b}") } else { b.to_string() };
            steps.iter().find(|s| s.nn() == b || s.bin == b).ok_or_else(|| format!("--base {b}: no such step"))?
        }
        None => steps
            .iter()
            .rev()
            .find(|s| s.roles == roles)
            .ok_or_else(|| format!("no step runs as {} yet: give --base", roles.word()))?,
    };
    if base.roles != roles {
        return Err(format!("--base {}: it runs as {}, not {}", base.bin, base.roles.word(), roles.word()));
    }
    let previous = steps.last().expect("steps/list.txt lists a step").clone();
    Ok(New { root: root.to_path_buf(), bin: bin.to_string(), roles, base: base.clone(), previous })
}

/// Adds the step: every file and line `steps/list.txt` implies.
fn add(new: &New) -> Result<(), String> {
    let (bin, stage) = (new.bin.as_str(), new.stage());
    let p = |rel: &str| new.path(rel);
    for rel in [format!("steps/{bin}.rs"), format!("src/stages/{stage}.rs"), format!("book/src/{bin}.md")] {
        if p(&rel).exists() {
            return Err(format!("{rel} exists already"));
        }
    }
    write(&p("steps/list.txt"), &(read(&p("steps/list.txt"))? + &list_line(new) + "\n"))?;
    let manifest = read(&p("Cargo.toml"))?;
    let last = manifest.rfind("[[bin]]").ok_or("Cargo.toml has no [[bin]]")?;
    let end = last + manifest[last..].find("\n\n").ok_or("Cargo.toml: no blank line after the last [[bin]]")? + 2;
    write(&p("Cargo.toml"), &format!("{}{}\n{}", &manifest[..end], bin_block(bin), &manifest[end..]))?;

    write(&p(&format!("steps/{bin}.rs")), &step_file(new, &read(&p(&format!("steps/{}.rs", new.base.bin)))?)?)?;
    write(&p(&format!("src/stages/{stage}.rs")), &stage_file(new))?;
    let mods = read(&p("src/stages/mod.rs"))?;
    let mods = insert_after(
        &mods,
        |l| l.starts_with("pub mod ") && l < &*format!("pub mod {stage};"),
        &format!("pub mod {stage};"),
        "src/stages/mod.rs",
    )
    .or_else(|_| Ok::<_, String>(mods.replacen("pub mod ", &format!("pub mod {stage};\npub mod "), 1)))?;
    write(&p("src/stages/mod.rs"), &mods)?;
    let lib = read(&p("src/lib.rs"))?;
    let verbs = base_verbs(&lib, &new.base.bin)?;
    write(&p("src/lib.rs"), &insert_after(&lib, |l| l.starts_with("//! | `"), &lib_row(new, &verbs), "src/lib.rs")?)?;

    // A step's chapter: `- [NN …](NN_name.md)`.
    let numbered = |l: &str| {
        let file = l.trim_start().strip_prefix("- [").and_then(|l| l.split_once("](")).map_or("", |(_, f)| f);
        file.len() > 3 && file.as_bytes()[..2].iter().all(u8::is_ascii_digit) && file.as_bytes()[2] == b'_'
    };
    let summary = read(&p("book/src/SUMMARY.md"))?;
    let line = format!("- [{} TODO: the chapter's title]({bin}.md)", new.nn());
    write(&p("book/src/SUMMARY.md"), &insert_after(&summary, numbered, &line, "book/src/SUMMARY.md")?)?;
    write(&p(&format!("book/instructor/src/answers/{bin}.md")), &answers_page(new))?;
    let guide = read(&p("book/instructor/src/SUMMARY.md"))?;
    let line = format!("    - [{} TODO: the chapter's title](answers/{bin}.md)", new.nn());
    let answer = |l: &str| l.trim_start().starts_with("- [") && l.contains("](answers/") && !l.contains("index.md");
    write(
        &p("book/instructor/src/SUMMARY.md"),
        &insert_after(&guide, answer, &line, "book/instructor/src/SUMMARY.md")?,
    )?;

    for (from, to) in run_names(&new.base.bin, new.roles).iter().zip(run_names(bin, new.roles)) {
        for (dir, ext) in [("tests/snapshots", "snap"), ("book/src/output", "txt")] {
            let text = read(&p(&format!("{dir}/{from}.{ext}")))?;
            write(&p(&format!("{dir}/{to}.{ext}")), &text)?;
        }
    }
    let steps_rs = read(&p("tests/device/steps.rs"))?;
    write(&p("tests/device/steps.rs"), &(steps_rs + &snapshot_test(new)))?;
    let break_it = read(&p("tests/device/break_it.rs"))?;
    let list_start =
        break_it.find("fn steps_without_cases_say_so()").ok_or("break_it.rs: no steps_without_cases_say_so")?;
    let close = list_start + break_it[list_start..].find(']').ok_or("break_it.rs: its list of steps has no end")?;
    let break_it =
        format!("{}, {}{}", break_it[..close].trim_end().trim_end_matches(','), exe(bin), &break_it[close..]);
    write(&p("tests/device/break_it.rs"), &break_it)?;
    tidy(new)?;
    let added: Vec<String> = run_names(bin, new.roles)
        .into_iter()
        .map(|n| format!("{n}.txt"))
        .filter(|n| p(&format!("book/src/added/{n}")).exists())
        .collect();
    write(&p(&format!("book/src/{bin}.md")), &chapter(new, &c_includes(&new.root, &verbs)?, &added))
}

/// Removes the step `bin`: every file and line [`add`] wrote.
fn remove(root: &Path, steps: &[Step], bin: &str) -> Result<(), String> {
    let step = steps.iter().find(|s| s.bin == bin).ok_or_else(|| format!("steps/list.txt lists no {bin}"))?;
    if steps.last() != Some(step) {
        return Err(format!("{bin} is not the last step: removing it would leave a gap in the numbers"));
    }
    let new = New {
        root: root.to_path_buf(),
        bin: bin.into(),
        roles: step.roles,
        base: step.clone(),
        previous: step.clone(),
    };
    let (stage, p) = (new.stage().to_string(), |rel: &str| root.join(rel));
    let list = read(&p("steps/list.txt"))?;
    write(&p("steps/list.txt"), &without_lines(&list, |l| l.split_whitespace().next() == Some(bin)))?;
    let manifest = read(&p("Cargo.toml"))?;
    write(&p("Cargo.toml"), &manifest.replace(&format!("{}\n", bin_block(bin)), ""))?;
    let mut files = vec![
        format!("steps/{bin}.rs"),
        format!("src/stages/{stage}.rs"),
        format!("book/src/{bin}.md"),
        format!("book/instructor/src/answers/{bin}.md"),
    ];
    for name in run_names(bin, step.roles) {
        files.extend([
            format!("tests/snapshots/{name}.snap"),
            format!("book/src/output/{name}.txt"),
            format!("book/src/added/{name}.txt"),
        ]);
    }
    for rel in files {
        if p(&rel).exists() {
            std::fs::remove_file(p(&rel)).map_err(|e| format!("{rel}: {e}"))?;
        }
    }
    // Each file's one line of the step.
    let edits = [
        ("src/stages/mod.rs", format!("pub mod {stage};")),
        ("src/lib.rs", format!("//! | `{bin}`")),
        ("book/src/SUMMARY.md", format!("]({bin}.md)")),
        ("book/instructor/src/SUMMARY.md", format!("](answers/{bin}.md)")),
    ];
    for (rel, line) in edits {
        write(&p(rel), &without_lines(&read(&p(rel))?, |l| l.contains(&line)))?;
    }
    let steps_rs = read(&p("tests/device/steps.rs"))?;
    write(&p("tests/device/steps.rs"), &steps_rs.replace(&snapshot_test(&new), ""))?;
    let break_it = read(&p("tests/device/break_it.rs"))?;
    let break_it = break_it.replacen(&format!(", {}", exe(bin)), "", 1).replacen(&format!("{},", exe(bin)), "", 1);
    write(&p("tests/device/break_it.rs"), &break_it)?;
    tidy(&new)
}

/// rustfmt over the Rust files the command edits, then the book's generated files.
fn tidy(new: &New) -> Result<(), String> {
    let status = std::process::Command::new("cargo")
        .args(["fmt", "--all"])
        .current_dir(&new.root)
        .status()
        .map_err(|e| format!("cargo fmt: {e}"))?;
    if !status.success() {
        return Err("cargo fmt failed".into());
    }
    // The book's generated parts are made from the list this command just changed.
    for part in crate::book::all(&new.root)? {
        part.write(&new.root)?;
    }
    Ok(())
}

/// What `cargo xtask new-step` is asked (the front door parses it).
pub enum Request<'a> {
    /// Add step `bin`, running as `roles` (steps/list.txt's word), built on `base`.
    Add { bin: &'a str, roles: &'a str, base: Option<&'a str> },
    /// Remove step `bin`.
    Remove(&'a str),
}

/// `new-step NN_name ROLES [--base NN]` or `new-step --remove NN_name`.
pub fn main(request: &Request) -> ExitCode {
    let root = testkit::root();
    let steps = testkit::steps();
    let result = match *request {
        Request::Remove(bin) => remove(&root, &steps, bin).map(|()| format!("removed step {bin}")),
        Request::Add { bin, roles, base } => {
            plan(&root, &steps, bin, roles, base).and_then(|n| add(&n).map(|()| done(&n)))
        }
    };
    match result {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask new-step: {e}");
            ExitCode::from(2)
        }
    }
}

fn done(new: &New) -> String {
    format!(
        "added step {} (built on {}): grep -rn TODO for what is yours to write; CONTRIBUTING.md says what next",
        new.bin, new.base.bin
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(bin: &str, roles: &str, base: Option<&str>) -> Result<New, String> {
        plan(&testkit::root(), &testkit::steps(), bin, roles, base)
    }

    #[test]
    fn a_new_step_is_the_next_number_and_builds_on_a_step_that_runs_alike() {
        let next = format!("{:02}", testkit::steps().len() + 1);
        let new = planned(&format!("{next}_probe"), "alone", None).unwrap();
        assert_eq!((new.base.roles, new.stage()), (Roles::Alone, "probe"));
        assert!(list_line(&new).starts_with(&format!("{next}_probe          alone")), "{}", list_line(&new));
        assert!(planned("99_example", "alone", None).err().unwrap().contains("the next step is"));
        assert!(planned(&format!("{next}_reg_mr"), "alone", None).err().unwrap().contains("already called reg_mr"));
        assert!(planned(&format!("{next}_x"), "pair", Some("01")).err().unwrap().contains("runs as alone, not pair"));
        assert!(planned(&format!("{next}_x"), "ud", None).err().unwrap().contains("alone, pair or cm"));
    }

    #[test]
    fn the_step_file_is_its_base_s_with_the_new_stage_marked_new() {
        let next = format!("{:02}", testkit::steps().len() + 1);
        let new = planned(&format!("{next}_probe"), "alone", Some("03")).unwrap();
        let base = "//! Step 03: register.\n//!\n//! New: stage 03, [`x`].\n\nuse rdma_dissect::a;\n\
                    const CASES: &[Case<Args>] = &breakit::reg_mr::CASES;\nconst ABOUT: &str = \"Step 03\";\n\
                    fn main() {\n    // ANCHOR: new\n    reg_mr()?;\n    // ANCHOR_END: new\n    Ok(())\n}\n";
        let text = step_file(&new, base).unwrap();
        assert!(text.starts_with(&format!("//! Step {next}: probe. TODO")), "{text}");
        assert!(text.contains("use rdma_dissect::a;\nuse rdma_dissect::stages::probe::probe;\n"), "{text}");
        assert!(text.contains("const CASES: &[Case<Args>] = &[];\n"), "{text}");
        let end = "    reg_mr()?;\n    // ANCHOR: new\n    probe()?;\n    // ANCHOR_END: new\n    Ok(())";
        assert!(text.contains(end), "{text}");
        assert_eq!(text.matches("ANCHOR: new").count(), 1, "{text}");
    }

    #[test]
    fn lines_go_after_the_last_of_their_kind_and_come_out_again() {
        let text = "a1\nb\na2\nc\n";
        let added = insert_after(text, |l| l.starts_with('a'), "a3", "t").unwrap();
        assert_eq!(added, "a1\nb\na2\na3\nc\n");
        assert_eq!(without_lines(&added, |l| l == "a3"), text);
        assert!(insert_after(text, |l| l.starts_with('z'), "z", "t").is_err());
    }
}
