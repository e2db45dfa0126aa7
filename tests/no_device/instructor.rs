//! The instructor's guide (`book/instructor/`, its own mdBook) keeps up with the students'
//! book and the exercises' holes. Needs no device.
//!
//! - every numbered exercise of a chapter's "Exercises" section (`book/src/<step>.md`) has
//!   an `## Exercise N` answer in `book/instructor/src/answers/<step>.md`, and no answer is
//!   left for an exercise that is gone;
//! - every hole of the step's stage (`// ANCHOR: hole_…` in `src/stages/*.rs`) is quoted
//!   in that page by its anchor, so the graded exercise's answer is the code that runs;
//! - the number of holes the guide states (the answers' "Six holes.", the plan's
//!   "`lab/exercise 08` (6 holes") is the number of those anchors;
//! - the students' book links nowhere into the guide (it must hold no answers);
//! - `mdbook build book/instructor` succeeds without a warning.

use testkit as common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The steps, in order (`steps/list.txt`), with their stage file.
fn steps() -> Vec<(String, String)> {
    let bins: Vec<String> = common::steps().into_iter().map(|s| s.bin).collect();
    bins.into_iter()
        .map(|bin| {
            // The step's stage module is the one its chapter includes as `:stage`.
            let chapter = read(&root().join(format!("book/src/{bin}.md")));
            let stage = chapter
                .lines()
                .find_map(|l| {
                    let rest = l.split("src/stages/").nth(1)?;
                    let (file, anchor) = rest.split_once(".rs:")?;
                    anchor.starts_with("stage}}").then(|| file.to_string())
                })
                .unwrap_or_else(|| panic!("{bin}.md includes no src/stages/*.rs:stage"));
            (bin, stage)
        })
        .collect()
}

/// The numbers of the exercises in the "## Exercises" section of a chapter.
fn exercises(chapter: &str) -> Vec<u32> {
    let section = chapter.split("\n## Exercises\n").nth(1).expect("an ## Exercises section");
    let section = section.split("\n## ").next().unwrap();
    section.lines().filter_map(|l| l.split_once(". ").and_then(|(n, _)| n.parse().ok())).collect()
}

#[test]
fn every_exercise_has_an_answer_and_every_hole_is_quoted() {
    let mut problems = Vec::new();
    for (bin, stage) in steps() {
        let numbers = exercises(&read(&root().join(format!("book/src/{bin}.md"))));
        assert!(!numbers.is_empty(), "{bin}.md: no numbered exercise");
        assert_eq!(numbers, (1..=numbers.len() as u32).collect::<Vec<_>>(), "{bin}.md: exercises not numbered 1..n");
        let page_path = root().join(format!("book/instructor/src/answers/{bin}.md"));
        let page = read(&page_path);
        let answered: Vec<u32> =
            page.lines().filter_map(|l| l.strip_prefix("## Exercise ")?.trim().parse().ok()).collect();
        if answered != numbers {
            problems
                .push(format!("{}: answers {answered:?}, but {bin}.md has exercises {numbers:?}", page_path.display()));
        }
        for (i, section) in page.split("\n## Exercise ").skip(1).enumerate() {
            let body = section.split("\n## ").next().unwrap();
            if body.lines().skip(1).filter(|l| !l.trim().is_empty()).count() < 2 {
                problems.push(format!("{bin}: the answer to exercise {} is too short to be one", i + 1));
            }
        }
        if !page.contains(&format!("## Graded exercise: `lab/exercise {}`", &bin[..2])) {
            problems.push(format!("{bin}: no `## Graded exercise: `lab/exercise {}`` section", &bin[..2]));
        }
        let source = read(&root().join(format!("src/stages/{stage}.rs")));
        let holes: Vec<&str> = source
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("// ANCHOR: hole_"))
            .map(|rest| rest.split(' ').next().unwrap())
            .collect();
        assert!(!holes.is_empty(), "src/stages/{stage}.rs has no holes");
        for hole in holes {
            let include = format!("{{{{#include ../../../../src/stages/{stage}.rs:hole_{hole}}}}}");
            if !page.contains(&include) {
                problems.push(format!("{bin}: hole_{hole} is not quoted (`{include}`)"));
            }
        }
    }
    assert!(problems.is_empty(), "the instructor's guide is out of step:\n{}", problems.join("\n"));
}

/// The hole anchors of a stage file (`// ANCHOR: hole_<name>`).
fn hole_count(stage: &str) -> usize {
    read(&root().join(format!("src/stages/{stage}.rs")))
        .lines()
        .filter(|l| l.trim_start().starts_with("// ANCHOR: hole_"))
        .count()
}

/// The plan once gave exercise 08 eight holes where the stage has six: a count written in
/// prose drifts when a hole is added or taken away, so each one is checked.
#[test]
fn the_hole_counts_the_guide_states_are_the_stages() {
    const WORDS: [&str; 13] =
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
    let plan = read(&root().join("book/instructor/src/plan.md"));
    let mut problems = Vec::new();
    let mut stated_in_plan = 0;
    for (bin, stage) in steps() {
        let nn = &bin[..2];
        let holes = hole_count(&stage);
        // The answers' graded section opens with the count in words: "Six holes." / "One hole:".
        let page = read(&root().join(format!("book/instructor/src/answers/{bin}.md")));
        let graded = page.split(&format!("## Graded exercise: `lab/exercise {nn}`")).nth(1).unwrap_or("");
        let first = graded.split_whitespace().next().unwrap_or("").to_lowercase();
        match WORDS.iter().position(|w| *w == first) {
            Some(n) if n == holes => {}
            _ => {
                problems.push(format!("answers/{bin}.md: the graded exercise says `{first} …`; {stage}.rs has {holes}"))
            }
        }
        // The plan: "`lab/exercise NN` (… N holes".
        for rest in plan.split(&format!("`lab/exercise {nn}` (")).skip(1) {
            let inside = rest.split(')').next().unwrap_or("");
            let Some(n) =
                inside.split(" holes").next().and_then(|t| t.rsplit([' ', ':', ';']).next()?.parse::<usize>().ok())
            else {
                continue;
            };
            stated_in_plan += 1;
            if n != holes {
                problems.push(format!("plan.md: `lab/exercise {nn}` ({n} holes…), but {stage}.rs has {holes}"));
            }
        }
    }
    assert!(
        stated_in_plan >= 3,
        "plan.md states fewer hole counts than expected ({stated_in_plan}): is the pattern stale?"
    );
    assert!(problems.is_empty(), "hole counts out of step:\n{}", problems.join("\n"));
}

#[test]
fn the_students_book_links_nowhere_into_the_guide() {
    for entry in std::fs::read_dir(root().join("book/src")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            let text = read(&path);
            assert!(!text.contains("instructor/"), "{} points into the instructor's guide", path.display());
        }
    }
}

fn mdbook() -> PathBuf {
    let candidates = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("mdbook")).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo/bin/mdbook")));
    for c in candidates {
        if c.is_file() {
            return c;
        }
    }
    panic!("mdbook not found on PATH or in ~/.cargo/bin: run book/install-tools");
}

#[test]
fn the_guide_builds_without_a_warning() {
    let out_dir = std::env::temp_dir().join(format!("rdma-dissect-instructor-{}", std::process::id()));
    let out = Command::new(mdbook())
        .arg("build")
        .arg(root().join("book/instructor"))
        .arg("-d")
        .arg(&out_dir)
        .output()
        .expect("run mdbook");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mdbook build book/instructor failed:\n{stderr}");
    let noisy: Vec<&str> = stderr.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).collect();
    assert!(noisy.is_empty(), "mdbook build book/instructor warned:\n{}", noisy.join("\n"));
    let page = read(&out_dir.join("answers/05_modify_qp_rtr.html"));
    // The holes' answers are quoted code, without their markers.
    assert!(page.contains("min_rnr_timer"), "the quoted answers are missing");
    assert!(!page.contains("ANCHOR"), "an anchor marker leaked into the guide");
    let _ = std::fs::remove_dir_all(&out_dir);
}
