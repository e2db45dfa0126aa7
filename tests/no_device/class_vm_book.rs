//! The students' book on a class VM, where the student is not root: no command that
//! a step's chapter tells the student to type, and nothing in the guide's symptoms table,
//! asks for sudo. (Running those commands as the student on the image is a VM test's
//! job; this one keeps the text from drifting back.)

use crate::project;

/// The commands of a chapter: lines of its `console` blocks that a prompt starts
/// (`$ `, or `terminal N $ `, `A$ `), with their continuation lines.
fn console_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_console = false;
    let mut continued = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") {
            in_console = t.starts_with("```console");
            continued = false;
            continue;
        }
        if !in_console {
            continue;
        }
        // A prompt is at most a short word before "$ " ("A$ ", "B$ "), or "terminal N $ ".
        let command = t.find("$ ").filter(|&i| (i < 14 && !t[..i].contains(' ')) || t.starts_with("terminal"));
        if let Some(i) = command {
            out.push(t[i + 2..].to_string());
            continued = t.ends_with('\\');
        } else if continued {
            out.push(t.to_string());
            continued = t.ends_with('\\');
        }
    }
    out
}

#[test]
fn no_chapter_command_and_no_symptom_asks_a_student_for_sudo() {
    let mut chapters = Vec::new();
    for entry in std::fs::read_dir(project().join("book/src")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.len() > 3 && name.ends_with(".md") && name[..2].chars().all(|c| c.is_ascii_digit()) {
            chapters.push(path);
        }
    }
    chapters.sort();
    // One chapter per step of steps/list.txt (consistency.rs checks their names).
    let list = std::fs::read_to_string(project().join("steps/list.txt")).unwrap();
    let steps = list.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).count();
    assert_eq!(chapters.len(), steps, "a chapter per step: {chapters:?}");
    let mut commands = 0;
    for path in &chapters {
        let text = std::fs::read_to_string(path).unwrap();
        for command in console_commands(&text) {
            commands += 1;
            assert!(!command.split_whitespace().any(|w| w == "sudo"), "{}: {command}", path.display());
        }
    }
    assert!(commands >= 20, "found only {commands} console commands in the chapters");
    let symptoms = std::fs::read_to_string(project().join("book/instructor/src/symptoms.md")).unwrap();
    assert!(!symptoms.contains("sudo"), "symptoms.md sends students to sudo");
}
