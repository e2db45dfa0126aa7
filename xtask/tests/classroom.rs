//! lab/ci/github-classroom.yml's commands as GitHub Classroom's command grader runs them:
//! `sh -c COMMAND` with PATH and HOME only (classroom-resources/autograding-command-grader,
//! src/main.js: `const env = {PATH, …, HOME}`, handed to execSync), the `${{ … }}`
//! expressions already written in by Actions. No VM: the reference is a copy of
//! lab/ci/grade-push and lab/common.sh whose lab/setup does nothing and whose lab/grade
//! records how it was called and reports 05 passed, every other step failed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The stand-in for lab/grade: its arguments to `args.txt`, then a JUnit report per
/// hand-in of the steps asked (`--steps 05,06`), as xtask writes them.
const FAKE_GRADE: &str = r#"#!/bin/sh
set -e
echo "$*" >"$(dirname "$0")/../args.txt"
out=$2 steps=$4 handins=$5
mkdir -p "$out/reports/junit"
for dir in "$handins"/*/; do
    name=$(basename "$dir")
    ls "$dir/exercises" >"$(dirname "$0")/../files-$name.txt"
    {
        echo '<testsuites>'
        for nn in $(echo "$steps" | tr , ' '); do
            if [ "$nn" = 05 ]; then
                echo "    <testcase classname=\"lab.check\" name=\"${nn}_step\" time=\"1.000\"/>"
            else
                echo "    <testcase classname=\"lab.check\" name=\"${nn}_step\" time=\"1.000\">"
                echo "      <failure message=\"a hole is still empty\" type=\"lab.check\">x</failure>"
                echo '    </testcase>'
            fi
        done
        echo '</testsuites>'
    } >"$out/reports/junit/$name.xml"
done
"#;

fn sh(command: &str, dir: &Path, home: &Path) -> (bool, String) {
    let out = Command::new("/bin/sh")
        .args(["-c", command])
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("HOME", home)
        .output()
        .unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn the_classroom_template_grades_the_chosen_steps_and_names_the_student_with_only_path_and_home() {
    let root = std::env::temp_dir().join(format!("xtask-classroom-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (reference, checkout, home) = (root.join("reference"), root.join("checkout"), root.join("home"));
    for dir in [reference.join("lab/ci"), checkout.join("exercises"), home.clone()] {
        std::fs::create_dir_all(dir).unwrap();
    }
    for file in ["lab/ci/grade-push", "lab/common.sh"] {
        std::fs::copy(project().join(file), reference.join(file)).unwrap();
    }
    std::fs::write(reference.join("lab/setup"), "#!/bin/sh\n").unwrap();
    std::fs::write(reference.join("lab/grade"), FAKE_GRADE).unwrap();
    let chmod =
        Command::new("chmod").arg("+x").args([reference.join("lab/setup"), reference.join("lab/grade")]).status();
    assert!(chmod.unwrap().success());
    std::fs::write(checkout.join("exercises/05_modify_qp_rtr.rs"), "fn x() {}\n").unwrap();

    // The template, with STEPS set as an instructor would, as Actions hands it on.
    let yml = std::fs::read_to_string(project().join("lab/ci/github-classroom.yml")).unwrap();
    let yml = yml.replace("STEPS: all ", "STEPS: 05,06 ");
    let steps = yml.lines().find_map(|l| l.trim().strip_prefix("STEPS: ")).unwrap().split_whitespace().next().unwrap();
    let commands: Vec<String> = yml
        .lines()
        .filter_map(|l| l.trim().strip_prefix("command: "))
        .map(|c| {
            c.replace("${{ github.actor }}", "ada-l")
                .replace("${{ env.STEPS }}", steps)
                .replace("/reference/", &format!("{}/", reference.display()))
        })
        .collect();
    assert_eq!(commands.len(), 13, "the grading, then one test per step: {commands:?}");
    assert!(!commands.iter().any(|c| c.contains('$')), "nothing left for the stripped environment: {commands:?}");

    let (ok, said) = sh(&commands[0], &checkout, &home);
    assert!(!ok, "06 fails, so the grading's own test does: {said}");
    let args = std::fs::read_to_string(reference.join("args.txt")).unwrap();
    assert!(args.contains(" --steps 05,06 "), "{args}");
    assert_eq!(std::fs::read_to_string(reference.join("files-ada-l.txt")).unwrap(), "05_modify_qp_rtr.rs\n");
    assert!(said.contains("the report of ada-l is"), "{said}");

    // One test per step, each with its points: 05 passes, 06 fails, a step not graded fails.
    let verdicts: Vec<bool> = commands[1..].iter().map(|c| sh(c, &checkout, &home).0).collect();
    let passed: Vec<usize> = verdicts.iter().enumerate().filter(|(_, ok)| **ok).map(|(i, _)| i + 1).collect();
    assert_eq!(passed, [5], "{verdicts:?}");
    let (_, said) = sh(&commands[6], &checkout, &home);
    assert!(said.contains("a hole is still empty"), "{said}");
    let points = yml.lines().filter(|l| l.trim() == "max-score: 10").count();
    assert_eq!(points, 12, "each step's test carries its points");
    std::fs::remove_dir_all(&root).unwrap();
}
