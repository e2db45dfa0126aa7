//! A synthetic class: hand-ins made from the reference, each of a kind whose verdict is
//! known, for the grader's test (one of each kind) and its benchmark (thirty).
//!
//! Every hand-in is step 05 (`modify_qp_rtr`: attributes, a mask and an exchange, the
//! stage with the most to get wrong), as an unpacked `lab/submit` hand-in: `NAME/exercises/
//! 05_modify_qp_rtr.rs` and `NAME/manifest.txt`; with `--every-step`, every other step too,
//! of the kinds a class mostly hands in (`OTHER_KINDS`). `intended.tsv` says, per student, `pass`
//! or `fail`, a phrase the report must hold, and a phrase of the file's flag (see `vet`),
//! empty when it must have none.
//!
//! Each hand-in is made from the reference's stage with its student's variant (see
//! `exercise/variant.rs`) in its holes, as that student's answer; the kinds that copy the
//! stage (`copy`, `stage-copy`) copy the reference's own, rc_pingpong's values and all, and
//! fail their variant.
//!
//! No two hand-ins are the same file, as in a real class: each carries its student's name
//! in a comment, at the top or at the end. The grader builds and runs a file handed in
//! twice once; a class of copies would measure that, not the grader. Nor are two the same
//! token for token, but for the copies of the stage: in a class with more hand-ins than
//! kinds, a kind's second and later hand-ins carry their student's name in a constant too.

use std::fmt::Write as _;
use std::path::Path;

use super::handin::{sha256, Manifest};
use super::vet::flags;
use super::{key_values, students};
use crate::exercise::{exercise_text, Variant};

/// The step every synthetic hand-in is.
pub(crate) const STEP: &str = "05";
const BIN: &str = "05_modify_qp_rtr";

/// A kind of hand-in: its name, how it is made from the reference's stage, its verdict
/// (`pass`, or a phrase of the failure's report), and a phrase of its flag (empty: none).
struct Kind {
    name: &'static str,
    make: fn(&str, &Path) -> Result<String, String>,
    verdict: &'static str,
    flag: &'static str,
}

/// The reference's own stage of step 05, rc_pingpong's values and all: what a copy copies.
fn the_stage(project: &Path) -> Result<String, String> {
    let path = project.join("src/stages/modify_qp_rtr.rs");
    std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `stage` with `name`'s variant of step `nn` in its holes: that student's answer.
fn answer(stage: String, name: &str, nn: &str) -> Result<String, String> {
    match Variant::of(name, nn) {
        Some(v) => v.complete(&stage),
        None => Ok(stage),
    }
}

fn replace(text: &str, from: &str, to: &str) -> Result<String, String> {
    if !text.contains(from) {
        return Err(format!("src/stages/modify_qp_rtr.rs no longer holds `{from}`: update grade/synth.rs"));
    }
    Ok(text.replacen(from, to, 1))
}

/// The body of `modify_qp_rtr` starts with `attempt` (an expression of type `Result`): what
/// a hostile hand-in tries; when it fails, the program says `phrase` and why, and exits.
fn or_give_up(text: &str, attempt: &str, phrase: &str) -> Result<String, String> {
    first_in_modify(
        text,
        &format!("if let Err(e) = {attempt} {{ eprintln!(\"{phrase}: {{e}}\"); std::process::exit(1); }}"),
    )
}

/// The body of `modify_qp_rtr` starts with `code`.
fn first_in_modify(text: &str, code: &str) -> Result<String, String> {
    let head = "pub fn modify_qp_rtr(qp: &Qp, dev: &Device, remote: &Dest, mtu: ibv_mtu, sl: u8) -> Result<()> {\n";
    replace(text, head, &format!("{head}    {code}\n"))
}

const KINDS: [Kind; 22] = [
    // Correct, and the student's own: two attributes in another order.
    Kind {
        name: "complete",
        make: |t, _| {
            replace(
                t,
                "qp_state: IBV_QPS_RTR,\n        path_mtu: mtu,",
                "path_mtu: mtu,\n        qp_state: IBV_QPS_RTR,",
            )
        },
        verdict: "pass",
        flag: "",
    },
    Kind { name: "holes", make: |_, _| exercise_text(STEP), verdict: "a hole is still empty", flag: "" },
    Kind {
        name: "mask",
        make: |t, _| {
            replace(
                t,
                "| IBV_QP_MAX_DEST_RD_ATOMIC.0\n        | IBV_QP_MIN_RNR_TIMER.0,",
                "| IBV_QP_MAX_DEST_RD_ATOMIC.0,",
            )
        },
        verdict: "IBV_QP_MIN_RNR_TIMER",
        flag: "",
    },
    Kind {
        // The server waits for the client's `done` before it sends its address, which the
        // client waits for: each waits for the other.
        name: "order",
        make: |t, _| {
            let t = replace(t, "conn.send(self.local)?;", "SEND")?;
            let t = replace(&t, "conn.recv_done()?;", "conn.send(self.local)?;")?;
            replace(&t, "SEND", "conn.recv_done()?;")
        },
        verdict: "fail",
        flag: "",
    },
    Kind {
        name: "compile",
        make: |t, _| first_in_modify(t, "let psn: u32 = \"not a number\";"),
        verdict: "does not compile",
        flag: "",
    },
    Kind {
        name: "loop",
        make: |t, _| first_in_modify(t, "loop { std::hint::spin_loop(); }"),
        verdict: "still running after",
        flag: "",
    },
    Kind {
        name: "forkbomb",
        make: |t, _| {
            first_in_modify(t, "loop { let _ = std::process::Command::new(\"/bin/sh\").args([\"-c\", \"f() { f & f & }; f\"]).spawn(); }")
        },
        verdict: "still running after",
        flag: "",
    },
    Kind {
        name: "flood",
        make: |t, _| first_in_modify(t, "loop { println!(\"{}\", \"flood \".repeat(1000)); }"),
        verdict: "bytes of output",
        flag: "",
    },
    Kind {
        // The reference's own stage, by its path in the instructor's checkout: what a
        // student who knows where the project lives would try.
        name: "answer",
        make: |_, project| {
            let answer = project.join("src/stages/modify_qp_rtr.rs");
            Ok(format!("#[path = \"{}\"]\nmod answer;\npub use answer::*;\n", answer.display()))
        },
        verdict: "`#[path]` takes a module from a file of its choosing",
        flag: "",
    },
    Kind { name: "panic", make: |t, _| first_in_modify(t, "panic!(\"not today\");"), verdict: "panicked", flag: "" },
    // Holes left, with an all-pass self-check and JUnit file of its own making beside
    // them (FORGED): the grader reads neither.
    Kind { name: "forged", make: |_, _| exercise_text(STEP), verdict: "a hole is still empty", flag: "" },
    // The reference with its comments changed: it fails its variant (rc_pingpong's values
    // where the student's are asked for), and is flagged as the reference's copy.
    Kind {
        name: "copy",
        make: |_, project| Ok(the_stage(project)?.replace("// ", "// (mine) ")),
        verdict: "(your variant's value)",
        flag: "token for token the reference's src/stages/modify_qp_rtr.rs",
    },
    // The answer read at compile time from another step's crate beside the student's in
    // CLASS/build: refused before it is built.
    Kind {
        name: "include-answer",
        make: |t, _| {
            Ok(format!(
                "{t}\npub const ANSWER: &str = include_str!(\"../../06_modify_qp_rts/src/stages/modify_qp_rtr.rs\");\n"
            ))
        },
        verdict: "`include_str!` reads a file at compile time",
        flag: "",
    },
    Kind {
        name: "path-attr",
        make: |_, _| {
            Ok("#[path = \"../../06_modify_qp_rts/src/stages/modify_qp_rtr.rs\"]\nmod answer;\npub use answer::*;\n"
                .into())
        },
        verdict: "`#[path]` takes a module from a file of its choosing",
        flag: "",
    },
    // A function the loader runs before main: it could write the reference's trace itself.
    Kind {
        name: "pre-main-hook",
        make: |t, _| {
            Ok(format!(
                "{t}\n#[allow(unsafe_code)]\n#[link_section = \".init_array\"]\n#[used]\nstatic HOOK: extern \"C\" fn() = hook;\n\
                 extern \"C\" fn hook() {{\n    std::process::exit(0);\n}}\n"
            ))
        },
        verdict: "`#[link_section]` places a symbol",
        flag: "",
    },
    // What a hostile student's program tries, in safe Rust, where the grader's VM keeps the
    // project: each says so and gives up when its view holds nothing of it; where it does
    // not, it goes on as the reference, and passes, which is not the verdict intended.
    Kind {
        name: "exec-reference",
        make: |t, project| {
            let reference = project.join("target/debug/05_modify_qp_rtr").display().to_string();
            let exec = format!("{{ use std::os::unix::process::CommandExt; Err::<(), _>(std::process::Command::new({reference:?}).args(std::env::args_os().skip(1)).exec()) }}");
            or_give_up(t, &exec, "reference unreachable")
        },
        verdict: "reference unreachable",
        flag: "",
    },
    Kind {
        name: "read-answers",
        make: |t, project| {
            let answers = project.join("book/instructor/src/answers/05_modify_qp_rtr.md").display().to_string();
            or_give_up(
                t,
                &format!("std::fs::read_to_string({answers:?}).map(|a| println!(\"{{a}}\"))"),
                "answers unreadable",
            )
        },
        verdict: "answers unreadable",
        flag: "",
    },
    Kind {
        // The cargo home the grader's builds read: a config there would fail every build
        // after this one (it did, before builds had homes of their own).
        name: "poison",
        make: |t, _| {
            let home = std::env::var("CARGO_HOME").or_else(|_| std::env::var("HOME").map(|h| format!("{h}/.cargo")));
            let config = format!("{}/config.toml", home.map_err(|_| "neither CARGO_HOME nor HOME is set")?);
            let write = format!("std::fs::write({config:?}, \"[build]\\nrustc = \\\"/bin/false\\\"\\n\")");
            or_give_up(t, &write, "cargo home unwritable")
        },
        verdict: "cargo home unwritable",
        flag: "",
    },
    Kind {
        // Walks the filesystem for ever: what a student looking for answers would do.
        name: "walker",
        make: |t, _| {
            first_in_modify(
                t,
                "fn walk(d: &std::path::Path) { for e in std::fs::read_dir(d).into_iter().flatten().flatten() { if e.file_type().is_ok_and(|t| t.is_dir()) { walk(&e.path()); } } }\n    loop { walk(std::path::Path::new(\"/\")); }",
            )
        },
        verdict: "still running after",
        flag: "",
    },
    Kind {
        // Holds on to memory it touches, a MiB at a time: its cgroup's bound ends it.
        name: "hoard",
        make: |t, _| first_in_modify(t, "let mut hoard = Vec::new();\n    loop { hoard.push(vec![1u8; 1 << 20]); }"),
        verdict: "MiB of memory",
        flag: "",
    },
    Kind {
        // A constant whose evaluation never ends: rustc spins until the build's bound.
        name: "build-spin",
        make: |t, _| first_in_modify(t, "#[allow(long_running_const_eval)]\n    const _: () = loop {};"),
        verdict: "the build was stopped",
        flag: "",
    },
    // The stage as the student's checkout holds it, one comment changed: rc_pingpong's
    // values fail the variant, and the file is flagged as the reference's.
    Kind {
        name: "stage-copy",
        make: |_, project| replace(&the_stage(project)?, "//! Stage 05:", "//! Stage 05 (my answer):"),
        verdict: "(your variant's value)",
        flag: "token for token the reference's src/stages/modify_qp_rtr.rs",
    },
];

/// What the `forged` hand-in adds: the verdicts and JUnit file of a `lab/check` that
/// passed, as a student could write them by hand.
const FORGED: [(&str, &str); 2] = [
    ("self-check.tsv", "05\tpass\t1.000\t2 runs, 40 trace lines, all as the reference's\n"),
    (
        "lab-check.xml",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"lab/check\" tests=\"1\" failures=\"0\" errors=\"0\" time=\"1.000\">\n  <testsuite name=\"lab/check\" tests=\"1\" failures=\"0\" errors=\"0\" time=\"1.000\">\n    <testcase classname=\"lab.check\" name=\"05_modify_qp_rtr\" time=\"1.000\"/>\n  </testsuite>\n</testsuites>\n",
    ),
];

/// `grade synth OUT N`: N hand-ins in OUT, the kinds in turn (N = 15: one of each), and
/// OUT/intended.tsv (`NAME<TAB>pass|fail<TAB>phrase<TAB>flag`).
pub(crate) fn synth_cmd(out: &Path, n: usize, every_step: bool) -> Result<(), String> {
    let project = crate::exercise::root()?;
    let reference_path = project.join("src/stages/modify_qp_rtr.rs");
    let reference =
        std::fs::read_to_string(&reference_path).map_err(|e| format!("{}: {e}", reference_path.display()))?;
    let mut intended = String::new();
    for i in 0..n {
        let kind = &KINDS[i % KINDS.len()];
        let name = format!("s{:02}-{}", i + 1, kind.name);
        let made = (kind.make)(&answer(reference.clone(), &name, STEP)?, &project)?;
        let mark = format!("// {name}'s hand-in for step {STEP}.\n");
        let mut text = if i % 2 == 0 { mark + &made } else { made + "\n" + &mark };
        if i >= KINDS.len() && !kind.name.ends_with("copy") {
            let _ = writeln!(text, "\nconst _: &str = \"{name}\";");
        }
        let dir = out.join(&name);
        std::fs::create_dir_all(dir.join("exercises")).map_err(|e| format!("{}: {e}", dir.display()))?;
        let file = dir.join(format!("exercises/{BIN}.rs"));
        std::fs::write(&file, &text).map_err(|e| format!("{}: {e}", file.display()))?;
        let manifest = Manifest {
            account: name.clone(),
            host: "synthetic".into(),
            time: "2026-11-26T00:00:00Z".into(),
            commit: "synthetic".into(),
            files: vec![(format!("{BIN}.rs"), sha256(text.as_bytes()))],
        };
        if every_step {
            other_steps(&dir, i, &name, &mut intended)?;
        }
        std::fs::write(dir.join("manifest.txt"), manifest.text()).map_err(|e| format!("{}: {e}", dir.display()))?;
        if kind.name == "forged" {
            for (file, text) in FORGED {
                std::fs::write(dir.join(file), text).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
        }
        let verdict = if kind.verdict == "pass" { "pass\t" } else { "fail\t" };
        let phrase = if matches!(kind.verdict, "pass" | "fail") { "" } else { kind.verdict };
        let _ = writeln!(intended, "{name}\t{verdict}{phrase}\t{}", kind.flag);
    }
    let path = out.join("intended.tsv");
    std::fs::write(&path, intended).map_err(|e| format!("{}: {e}", path.display()))
}

/// What a student of a class handing in every step hands in for the steps other than
/// 05, in turn: mostly complete files, some with holes left, one that does not compile,
/// one that never ends (a class as the benchmark wants it, not every kind of 05's).
const OTHER_KINDS: [&str; 8] = ["complete", "holes", "complete", "compile", "complete", "loop", "holes", "complete"];

/// Student `i`'s (`name`'s) files of every step but 05 in `dir/exercises/`, and their
/// intended verdicts (with the step: `NAME<TAB>VERDICT<TAB>PHRASE<TAB><TAB>NN`). Each file
/// is the student's own: a complete one names its student in a constant, so no two are
/// token copies, of each other or of the reference. The manifest's list of files is left
/// as it was: the grader reads the files, not the manifest.
fn other_steps(dir: &Path, i: usize, name: &str, intended: &mut String) -> Result<(), String> {
    let project = crate::exercise::root()?;
    for (j, step) in testkit::load_steps()?.iter().enumerate().filter(|(_, s)| s.nn() != STEP) {
        let stage = std::fs::read_to_string(project.join(format!("src/stages/{}.rs", step.stage())))
            .map_err(|e| format!("{}: {e}", step.stage()))?;
        let stage = answer(stage, name, step.nn())?;
        let own = format!("\nconst _: &str = \"{name}\";\n");
        let head = format!("pub fn {}(", step.stage());
        // The loop goes where the stage's own function starts: the steps whose stage has no
        // function of its name hand in a complete file instead.
        let kind = match OTHER_KINDS[(i + j) % OTHER_KINDS.len()] {
            "loop" if !stage.contains(&head) => "complete",
            kind => kind,
        };
        let (text, verdict) = match kind {
            "complete" => (stage + &own, "pass\t"),
            "holes" => (format!("// {name}'s\n{}", exercise_text(step.nn())?), "fail\ta hole is still empty"),
            "compile" => (stage + &own + "const _: u32 = \"not a number\";\n", "fail\tdoes not compile"),
            _ => {
                let at = stage.find(&head).expect("checked above");
                let body = at + stage[at..].find("{\n").ok_or_else(|| format!("{head}: no body"))? + 2;
                let text = format!("{}    loop {{ std::hint::spin_loop(); }}\n{}{own}", &stage[..body], &stage[body..]);
                (text, "fail\tstill running after")
            }
        };
        let file = dir.join(format!("exercises/{}.rs", step.bin));
        std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
        let _ = writeln!(intended, "{name}\t{verdict}\t\t{}", step.nn());
    }
    Ok(())
}

/// `grade verify CLASS INTENDED`: every student's verdict and flag of step 05 against the
/// ones intended (no FLAG column: no flag); the differences, one a line, and an error when
/// there is one. A flag is found as `grade report` finds it, from the whole class.
pub(crate) fn verify_cmd(class: &Path, intended: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(intended).map_err(|e| format!("{}: {e}", intended.display()))?;
    let names = students(class)?;
    let handins: Vec<_> =
        names.iter().map(|n| key_values(&class.join("students").join(n).join("handin.tsv"))).collect();
    let flags = flags(&names, &handins);
    let mut wrong = Vec::new();
    let mut count = 0;
    for line in text.lines() {
        let (name, verdict, phrase, flag, nn) = match line.split('\t').collect::<Vec<_>>()[..] {
            [name, verdict, phrase] => (name, verdict, phrase, "", STEP),
            [name, verdict, phrase, flag] => (name, verdict, phrase, flag, STEP),
            [name, verdict, phrase, flag, nn] => (name, verdict, phrase, flag, nn),
            _ => {
                return Err(format!(
                    "{}: not `NAME<TAB>VERDICT<TAB>PHRASE[<TAB>FLAG[<TAB>NN]]`: {line:?}",
                    intended.display()
                ))
            }
        };
        count += 1;
        let steps = testkit::load_steps()?;
        let bin = steps.iter().find(|s| s.nn() == nn).map(|s| s.bin.as_str()).ok_or_else(|| format!("no step {nn}"))?;
        let got = names.iter().position(|n| n == name).and_then(|i| flags[i].iter().find(|f| f.bin == bin));
        match (flag, got) {
            ("", Some(got)) => wrong.push(format!("{name}: intended no flag, got {}", got.text)),
            ("", None) => {}
            (flag, None) => wrong.push(format!("{name}: intended the flag ({flag}), got none")),
            (flag, Some(got)) if !got.text.contains(flag) => {
                wrong.push(format!("{name}: intended the flag ({flag}), got {}", got.text))
            }
            _ => {}
        }
        let results = class.join("results").join(format!("{name}.tsv"));
        let Ok(results) = std::fs::read_to_string(&results) else {
            wrong.push(format!("{name}: not graded"));
            continue;
        };
        let verdicts = crate::exercise::parse_results(&results)?;
        let Some(v) = verdicts.iter().find(|v| v.nn == nn) else {
            wrong.push(format!("{name}: no verdict for step {nn}"));
            continue;
        };
        let got = if v.passed { "pass" } else { "fail" };
        if got != verdict || !v.message.contains(phrase) {
            let first = v.message.lines().next().unwrap_or_default();
            wrong.push(format!("{name} {nn}: intended {verdict} ({phrase}), got {got}: {first}"));
        }
    }
    if wrong.is_empty() {
        println!("all {count} verdicts as intended");
        Ok(())
    } else {
        Err(format!("{} of {count} verdicts not as intended:\n  {}", wrong.len(), wrong.join("\n  ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic class of 30 (each kind twice), taken by `grade prepare` on this host: the
    /// files that reach outside themselves are refused and never handed on to be built, the
    /// copies are flagged, and `grade verify` holds every verdict and flag to the intended
    /// one — and fails when a flag is missing or one is not intended.
    #[test]
    fn the_synthetic_class_is_refused_and_flagged_as_intended() {
        let dir = std::env::temp_dir().join(format!("xtask-grade-synth-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (handins, class) = (dir.join("handins"), dir.join("class"));
        synth_cmd(&handins, 2 * KINDS.len(), false).unwrap();
        std::fs::create_dir_all(&class).unwrap();
        std::fs::rename(&handins, class.join("incoming")).unwrap();
        let intended = class.join("incoming/intended.tsv");
        let intended_text = std::fs::read_to_string(&intended).unwrap();
        std::fs::rename(&intended, dir.join("intended.tsv")).unwrap();
        super::super::prepare_cmd(&class, STEP).unwrap();

        // The verdicts the VM would reach: a refusal as `grade vm` words it, the others as
        // intended (running them is lab/grade's test).
        std::fs::create_dir_all(class.join("results")).unwrap();
        let mut built = 0;
        for line in intended_text.lines() {
            let [name, verdict, phrase, _] = line.split('\t').collect::<Vec<_>>()[..] else { panic!("{line}") };
            let handin = key_values(&class.join("students").join(name).join("handin.tsv"));
            let refused = super::super::vet::refused(&handin, BIN);
            let sha = super::super::file_sha(&handin, BIN);
            assert_eq!(sha.is_none(), refused.is_some(), "{name}: a refused file is never built");
            built += usize::from(sha.is_some());
            let message = refused.map_or(phrase.to_string(), |why| format!("refused, not built or run: {why}"));
            let verdict = if verdict == "pass" { Ok(message) } else { Err(message) };
            let results = class.join("results").join(format!("{name}.tsv"));
            crate::exercise::append_result(&results, STEP, &verdict, 1.0).unwrap();
        }
        assert_eq!(built, 2 * (KINDS.len() - 4), "four kinds are refused");
        let handed = std::fs::read_dir(class.join("handed")).unwrap().count();
        assert_eq!(handed, built, "every file built is a different file");
        verify_cmd(&class, &dir.join("intended.tsv")).unwrap();

        let wrong = dir.join("wrong.tsv");
        let no_flag = intended_text.replace("\ttoken for token the reference's src/stages/modify_qp_rtr.rs", "\t");
        std::fs::write(&wrong, no_flag).unwrap();
        let err = verify_cmd(&class, &wrong).unwrap_err();
        let count = 2 * KINDS.len();
        assert!(
            err.starts_with(&format!("4 of {count}"))
                && err.contains("s12-copy: intended no flag, got exercises/")
                && err.contains("s22-stage-copy: intended no flag, got exercises/"),
            "{err}"
        );
        let flagged = intended_text.replacen("\tpass\t\t\n", "\tpass\t\tthe same as\n", 1);
        std::fs::write(&wrong, flagged).unwrap();
        let err = verify_cmd(&class, &wrong).unwrap_err();
        assert!(err.contains("s01-complete: intended the flag (the same as), got none"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
