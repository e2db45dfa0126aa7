//! Verdicts for graders: a results file, and JUnit XML made from it.

use std::fmt::Write as _;
use std::path::Path;

use super::step;

/// Appends one verdict to `file` as a line `NN<TAB>pass|fail<TAB>seconds<TAB>message`, the
/// message with `\` and newlines escaped. The one writer of a results file: `lab/check` has
/// the verdicts it reaches before grading (no exercise file, a file that does not compile)
/// written through it too, with `exercise verdict`.
pub(crate) fn append_result(
    file: &Path,
    nn: &str,
    verdict: &Result<String, String>,
    seconds: f64,
) -> std::io::Result<()> {
    use std::io::Write as _;
    let (kind, message) = match verdict {
        Ok(summary) => ("pass", summary),
        Err(report) => ("fail", report),
    };
    let message = message.replace('\\', "\\\\").replace('\n', "\\n");
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(file)?;
    writeln!(f, "{nn}\t{kind}\t{seconds:.3}\t{message}")
}

/// Makes `file` an empty results file, and its directory if need be: `lab/check` starts
/// each check with it, so the file holds that check's verdicts only.
fn start_results(file: &Path) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(file, "")
}

/// `exercise verdict --results FILE --start` empties FILE; `exercise verdict --results FILE
/// NN MESSAGE` appends a failed verdict reached before grading, in 0 seconds. MESSAGE `-`
/// reads it from stdin (a compiler's messages can outgrow one argument), its trailing
/// newlines dropped.
pub(super) fn verdict_cmd(file: &Path, failed: Option<(&str, &str)>) -> Result<(), String> {
    let io = |e: std::io::Error| format!("{}: {e}", file.display());
    match failed {
        None => start_results(file).map_err(io),
        Some((nn, message)) => {
            let nn = step(nn)?.nn;
            let message = if message == "-" {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                    .map_err(|e| format!("the message on stdin: {e}"))?;
                text.trim_end_matches('\n').to_string()
            } else {
                message.to_string()
            };
            append_result(file, &nn, &Err(message), 0.0).map_err(io)
        }
    }
}

/// One verdict read back from a results file.
pub(crate) struct Verdict {
    pub(crate) nn: String,
    pub(crate) passed: bool,
    pub(crate) seconds: f64,
    pub(crate) message: String,
}

pub(crate) fn parse_results(text: &str) -> Result<Vec<Verdict>, String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let mut cols = line.splitn(4, '\t');
            let (nn, kind, seconds, message) = (cols.next(), cols.next(), cols.next(), cols.next());
            let (Some(nn), Some(kind @ ("pass" | "fail")), Some(seconds), Some(message)) = (nn, kind, seconds, message)
            else {
                return Err(format!("not a verdict line: {line:?}"));
            };
            let seconds = seconds.parse().map_err(|_| format!("not a number of seconds: {line:?}"))?;
            let mut unescaped = String::new();
            let mut chars = message.chars();
            while let Some(c) = chars.next() {
                match (c, c == '\\') {
                    (_, true) => match chars.next() {
                        Some('n') => unescaped.push('\n'),
                        Some(other) => unescaped.push(other),
                        None => unescaped.push('\\'),
                    },
                    (c, false) => unescaped.push(c),
                }
            }
            Ok(Verdict { nn: nn.to_string(), passed: kind == "pass", seconds, message: unescaped })
        })
        .collect()
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The verdicts as JUnit XML, the format GitHub Classroom's, Gradescope's and Jenkins's
/// JUnit readers take: one `<testcase>` per step checked, named by its binary; a failed
/// one carries a `<failure>` whose `message` is the report's first two lines (the run and
/// the first difference) and whose text is the whole report. `properties` (name, value)
/// say what was graded: the class grader's provenance; lab/check has none.
pub(crate) fn junit_xml(suite: &str, verdicts: &[Verdict], properties: &[(String, String)]) -> String {
    let failures = verdicts.iter().filter(|v| !v.passed).count();
    let total: f64 = verdicts.iter().map(|v| v.seconds).sum();
    let counts = format!("tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{total:.3}\"", verdicts.len());
    let mut xml = junit_head(suite, &counts, properties);
    for v in verdicts {
        let name = step(&v.nn).map_or(v.nn.clone(), |s| s.bin);
        let _ = write!(
            xml,
            "    <testcase classname=\"lab.check\" name=\"{}\" time=\"{:.3}\"",
            xml_escape(&name),
            v.seconds
        );
        if v.passed {
            let _ = writeln!(xml, "/>");
        } else {
            // The report's first two lines: which run, and the first difference.
            let first: Vec<&str> = v.message.lines().take(2).map(str::trim).collect();
            let first = first.join(" ");
            let _ = writeln!(xml, ">");
            let _ = writeln!(
                xml,
                "      <failure message=\"{}\" type=\"lab.check\">{}</failure>",
                xml_escape(&first),
                xml_escape(&v.message)
            );
            let _ = writeln!(xml, "    </testcase>");
        }
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

/// The XML declaration, `<testsuites>` and `<testsuite>` opened with `counts`, and the
/// properties.
fn junit_head(suite: &str, counts: &str, properties: &[(String, String)]) -> String {
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let suite = xml_escape(suite);
    let _ = writeln!(xml, "<testsuites name=\"{suite}\" {counts}>");
    let _ = writeln!(xml, "  <testsuite name=\"{suite}\" {counts}>");
    if !properties.is_empty() {
        let _ = writeln!(xml, "    <properties>");
        for (name, value) in properties {
            let _ = writeln!(xml, "      <property name=\"{}\" value=\"{}\"/>", xml_escape(name), xml_escape(value));
        }
        let _ = writeln!(xml, "    </properties>");
    }
    xml
}

/// JUnit XML for steps that were not graded: an `<error>` each, `message` its text. JUnit
/// readers count and show an error apart from a failure: the test could not be run, which
/// says nothing of the code under test.
pub(crate) fn junit_errors_xml(suite: &str, bins: &[String], message: &str, properties: &[(String, String)]) -> String {
    let counts = format!("tests=\"{n}\" failures=\"0\" errors=\"{n}\" time=\"0.000\"", n = bins.len());
    let mut xml = junit_head(suite, &counts, properties);
    for bin in bins {
        let _ = writeln!(xml, "    <testcase classname=\"lab.check\" name=\"{}\" time=\"0.000\">", xml_escape(bin));
        let _ = writeln!(xml, "      <error message=\"{0}\" type=\"lab.grade\">{0}</error>", xml_escape(message));
        let _ = writeln!(xml, "    </testcase>");
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

pub(super) fn junit_cmd(out: &Path, results: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(results).map_err(|e| format!("{}: {e}", results.display()))?;
    let verdicts = parse_results(&text)?;
    std::fs::write(out, junit_xml("lab/check", &verdicts, &[])).map_err(|e| format!("{}: {e}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_before_grading_are_written_in_the_graders_format() {
        let dir = std::env::temp_dir().join(format!("xtask-verdict-{}", std::process::id()));
        let file = dir.join("exercise/results.tsv");
        verdict_cmd(&file, None).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
        verdict_cmd(&file, Some(("1", "there is no exercises/01_open_device.rs yet"))).unwrap();
        let log = "error[E0425]: cannot find value `x`\n  --> src\\stages\\modify_qp_rtr.rs:3:5";
        verdict_cmd(&file, Some(("05", &format!("exercises/05_modify_qp_rtr.rs does not compile: {log}")))).unwrap();
        append_result(&file, "06", &Ok("2 runs".into()), 1.5).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.lines().next(), Some("01\tfail\t0.000\tthere is no exercises/01_open_device.rs yet"));
        let verdicts = parse_results(&text).unwrap();
        assert_eq!(verdicts.len(), 3);
        assert!(!verdicts[1].passed && verdicts[1].message.ends_with(log), "{:?}", verdicts[1].message);
        assert!(verdicts[2].passed && verdicts[2].seconds == 1.5);
        assert!(verdict_cmd(&file, Some(("99", "x"))).unwrap_err().contains("no step `99`"));
        verdict_cmd(&file, None).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
