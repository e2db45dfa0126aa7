//! The steps are one ordered list, `steps/list.txt`, and everything hangs off it: each step
//! has its `[[bin]]`, its `steps/` file with `// ANCHOR: new`, its stage module with
//! `// ANCHOR: stage` and a C reference, its chapter, its snapshot files and its tests.
//! The lists that cannot read the file (Cargo.toml, SUMMARY.md, the per-step tests that need `env!("CARGO_BIN_EXE_<bin>")`) are checked against it.
//! So is prose that counts the steps, or gives the range of them all.
//! Runs on any host.

use testkit as common;

use std::fs;
use std::path::{Path, PathBuf};

use common::steps;

/// What every "missing" message ends with: the command that writes what a step needs.
const ADD: &str = "(`cargo xtask new-step NN_name alone|pair|cm` adds a step with all of it; see CONTRIBUTING.md)";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: impl AsRef<Path>) -> String {
    let path = root().join(path);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `ANCHOR: x` has an `ANCHOR_END: x` after it, and the region holds some code.
fn assert_anchor(file: &str, text: &str, name: &str) {
    let start = format!("// ANCHOR: {name}\n");
    let end = format!("// ANCHOR_END: {name}\n");
    let s = text.find(&start).unwrap_or_else(|| panic!("{file}: no `// ANCHOR: {name}`"));
    let e = text.find(&end).unwrap_or_else(|| panic!("{file}: no `// ANCHOR_END: {name}`"));
    assert!(s < e, "{file}: ANCHOR_END: {name} before its ANCHOR");
    let body = &text[s + start.len()..e];
    assert!(body.lines().any(|l| !l.trim().is_empty() && !l.contains("ANCHOR")), "{file}: anchor {name} is empty");
}

#[test]
fn every_step_has_its_bin_file_stage_and_snapshots() {
    let manifest = read("Cargo.toml");
    let stages_mod = read("src/stages/mod.rs");
    for (n, s) in steps().iter().enumerate() {
        let (bin, module) = (&s.bin, s.stage());
        let step = format!("steps/{bin}.rs");
        assert!(
            manifest.contains(&format!("name = \"{bin}\"\npath = \"{step}\"")),
            "Cargo.toml has no [[bin]] {bin} at {step} {ADD}"
        );
        let step_text = read(&step);
        assert_anchor(&step, &step_text, "new");
        assert!(step_text.contains(&format!("stages::{module}")), "{step} does not use stage {module}");

        let stage = format!("src/stages/{module}.rs");
        let stage_text = read(&stage);
        assert_anchor(&stage, &stage_text, "stage");
        assert!(
            stage_text.starts_with(&format!("//! Stage {:02}:", n + 1)),
            "{stage}: doc must start `//! Stage {:02}:`",
            n + 1
        );
        assert!(stage_text.contains("C reference:"), "{stage}: doc must name its rc_pingpong.c counterpart");
        assert!(stages_mod.contains(&format!("pub mod {module};")), "src/stages/mod.rs lacks {module} {ADD}");

        let snaps: Vec<String> = if !s.pair {
            vec![format!("steps__{bin}.snap")]
        } else {
            vec![format!("steps__{bin}-server.snap"), format!("steps__{bin}-client.snap")]
        };
        for snap in snaps {
            assert!(root().join("tests/snapshots").join(&snap).is_file(), "missing tests/snapshots/{snap} {ADD}");
        }
    }
}

/// `steps/list.txt` is the one list of steps. What cannot read it says the same, in the same
/// order: Cargo.toml's `[[bin]]`s, the files in steps/ and SUMMARY.md's chapters. (The
/// exercise kit, xtask/src/exercise/, reads the list through testkit.)
#[test]
fn the_step_list_is_the_bins_the_step_files_and_the_chapters() {
    let steps = steps();
    let list: Vec<String> = steps.iter().map(|s| s.bin.clone()).collect();
    for (n, bin) in list.iter().enumerate() {
        let nn = format!("{:02}", n + 1);
        assert!(
            bin.starts_with(&format!("{nn}_")),
            "steps/list.txt: step {nn} is `{bin}`: the steps are numbered in order"
        );
        assert!(
            bin.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "steps/list.txt: `{bin}`: a bin name is [a-z0-9_] (the lab scripts loop over them)"
        );
    }

    // Every [[bin]] is a step, at steps/<bin>.rs, in the list's order.
    let mut bins: Vec<(String, String)> = Vec::new();
    let mut in_bin = false;
    for line in read("Cargo.toml").lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
            if in_bin {
                bins.push(Default::default());
            }
        } else if let (true, Some((key, value))) = (in_bin, line.split_once('=')) {
            let value = value.trim().trim_matches('"').to_string();
            let bin = bins.last_mut().unwrap();
            match key.trim() {
                "name" => bin.0 = value,
                "path" => bin.1 = value,
                _ => {}
            }
        }
    }
    let want: Vec<(String, String)> = list.iter().map(|b| (b.clone(), format!("steps/{b}.rs"))).collect();
    assert_eq!(bins, want, "Cargo.toml's [[bin]]s (name, path) are not steps/list.txt's steps, in order {ADD}");

    let mut files: Vec<String> = fs::read_dir(root().join("steps"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".rs").map(str::to_string))
        .collect();
    files.sort();
    assert_eq!(files, list, "steps/*.rs are not steps/list.txt's steps {ADD}");

    // The numbered chapters, `- [...](NN_name.md)`.
    let chapters: Vec<String> = read("book/src/SUMMARY.md")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- [")?.split_once("](")?.1.strip_suffix(".md)").map(str::to_string))
        .filter(|c| c.len() > 3 && c.as_bytes()[..2].iter().all(u8::is_ascii_digit) && c.as_bytes()[2] == b'_')
        .collect();
    assert_eq!(chapters, list, "book/src/SUMMARY.md's step chapters are not steps/list.txt's steps, in order {ADD}");
}

/// A test that runs one step's binary names it with `env!("CARGO_BIN_EXE_<bin>")`, which
/// wants a literal, so these tests cannot loop over the list: each is checked against it.
/// tests/device/steps.rs has one test per step, `single`, `pair` or `cm` as its roles; tests/device/break_it.rs
/// one per step with `--break` cases (a module of `src/breakit/`), and lists it in the
/// `--break help` test. A step names its cases (`const CASES`) from that module, or has none
/// (`&[]`) and is then in the test of steps without cases.
/// The lab scripts read the list's first two columns with `lab_steps` (lab/common.sh):
/// the same steps, with the same roles, as testkit's parser.
#[test]
fn the_lab_scripts_read_the_list_as_testkit_does() {
    let script = ". lab/common.sh && lab_steps && \
                  for s in \"${LAB_STEPS[@]}\"; do r=alone; \
                  [[ \" ${LAB_STEPS_PAIR[*]} \" == *\" $s \"* ]] && r=pair; \
                  [[ \" ${LAB_STEPS_CM[*]} \" == *\" $s \"* ]] && r=cm; echo \"$s $r\"; done";
    let out = std::process::Command::new("bash").args(["-c", script]).current_dir(root()).output().unwrap();
    assert!(out.status.success(), "lab_steps: {}", String::from_utf8_lossy(&out.stderr));
    let bash = String::from_utf8(out.stdout).unwrap();
    let rust: String = steps().iter().map(|s| format!("{} {}\n", s.bin, s.roles.word())).collect();
    assert_eq!(bash, rust, "lab_steps (lab/common.sh) reads steps/list.txt otherwise than testkit's load_steps");
}

#[test]
fn every_step_has_its_snapshot_and_break_it_tests() {
    fn body<'a>(text: &'a str, name: &str) -> Option<&'a str> {
        let rest = &text[text.find(&format!("fn {name}() {{"))?..];
        Some(&rest[..rest.find("\n}\n").unwrap_or(rest.len())])
    }
    let snapshots = read("tests/device/steps.rs");
    let break_it = read("tests/device/break_it.rs");
    let break_mods = read("src/breakit/mod.rs");
    let help =
        body(&break_it, "break_help_lists_the_cases").expect("tests/device/break_it.rs: fn break_help_lists_the_cases");
    let no_cases =
        body(&break_it, "steps_without_cases_say_so").expect("tests/device/break_it.rs: fn steps_without_cases_say_so");
    for step in steps() {
        let (bin, stage) = (&step.bin, step.stage());
        let exe = format!("env!(\"CARGO_BIN_EXE_{bin}\")");
        let run = format!(
            "{}(\"{bin}\", {exe}",
            if step.cm {
                "cm"
            } else if step.pair {
                "pair"
            } else {
                "single"
            }
        );
        let test = body(&snapshots, &format!("step_{bin}"))
            .unwrap_or_else(|| panic!("tests/device/steps.rs has no fn step_{bin}() {ADD}"));
        assert!(test.contains(&run), "tests/device/steps.rs: step_{bin}() does not call {run})");

        let cases = format!("breakit::{stage}::CASES");
        let test = body(&break_it, &format!("break_{bin}"));
        let source = read(format!("steps/{bin}.rs"));
        if !break_mods.contains(&format!("pub mod {stage};")) {
            assert!(test.is_none(), "tests/device/break_it.rs: break_{bin}(), but src/breakit has no {stage}");
            assert!(
                source.contains("const CASES: &[Case<Args>] = &[];"),
                "steps/{bin}.rs: no src/breakit/{stage}.rs, so its CASES are &[]"
            );
            assert!(no_cases.contains(&exe), "tests/device/break_it.rs: steps_without_cases_say_so does not run {exe}");
            continue;
        }
        let named = format!("const CASES: &[Case<Args>] = &{cases};");
        assert!(source.contains(&named), "steps/{bin}.rs does not say {named}");
        let run = format!(
            "{}(\"{bin}\", {exe}, &{cases})",
            if step.cm {
                "cm"
            } else if step.pair {
                "pair"
            } else {
                "alone"
            }
        );
        let test = test.unwrap_or_else(|| panic!("tests/device/break_it.rs has no fn break_{bin}() for {cases}"));
        assert!(test.contains(&run), "tests/device/break_it.rs: break_{bin}() does not call {run}");
        let listed = format!("(\"{bin}\", {exe}, names(&{cases}))");
        assert!(help.contains(&listed), "tests/device/break_it.rs: break_help_lists_the_cases does not list {listed}");
    }
}

#[test]
fn steps_call_the_connection_stages_in_order() {
    // Stages 01-06 build the connection every later step needs: 01-05 each through one call
    // named after its module, and from 06 on stages 05 and 06 together through stage 06's
    // `connect` (their order inside the exchange is its lesson). 07-09 then use the
    // connection in their own ways (08 posts its receives through `prepare`, 09 replaces
    // the ping-pong).
    let steps = steps();
    for (n, step) in steps.iter().enumerate() {
        let bin = &step.bin;
        if step.cm {
            // The connection manager opens the device and connects the QP itself (step 10).
            continue;
        }
        let text = read(format!("steps/{bin}.rs"));
        let body = &text[text.find("fn main").expect("fn main")..];
        // A step that runs alone makes no connection: it calls stages 01–04 at most.
        let last = if step.pair { 4 } else { 3 };
        // Each stage's call, or the calls that may stand for it: a pair step connects
        // (`connect(`) rather than calling stages 05-06 one by one; 12 builds -q QPs on one
        // SRQ and connects them all, with stage 04's and 06's functions inside
        // (src/stages/srq_pingpong.rs), and so does a step built on it; 13 speaks perftest's
        // handshake, which connects after its key exchange, and calls 05 and 06 itself.
        let mut calls: Vec<Vec<String>> =
            steps[..=n.min(last)].iter().map(|s| vec![format!("{}(", s.stage())]).collect();
        if n >= 5 && step.pair {
            calls[4] = vec!["connect(".to_string(), "connect_srq(".to_string(), "modify_qp_rtr(".to_string()];
        }
        if step.pair && calls.len() > 3 {
            calls[3].push("create_srq_qps(".to_string());
        }
        let mut last = 0;
        for call in calls {
            let at = call.iter().filter_map(|c| body.find(c.as_str())).min();
            let at = at.unwrap_or_else(|| panic!("steps/{bin}.rs does not call {}", call.join(" or ")));
            assert!(at >= last, "steps/{bin}.rs calls {} out of order", call.join(" or "));
            last = at;
        }
    }
}

#[test]
fn the_leaves_import_nothing_of_the_crate() {
    // Layers point one way (steps → break-it → stages → verbs → (trace, error)): the trace
    // formats and the root error type explains, and neither knows any other module.
    for file in ["src/trace.rs", "src/error.rs"] {
        let text = read(root().join(file));
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(!code.contains("crate::"), "{file}:{}: a leaf module uses the crate: {line}", i + 1);
        }
    }
}

/// Prose went on counting nine steps and ten binaries, and the lab scripts' help took step
/// numbers up to 10, long after steps 11 and 12 came (issue 45): a count of the steps written
/// in words drifts when `cargo xtask new-step` adds one. This checks the two forms that
/// drifted, narrowly enough to have no false alarms, in every text file of the project (not
/// the build's output):
///
/// - a count right after "all", "the", "in" or "into", or before "numbered", that counts
///   steps, stages (one a step) or binaries, in words or digits from two up, must be the
///   list's length ("the first four steps", "over three stages", "the one steps 01–08 take
///   apart" do not count them all, and pass);
/// - a range of steps from 01 that reaches 10 or more must end at the last step (01–04 or
///   01–09 are real subsets; from 01 past 09 has only ever meant "every step"). Dates,
///   addresses and versions (a digit, `.`, `-`, `:` or `/` next to the range) are not ranges.
/// - so must a range from a later step (02 to 09) that reaches 10 or more: "every step run
///   as a server and a client" written as a range from 05 stopped at 10 in the code's docs
///   when 11 and 12 came (issue 46), and a range of the ladder diagrams' steps went stale as
///   well. Everywhere but the instructor's guide, which reports what was measured when (a
///   run of the pair test over the steps it had then).
///
/// Better still is no count at all: "every step", "the steps", "the steps run as a pair",
/// or the steps named one by one.
#[test]
fn prose_counts_the_steps_as_the_list_does() {
    let numbers: Vec<&str> =
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen \
         seventeen eighteen nineteen twenty"
            .split_whitespace()
            .collect();
    let number = |w: &str| w.parse::<usize>().ok().or_else(|| numbers.iter().position(|n| *n == w)).filter(|&n| n >= 2);
    let last = steps().len();
    let mut files = Vec::new();
    let mut dirs = vec![root()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            // Not the build's output, the books' built HTML, nor the students' exercises.
            let skip = ["target", ".git", "book/book", "book/instructor/book", "exercises"];
            if skip.iter().any(|s| path == root().join(s)) {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    let mut problems = Vec::new();
    for path in files {
        let Ok(text) = fs::read_to_string(&path) else { continue }; // not text
        let file = path.strip_prefix(root()).unwrap().display().to_string();
        let at = |i: usize| text[..i].lines().count().max(1);

        // Words, across line breaks and punctuation, with where each starts.
        let words: Vec<(usize, String)> = text
            .char_indices()
            .filter(|&(i, c)| c.is_alphanumeric() && !text[..i].chars().next_back().is_some_and(char::is_alphanumeric))
            .map(|(i, _)| (i, text[i..].chars().take_while(|c| c.is_alphanumeric()).collect::<String>().to_lowercase()))
            .collect();
        for k in 1..words.len().saturating_sub(2) {
            let (before, word, next, after) = (&words[k - 1].1, &words[k].1, &words[k + 1].1, &words[k + 2].1);
            let counted = ["steps", "stages", "binaries"];
            let numbered = next == "numbered" && (counted.contains(&after.as_str()) || after == "programs");
            let all = ["all", "the", "in", "into"].contains(&before.as_str()) && counted.contains(&next.as_str());
            if (numbered || all) && number(word).is_some_and(|n| n != last) {
                problems.push(format!("{file}:{}: \"{word} {next}\", but steps/list.txt has {last}", at(words[k].0)));
            }
        }

        let measured = file.starts_with("book/instructor/");
        for (i, _) in text.match_indices('0') {
            let first = text[i + 1..].chars().next().filter(|c| ('1'..='9').contains(c));
            if first.is_none() || (first != Some('1') && measured) {
                continue;
            }
            if text[..i].chars().next_back().is_some_and(|c| c.is_alphanumeric() || ".-–/:".contains(c)) {
                continue;
            }
            let rest = text[i + 2..].strip_prefix(' ').unwrap_or(&text[i + 2..]);
            let Some(rest) = ["..=", "..", "–", "—", "-", "to "].iter().find_map(|sep| rest.strip_prefix(sep))
            else {
                continue;
            };
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            let end: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let tail = &rest[end.len()..];
            let mut next = tail.chars();
            let glued =
                next.next().is_some_and(|c| ".-–:/".contains(c)) && next.next().is_some_and(|c| c.is_ascii_digit());
            if end.len() != 2 || glued {
                continue;
            }
            let end: usize = end.parse().unwrap();
            if end >= 10 && end != last {
                let from = &text[i..i + 2];
                problems.push(format!(
                    "{file}:{}: a range of steps from {from} to {end}, but the last is {last:02}",
                    at(i)
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "counts of the steps that do not follow steps/list.txt (write them without a count, e.g. \"every step\"):\n{}",
        problems.join("\n")
    );
}
