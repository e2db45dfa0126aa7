//! The class's reports: JUnit XML per student with what was graded (properties), a CSV
//! Moodle's gradebook imports, and Gradescope's `results.json` per student.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{graded_steps, io, key_values, moodle, students, vet};
use crate::exercise::{junit_errors_xml, junit_xml, parse_results, Verdict};

/// A report keeps this much of one failure's text: a flood of output is the student's
/// failure, not the gradebook's.
const MAX_MESSAGE: usize = 16 * 1024;

fn capped(message: &str) -> String {
    if message.len() <= MAX_MESSAGE {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… {} more bytes left out]", &message[..end], message.len() - end)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (Howard Hinnant's civil_from_days).
pub(crate) fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

/// A CSV field, quoted.
fn csv(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// Gradescope's results.json, the fields this grader writes, as its autograder
/// specification names them ("Autograder Specifications", "Output format"): the type is
/// the format, read back (`grade gradescope-student` stamps it) with unknown fields
/// refused. A field's name is the specification's, and an enum holds exactly the values it
/// allows: no separate schema to keep in step; a unit test holds the text written to a
/// literal results.json.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct GradescopeResults {
    pub(crate) score: u32,
    pub(crate) execution_time: u64,
    pub(crate) output: String,
    pub(crate) stdout_visibility: Visibility,
    pub(crate) tests: Vec<GradescopeTest>,
    /// Who was graded, once `grade gradescope-student` has stamped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) extra_data: Option<ExtraData>,
}

/// The results' `extra_data`, which Gradescope stores as it is (any object, its specification
/// says): whom this grader graded.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExtraData {
    pub(crate) student: Submitter,
}

/// A submission's first user as Gradescope's submission metadata names them. The two ids
/// are passed on as the metadata writes them (numbers in its documentation): the grader
/// only copies them, and an id of another shape is no reason to fail a student's grading.
#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct Submitter {
    pub(crate) email: String,
    pub(crate) gradescope_user_id: serde_json::Value,
    pub(crate) name: String,
    pub(crate) submission_id: serde_json::Value,
}

/// One test of [`GradescopeResults`]: a step graded.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct GradescopeTest {
    pub(crate) name: String,
    pub(crate) number: String,
    pub(crate) score: u32,
    pub(crate) max_score: u32,
    pub(crate) status: Status,
    pub(crate) output: String,
    pub(crate) visibility: Visibility,
}

/// A test's `status`.
#[derive(Serialize, Deserialize, Debug, PartialEq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Passed,
    Failed,
}

/// Who sees a part of the results, Gradescope's `visibility` values.
#[derive(Serialize, Deserialize, Debug, PartialEq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Visibility {
    Hidden,
    AfterDueDate,
    AfterPublished,
    Visible,
}

impl GradescopeResults {
    /// As Gradescope reads it: pretty JSON, a newline at the end.
    pub(crate) fn to_text(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serializes") + "\n"
    }

    /// `text` read as Gradescope's results.json, or what in it is not.
    pub(crate) fn parse(text: &str) -> Result<GradescopeResults, String> {
        serde_json::from_str(text).map_err(|e| format!("not Gradescope's results.json: {e}"))
    }
}

/// Gradescope's results.json for one student: a test per step graded, 1 point each, the
/// report of a failure as the test's output (the autograder specification's format).
pub(crate) fn gradescope_json(verdicts: &[Verdict], bins: &[String]) -> String {
    let score = verdicts.iter().filter(|v| v.passed).count() as u32;
    let time: f64 = verdicts.iter().map(|v| v.seconds).sum();
    let tests = verdicts
        .iter()
        .zip(bins)
        .map(|(v, bin)| GradescopeTest {
            name: bin.clone(),
            number: v.nn.clone(),
            score: u32::from(v.passed),
            max_score: 1,
            status: if v.passed { Status::Passed } else { Status::Failed },
            output: capped(&v.message),
            visibility: Visibility::Visible,
        })
        .collect();
    GradescopeResults {
        score,
        execution_time: time.round() as u64,
        output: format!("{score} of {} steps behave like the reference", verdicts.len()),
        stdout_visibility: Visibility::Hidden,
        tests,
        extra_data: None,
    }
    .to_text()
}

/// What a student whose hand-in was taken but who was not graded gets in the reports: the
/// grading stopped before them (interrupted, or lab/grade gave up on a VM or a reference
/// that kept failing), which says nothing of their work.
const NOT_GRADED: &str = "not graded: the grading stopped before this student (it was interrupted, or the lab VM \
                          or the reference failed): the lab's failure, not the student's; run lab/grade again \
                          to grade them";

/// `grade report CLASS`: the reports of every student graded so far, in CLASS/reports/;
/// one whose hand-in was taken but not graded is reported as [`NOT_GRADED`]: an error in
/// JUnit, empty grades and that feedback in the CSV, no results.json.
pub(crate) fn report_cmd(class: &Path, version: &str) -> Result<(), String> {
    let steps = graded_steps(class)?;
    let bins: Vec<String> = steps.iter().map(|s| s.bin.clone()).collect();
    let reports = class.join("reports");
    for dir in ["junit", "gradescope"] {
        std::fs::create_dir_all(reports.join(dir)).map_err(io(&reports))?;
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // Moodle's grade import matches a row to a user by one column the instructor maps
    // ("Identify user by"): with a roster, the student's Moodle email ("Email address",
    // Moodle's own export's header), our account beside it for the eye; without one, the
    // account as `username`, right only where accounts are the Moodle usernames. A row
    // whose identifier is empty is skipped by the import, never put on another student.
    let emails = moodle::emails(class);
    let who = if emails.is_some() { "\"Email address\",\"student\"" } else { "username" };
    let mut table = format!("{who},{},total,feedback\n", bins.iter().map(|b| csv(b)).collect::<Vec<_>>().join(","));
    let names = students(class)?;
    let mut no_email = Vec::new();
    // Who handed in which file (step and SHA-256): a file several students handed in was
    // built and run once (see `vm_cmd`), and the instructor may want to know who shares it.
    let handins: Vec<Vec<(String, String)>> =
        names.iter().map(|n| key_values(&class.join("students").join(n).join("handin.tsv"))).collect();
    let flags = vet::flags(&names, &handins);
    let (mut graded, mut not_graded) = (0, 0);
    for ((name, handin), flags) in names.iter().zip(&handins).zip(&flags) {
        let name = name.clone();
        let id = match &emails {
            Some(emails) => {
                let email = emails.get(&name).cloned().unwrap_or_default();
                if email.is_empty() {
                    no_email.push(name.clone());
                }
                format!("{},{}", csv(&email), csv(&name))
            }
            None => csv(&name),
        };
        let path = class.join("results").join(format!("{name}.tsv"));
        let text = std::fs::read_to_string(&path).ok();
        let graded_at = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(now, |d| d.as_secs());
        let value = |key: &str| handin.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let mut props = vec![
            ("student".to_string(), name.clone()),
            ("commit".to_string(), value("commit").unwrap_or_else(|| "none (an archive, not a git push)".into())),
            ("source".to_string(), value("source").unwrap_or_default()),
            ("timestamp".to_string(), utc(graded_at)),
            ("grader_version".to_string(), version.to_string()),
        ];
        for (k, v) in handin {
            if k == "file" {
                if let Some((bin, sha)) = v.split_once('\t') {
                    props.push((format!("sha256:exercises/{bin}.rs"), sha.to_string()));
                    let others: Vec<&str> = names
                        .iter()
                        .zip(&handins)
                        .filter(|(other, theirs)| **other != name && theirs.iter().any(|(k, w)| k == "file" && w == v))
                        .map(|(other, _)| other.as_str())
                        .collect();
                    if !others.is_empty() {
                        props.push((format!("same_file_as:exercises/{bin}.rs"), others.join(" ")));
                    }
                }
            } else if k == "received" || k.starts_with("claimed_") || k.ends_with("_error") {
                props.push((k.clone(), v.clone()));
            }
        }
        for flag in flags {
            props.push((format!("flag:exercises/{}.rs", flag.bin), flag.text.clone()));
        }
        let junit = reports.join("junit").join(format!("{name}.xml"));
        let suite = format!("rdma-dissect grade: {name}");
        let Some(text) = text else {
            not_graded += 1;
            std::fs::write(&junit, junit_errors_xml(&suite, &bins, NOT_GRADED, &props)).map_err(io(&junit))?;
            let empty = vec![""; bins.len()].join(",");
            let _ = writeln!(table, "{id},{empty},,{}", csv(NOT_GRADED));
            continue;
        };
        let mut verdicts = parse_results(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        graded += 1;
        // A flagged file keeps the verdict its runs earned; the flag is shown beside it.
        for v in &mut verdicts {
            for flag in flags.iter().filter(|f| f.bin.starts_with(&v.nn)) {
                v.message = format!("{}\n\nFLAGGED: {}", v.message, flag.text);
            }
        }
        let capped_verdicts: Vec<Verdict> = verdicts
            .iter()
            .map(|v| Verdict { nn: v.nn.clone(), passed: v.passed, seconds: v.seconds, message: capped(&v.message) })
            .collect();
        std::fs::write(&junit, junit_xml(&suite, &capped_verdicts, &props)).map_err(io(&junit))?;
        let gs = reports.join("gradescope").join(&name);
        std::fs::create_dir_all(&gs).map_err(io(&gs))?;
        std::fs::write(gs.join("results.json"), gradescope_json(&verdicts, &bins)).map_err(io(&gs))?;
        let cells: Vec<String> = bins
            .iter()
            .map(|b| {
                verdicts
                    .iter()
                    .find(|v| b.starts_with(&v.nn))
                    .map_or("0", |v| if v.passed { "1" } else { "0" })
                    .to_string()
            })
            .collect();
        let total = verdicts.iter().filter(|v| v.passed).count();
        let failed = verdicts
            .iter()
            .find(|v| !v.passed)
            .map(|v| format!("{}: {}", v.nn, v.message.lines().next().unwrap_or_default()));
        let flagged = flags.iter().map(|f| format!("FLAGGED: {}", f.text));
        let feedback = failed.into_iter().chain(flagged).collect::<Vec<_>>().join("; ");
        let _ = writeln!(table, "{id},{},{total},{}", cells.join(","), csv(&feedback));
    }
    let moodle = reports.join("moodle.csv");
    std::fs::write(&moodle, table).map_err(io(&moodle))?;
    eprintln!("grade: reports for {graded} students in {}", reports.display());
    if !no_email.is_empty() {
        eprintln!(
            "grade: no Moodle email in the roster for {}: their rows in moodle.csv have none, and Moodle's import skips them",
            no_email.join(", ")
        );
    }
    // Hand-ins `grade intake` refused: the instructor reads why here, at the end of the run.
    let refused = std::fs::read_to_string(reports.join("refused.txt")).unwrap_or_default();
    if !refused.is_empty() {
        eprintln!(
            "grade: {} hand-ins refused (see {}):\n{refused}",
            refused.lines().count(),
            reports.join("refused.txt").display()
        );
    }
    if not_graded > 0 {
        eprintln!("grade: {not_graded} students not graded (the lab's failure, not theirs): reported as such; run lab/grade again to grade them");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_is_rfc3339() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_795_734_000), "2026-11-26T23:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
    }

    /// A results.json in the specification's format ("Output format"), with the fields this
    /// grader writes — their names, their types (a test's `number` a string, scores and
    /// seconds numbers) and values (`"passed"`, `"hidden"`) — for two steps, one passed,
    /// one failed with a message that needs escaping.
    const TWO_STEPS: &str = r#"{
  "score": 1,
  "execution_time": 16,
  "output": "1 of 2 steps behave like the reference",
  "stdout_visibility": "hidden",
  "tests": [
    {
      "name": "05_modify_qp_rtr",
      "number": "05",
      "score": 1,
      "max_score": 1,
      "status": "passed",
      "output": "2 runs",
      "visibility": "visible"
    },
    {
      "name": "06_modify_qp_rts",
      "number": "06",
      "score": 0,
      "max_score": 1,
      "status": "failed",
      "output": "a hole \"x\"\n  at line 3",
      "visibility": "visible"
    }
  ]
}
"#;

    #[test]
    fn results_json_is_gradescopes_format() {
        let verdicts = [
            Verdict { nn: "05".into(), passed: true, seconds: 12.5, message: "2 runs".into() },
            Verdict { nn: "06".into(), passed: false, seconds: 3.0, message: "a hole \"x\"\n  at line 3".into() },
        ];
        let json = gradescope_json(&verdicts, &["05_modify_qp_rtr".into(), "06_modify_qp_rts".into()]);
        assert_eq!(json, TWO_STEPS);
        assert_eq!(GradescopeResults::parse(&json).unwrap().to_text(), json, "read back as written");
    }

    /// What Gradescope would refuse (no score, a score as a string, a status it does not
    /// know, a field it does not know) the type refuses when reading, saying what.
    #[test]
    fn what_gradescope_would_refuse_is_refused_by_the_type() {
        for (bad, why) in [
            (r#"{"output": "no score, no tests"}"#, "missing field `score`"),
            (r#"{"score": "12"}"#, "invalid type: string \"12\", expected u32"),
            (r#"{"tests": [{"status": "ok"}]}"#, "unknown variant `ok`"),
            (r#"{"score": 1, "grade": 1}"#, "unknown field `grade`"),
        ] {
            let err = GradescopeResults::parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    /// A grading that stopped before a student (interrupted, or the VM failed three times):
    /// their reports say so, as the lab's failure, never as a failed or passed step.
    #[test]
    fn a_student_not_graded_is_reported_as_the_labs_failure_not_theirs() {
        let class = std::env::temp_dir().join(format!("xtask-grade-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&class);
        for dir in ["incoming/alice", "incoming/bob", "results", "students/bob"] {
            std::fs::create_dir_all(class.join(dir)).unwrap();
        }
        std::fs::write(class.join("steps.txt"), "05_modify_qp_rtr\n").unwrap();
        std::fs::write(class.join("results/alice.tsv"), "05\tfail\t2.000\ta hole is still empty\n").unwrap();
        let bob = "received\t2026-11-26T23:00:00Z\nclaimed_time\t2026-11-20T00:00:00Z\nfile\t05_modify_qp_rtr\tabc\n";
        std::fs::write(class.join("students/bob/handin.tsv"), bob).unwrap();
        report_cmd(&class, "xtask test").unwrap();
        let read = |path: &str| std::fs::read_to_string(class.join("reports").join(path)).unwrap();
        let bob = read("junit/bob.xml");
        assert!(bob.contains("failures=\"0\" errors=\"1\""), "{bob}");
        assert!(bob.contains("<error message=\"not graded: ") && !bob.contains("<failure"), "{bob}");
        assert!(bob.contains("the lab's failure, not the student's"), "{bob}");
        assert!(bob.contains("name=\"sha256:exercises/05_modify_qp_rtr.rs\" value=\"abc\""), "{bob}");
        // When it came, beside when the student says they made it.
        assert!(bob.contains("name=\"received\" value=\"2026-11-26T23:00:00Z\""), "{bob}");
        assert!(bob.contains("name=\"claimed_time\" value=\"2026-11-20T00:00:00Z\""), "{bob}");
        assert!(read("junit/alice.xml").contains("<failure message=\"a hole is still empty\""));
        let moodle = read("moodle.csv");
        assert!(moodle.contains("\n\"alice\",0,0,\"05: a hole is still empty\"\n"), "{moodle}");
        assert!(moodle.contains(&format!("\n\"bob\",,,\"{NOT_GRADED}\"\n")), "{moodle}");
        assert!(class.join("reports/gradescope/alice/results.json").is_file());
        assert!(!class.join("reports/gradescope/bob").exists(), "no score for who was not graded");
        std::fs::remove_dir_all(&class).unwrap();
    }

    /// Two students whose files are the same token for token, one of them the reference's:
    /// each keeps its verdict, and every report shows the flag beside it; a third is not
    /// flagged.
    #[test]
    fn a_flagged_file_keeps_its_verdict_and_every_report_shows_the_flag() {
        let class = std::env::temp_dir().join(format!("xtask-grade-flags-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&class);
        for dir in ["incoming/alice", "incoming/bob", "incoming/carol", "results"] {
            std::fs::create_dir_all(class.join(dir)).unwrap();
        }
        std::fs::write(class.join("steps.txt"), "05_modify_qp_rtr\n").unwrap();
        let bin = "05_modify_qp_rtr";
        for (name, lines, result) in [
            (
                "alice",
                format!("tokens\t{bin}\tk1\nsame_tokens_as\t{bin}\tthe reference's src/stages/modify_qp_rtr.rs\n"),
                "05\tpass\t2.000\t2 runs\n",
            ),
            ("bob", format!("tokens\t{bin}\tk1\n"), "05\tfail\t2.000\tthe server's trace differs\n"),
            ("carol", format!("tokens\t{bin}\tk2\n"), "05\tpass\t2.000\t2 runs\n"),
        ] {
            std::fs::create_dir_all(class.join("students").join(name)).unwrap();
            std::fs::write(class.join("students").join(name).join("handin.tsv"), lines).unwrap();
            std::fs::write(class.join("results").join(format!("{name}.tsv")), result).unwrap();
        }
        report_cmd(&class, "xtask test").unwrap();
        let read = |path: &str| std::fs::read_to_string(class.join("reports").join(path)).unwrap();
        let alice_flag = "exercises/05_modify_qp_rtr.rs is token for token the reference's";
        let alice = read("junit/alice.xml");
        assert!(alice.contains("failures=\"0\""), "{alice}");
        assert!(alice.contains("<property name=\"flag:exercises/05_modify_qp_rtr.rs\""), "{alice}");
        assert!(
            alice.contains(alice_flag)
                && alice.contains("modify_qp_rtr.rs and the same as bob's (comments and whitespace aside)")
        );
        let bob = read("junit/bob.xml");
        assert!(bob.contains("failures=\"1\""), "{bob}");
        assert!(bob.contains("FLAGGED: exercises/05_modify_qp_rtr.rs is token for token the same as alice's"), "{bob}");
        let gradescope = GradescopeResults::parse(&read("gradescope/alice/results.json")).unwrap();
        assert_eq!(gradescope.score, 1);
        assert!(gradescope.tests[0].output.contains("FLAGGED: "), "{gradescope:?}");
        let moodle = read("moodle.csv");
        assert!(
            moodle.contains("\n\"alice\",1,1,\"FLAGGED: exercises/05_modify_qp_rtr.rs is token for token"),
            "{moodle}"
        );
        assert!(moodle.contains("\n\"bob\",0,0,\"05: the server's trace differs; FLAGGED: "), "{moodle}");
        assert!(moodle.contains("\n\"carol\",1,1,\"\"\n"), "{moodle}");
        assert!(!read("junit/carol.xml").contains("flag:"));
        std::fs::remove_dir_all(&class).unwrap();
    }

    #[test]
    fn a_long_failure_is_capped_in_the_reports() {
        let long = "x".repeat(MAX_MESSAGE + 10);
        assert!(capped(&long).ends_with("[… 10 more bytes left out]"));
        assert_eq!(capped("short"), "short");
    }
}
