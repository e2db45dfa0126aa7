//! The class grader (issues 40 and 44): a synthetic class, one hand-in of each kind (`cargo
//! xtask grade synth`: honest, wrong, refused, copied, and hostile — exec the reference, read
//! the answers, poison the cargo home, walk the filesystem, hoard memory, spin the compiler), a byte copy
//! of one of them, and one more handed in as a student does, `lab/submit --to` a git
//! remote (the reference's stage, which fails its student's variant), all graded by `lab/grade`: built on the host, run in one lab VM boot, each sealed.
//! Every verdict and flag must be the one intended — the forged all-pass self-check changes
//! nothing, no hostile hand-in changes a classmate's — and every report must be there:
//! JUnit with its provenance (parsed), the Moodle CSV (parsed), Gradescope's results.json
//! (a serde type holds its format: xtask's unit tests). Run it under the machine's VM lock:
//! `flock /tmp/vm.lock cargo test --test host_vms grade::`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.current_dir(root()).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_class_of_every_kind_grades_as_intended() {
    let dir = root().join("target/grade-test");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let handins = dir.join("handins");
    run(Command::new("cargo").args(["xtask", "grade", "synth"]).arg(&handins).arg("22"));
    // A copied hand-in: the same file as s02-holes', built once for both (run once per variant); an
    // untouched exercise, which no one copies, so not flagged.
    let copy = handins.join("s23-same-file");
    std::fs::create_dir_all(copy.join("exercises")).unwrap();
    for file in ["manifest.txt", "exercises/05_modify_qp_rtr.rs"] {
        std::fs::copy(handins.join("s02-holes").join(file), copy.join(file)).unwrap();
    }
    let mut intended = read(&handins.join("intended.tsv"));
    intended += "s23-same-file\tfail\ta hole is still empty\n";
    std::fs::write(handins.join("intended.tsv"), intended).unwrap();

    // A student's own hand-in, pushed: the reference's stage, in their exercises/ (it fails
    // the variant of their name, rc_pingpong's values where theirs are asked for, and is
    // flagged as the reference's copy).
    let remote = dir.join("remote.git");
    run(Command::new("git").args(["init", "--quiet", "--bare"]).arg(&remote));
    let mine = dir.join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::copy(root().join("src/stages/modify_qp_rtr.rs"), mine.join("05_modify_qp_rtr.rs")).unwrap();
    run(Command::new(root().join("lab/submit")).arg("--to").arg(&remote).env("LAB_EXERCISES", &mine));
    let account = run(Command::new("id").arg("-un")).trim().to_string();
    let pushed = run(Command::new("git").arg("-C").arg(&remote).args(["rev-parse", &format!("hand-in/{account}")]));
    let nothing = Command::new(root().join("lab/submit")).env("LAB_EXERCISES", dir.join("empty")).output().unwrap();
    assert!(!nothing.status.success(), "lab/submit handed in nothing");
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("nothing to hand in"));

    let class = dir.join("class");
    // The build-spin kind stops at its build's bound: 20 s, not the default minute.
    let text = run(Command::new(root().join("lab/grade"))
        .arg("--out")
        .arg(&class)
        .args(["--steps", "05", "--build-seconds", "20"])
        .arg(&handins)
        .arg(&remote));
    println!("{text}");
    run(Command::new("cargo").args(["xtask", "grade", "verify"]).arg(&class).arg(handins.join("intended.tsv")));
    let mine_results = read(&class.join(format!("results/{account}.tsv")));
    assert!(mine_results.starts_with("05\tfail\t"), "{mine_results}");
    assert!(mine_results.contains("(your variant's value)"), "{mine_results}");

    // The reports: JUnit with what was graded, the CSV, results.json.
    for student in ["s01-complete", "s11-forged", account.as_str()] {
        let junit = read(&class.join(format!("reports/junit/{student}.xml")));
        testkit::check_xml(&junit).unwrap_or_else(|e| panic!("{student}'s JUnit: {e}\n{junit}"));
        for property in ["student", "timestamp", "grader_version", "sha256:exercises/05_modify_qp_rtr.rs"] {
            assert!(junit.contains(&format!("<property name=\"{property}\"")), "{student}: no {property}\n{junit}");
        }
        assert!(class.join(format!("reports/gradescope/{student}/results.json")).is_file());
    }
    let forged = read(&class.join("reports/junit/s11-forged.xml"));
    assert!(forged.contains("failures=\"1\""), "the forged self-check counted:\n{forged}");
    // The copy's file is the `holes` one, built once for both; the report says so.
    let copied = read(&class.join("reports/junit/s23-same-file.xml"));
    let same = "<property name=\"same_file_as:exercises/05_modify_qp_rtr.rs\" value=\"s02-holes\"/>";
    assert!(copied.contains(same), "{copied}");
    let junit = read(&class.join(format!("reports/junit/{account}.xml")));
    assert!(junit.contains(&format!("<property name=\"commit\" value=\"{}\"/>", pushed.trim())), "{junit}");
    let flag = "<property name=\"flag:exercises/05_modify_qp_rtr.rs\" value=\"exercises/05_modify_qp_rtr.rs is token \
                for token the reference's src/stages/modify_qp_rtr.rs and the same as s12-copy's";
    assert!(junit.contains(flag), "{junit}");
    let csv = read(&class.join("reports/moodle.csv"));
    let rows: Vec<Vec<String>> = csv.lines().map(testkit::csv_fields).collect();
    assert_eq!(rows[0], ["username", "05_modify_qp_rtr", "total", "feedback"]);
    assert_eq!(rows.len(), 25, "a header and 24 students:\n{csv}");
    for row in &rows[1..] {
        assert_eq!(row.len(), 4, "{row:?}");
        // Only the complete answer passes: the copies of the stage fail their variants.
        let passes = row[0] == "s01-complete";
        assert_eq!(row[1], if passes { "1" } else { "0" }, "{row:?}");
    }

    // Graded students are not graded again.
    let again = run(Command::new(root().join("lab/grade"))
        .arg("--out")
        .arg(&class)
        .args(["--steps", "05"])
        .arg(&handins)
        .arg(&remote));
    assert!(again.contains("0 to grade"), "{again}");
}

/// `lab/grade --build-in-vm`: the files built in the lab VM (as where the host cannot make a
/// user namespace), each as the build's account, from the host's toolchain and registry
/// under root's home, which that account reaches only where the grader lends them.
/// Honest, wrong and uncompilable files, each graded as intended.
#[test]
fn a_class_built_in_the_vm_grades_as_intended() {
    let dir = root().join("target/grade-test-vm");
    let _ = std::fs::remove_dir_all(&dir);
    let handins = dir.join("handins");
    run(Command::new("cargo").args(["xtask", "grade", "synth"]).arg(&handins).arg("5"));
    let class = dir.join("class");
    let text = run(Command::new(root().join("lab/grade"))
        .arg("--out")
        .arg(&class)
        .args(["--steps", "05", "--build-in-vm"])
        .arg(&handins));
    println!("{text}");
    assert!(text.contains("5 files built"), "{text}");
    run(Command::new("cargo").args(["xtask", "grade", "verify"]).arg(&class).arg(handins.join("intended.tsv")));
}
