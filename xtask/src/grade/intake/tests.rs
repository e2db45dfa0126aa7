//! `grade intake`'s tests: hand-ins through each channel, taken or refused.

use super::*;

/// A fresh directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(test: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("xtask-intake-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn sh(dir: &Path, script: &str) {
    let out = Command::new("sh").arg("-ec").arg(script).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
}

fn origin(class: &Path, name: &str) -> String {
    std::fs::read_to_string(class.join("origin").join(name)).unwrap_or_default()
}

fn refused(class: &Path) -> String {
    std::fs::read_to_string(class.join("reports/refused.txt")).unwrap()
}

#[test]
fn names_follow_one_rule() {
    assert_eq!(archive_name("hand-in-alice.tar.gz"), Ok("alice".into()));
    assert_eq!(archive_name("bob_2.tar.gz"), Ok("bob_2".into()));
    assert_eq!(branch_name("hand-in/carol-x"), Ok("carol-x".into()));
    assert_eq!(checked(&"a".repeat(64)), Ok("a".repeat(64)));
    for bad in ["hand-in-.tar.gz", "hand-in-al ice.tar.gz", "hand-in-_x.tar.gz", "hand-in-é.tar.gz", "alice.zip"] {
        assert!(archive_name(bad).is_err(), "{bad}");
    }
    assert!(archive_name(&format!("{}.tar.gz", "a".repeat(65))).unwrap_err().contains("at most 64 bytes"));
    assert!(branch_name("hand-in/zzz/alice").unwrap_err().contains("no `/`"));
    assert!(branch_name("hand-in/").is_err());
}

/// A class and a directory `hand-ins/` of a regular hand-in `alice/`, and what `script`
/// makes there next to it.
fn hand_ins(test: &str, script: &str) -> (Scratch, PathBuf, PathBuf) {
    let root = scratch(test);
    sh(&root.0, "mkdir -p hand-ins/alice/exercises && echo fn >hand-ins/alice/exercises/05_modify_qp_rtr.rs");
    sh(&root.0.join("hand-ins"), script);
    let (class, dir) = (root.0.join("class"), root.0.join("hand-ins"));
    (root, class, dir)
}

#[test]
fn archives_and_directories_are_taken_with_the_time_received() {
    let (_root, class, dir) = hand_ins(
        "taken",
        "tar -czf hand-in-bob.tar.gz -C alice exercises
         touch -d @1795734000 hand-in-bob.tar.gz alice",
    );
    intake_cmd(&class, None, None, &[dir.display().to_string()]).unwrap();
    for name in ["alice", "bob"] {
        assert!(class.join("incoming").join(name).join("exercises/05_modify_qp_rtr.rs").is_file(), "{name}");
        assert!(origin(&class, name).contains("received\t2026-11-26T23:00:00Z\n"), "{}", origin(&class, name));
    }
    assert!(origin(&class, "bob").starts_with(&format!("source\t{}\n", dir.join("hand-in-bob.tar.gz").display())));
    assert_eq!(refused(&class), "");
    // Graded students are kept as they are.
    std::fs::write(class.join("results/alice.tsv"), "").unwrap();
    std::fs::remove_dir_all(class.join("incoming/alice/exercises")).unwrap();
    intake_cmd(&class, None, None, &[dir.display().to_string()]).unwrap();
    assert!(!class.join("incoming/alice/exercises").exists());
}

#[test]
fn a_second_hand_in_of_a_student_is_refused() {
    let (_root, class, dir) = hand_ins(
        "twice",
        "tar -czf hand-in-alice.tar.gz -C alice . && mkdir ../more && cp hand-in-alice.tar.gz ../more/alice.tar.gz",
    );
    std::fs::write(dir.join("alice/exercises/first"), "").unwrap();
    let more = dir.parent().unwrap().join("more");
    intake_cmd(&class, None, None, &[dir.display().to_string(), more.display().to_string()]).unwrap();
    let list = refused(&class);
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(list.contains(&format!(
        "a second hand-in of alice, refused: the one from {} is theirs",
        dir.join("alice").display()
    )));
    assert!(class.join("incoming/alice/exercises/first").exists());
}

/// Takes the hand-ins in `dir` and asserts that `name`'s was refused, the reason in its
/// origin and the list holding `why`.
fn assert_refused(class: &Path, dir: &Path, name: &str, why: &str) {
    intake_cmd(class, None, None, &[dir.display().to_string()]).unwrap();
    let origin = origin(class, name);
    assert!(origin.contains("\nrefused\t") && origin.contains(why), "{origin}");
    assert!(refused(class).contains(why), "{}", refused(class));
    assert_eq!(std::fs::read_dir(class.join("incoming").join(name)).unwrap().count(), 0);
}

#[test]
fn a_symlinked_exercises_directory_is_refused() {
    // The link, then a file through it: the grader reading exercises/ would read (GNU
    // tar, extracting, might write) where the link points, outside the hand-in.
    let (_root, class, dir) = hand_ins(
        "symlink",
        "mkdir ../out bob && ln -s \"$(dirname \"$PWD\")/out\" bob/exercises && tar -cf bob.tar -C bob exercises
         rm -r bob && tar -rf bob.tar -C alice exercises/05_modify_qp_rtr.rs && gzip -c bob.tar >hand-in-bob.tar.gz
         rm bob.tar",
    );
    assert_refused(&class, &dir, "bob", "out: a symbolic link");
    assert!(!dir.parent().unwrap().join("out/05_modify_qp_rtr.rs").exists());
    assert!(class.join("incoming/alice/exercises").is_dir());
    // Unpacked, the same.
    let (_root, class, dir) = hand_ins("symlink-dir", "mkdir bob && ln -s /etc bob/exercises");
    assert_refused(&class, &dir, "bob", "exercises: a symbolic link");
}

#[test]
fn a_refused_hand_in_is_its_students_failure_with_the_reason() {
    let (_root, class, dir) = hand_ins("prepare", "mkdir bob && ln -s /etc bob/exercises");
    intake_cmd(&class, None, None, &[dir.display().to_string()]).unwrap();
    super::super::prepare_cmd(&class, "05").unwrap();
    let handin = std::fs::read_to_string(class.join("students/bob/handin.tsv")).unwrap();
    assert!(handin.contains("\nhandin_error\texercises: a symbolic link;"), "{handin}");
    assert!(!handin.contains("manifest_error"), "a refused hand-in is not read: {handin}");
    let alice = std::fs::read_to_string(class.join("students/alice/handin.tsv")).unwrap();
    assert!(alice.contains("file\t05_modify_qp_rtr\t") && !alice.contains("handin_error"), "{alice}");
}

#[test]
fn a_hard_link_is_refused() {
    let (_root, class, dir) = hand_ins(
        "hardlink",
        "mkdir bob && echo x >bob/a && ln bob/a bob/b && tar -czf hand-in-bob.tar.gz -C bob a b && rm -r bob",
    );
    assert_refused(&class, &dir, "bob", "b link to a: a hard link");
    let (_root, class, dir) = hand_ins("hardlink-dir", "mkdir bob && echo x >bob/a && ln bob/a bob/b");
    assert_refused(&class, &dir, "bob", "a: a hard link (a file of 2 names)");
}

#[test]
fn members_outside_the_hand_in_are_refused() {
    let (_root, class, dir) =
        hand_ins("dotdot", "mkdir bob && echo x >x && tar -czPf hand-in-bob.tar.gz -C bob ../x && rm -r bob x");
    assert_refused(&class, &dir, "bob", "../x: a path outside the hand-in");
    let (_root, class, dir) =
        hand_ins("absolute", "echo x >../x && tar -czPf hand-in-bob.tar.gz \"$(dirname \"$PWD\")/x\"");
    assert_refused(&class, &dir, "bob", "an absolute path");
}

#[test]
fn a_name_that_breaks_the_rule_is_refused_and_the_others_taken() {
    let long = "a".repeat(65);
    let (_root, class, dir) =
        hand_ins("names", &format!("mkdir -p _bob {long} && tar -czf hand-in-c.d.tar.gz -C alice ."));
    intake_cmd(&class, None, None, &[dir.display().to_string()]).unwrap();
    let list = refused(&class);
    assert_eq!(list.lines().count(), 3, "{list}");
    assert!(list.lines().all(|l| l.contains(NAME_RULE)), "{list}");
    let taken: Vec<_> = std::fs::read_dir(class.join("incoming")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(taken, ["alice"]);
}

#[test]
fn branches_are_taken_by_their_one_name_with_commit_and_time() {
    let scratch = scratch("git");
    let root = &scratch.0;
    sh(
        root,
        "git init --quiet repo && cd repo
         git() { command git -c user.name=t -c user.email=t@t -c commit.gpgsign=false \"$@\"; }
         mkdir exercises && echo alice >exercises/05_modify_qp_rtr.rs && git add . && git commit -qm a
         git branch hand-in/alice
         echo zzz >exercises/05_modify_qp_rtr.rs && git commit -qam z && git branch hand-in/zzz/alice
         git checkout -q -b hand-in/bob hand-in/alice && ln -s /etc link && git add link && git commit -qm l",
    );
    let (class, remote) = (root.join("class"), root.join("repo").display().to_string());
    intake_cmd(&class, None, None, std::slice::from_ref(&remote)).unwrap();
    let alice = class.join("incoming/alice/exercises/05_modify_qp_rtr.rs");
    assert_eq!(std::fs::read_to_string(&alice).unwrap(), "alice\n");
    let origin_alice = origin(&class, "alice");
    let commit = git(&root.join("repo"), &["rev-parse", "hand-in/alice"]).unwrap().trim().to_string();
    let head = format!("source\t{remote} hand-in/alice\ncommit\t{commit}\nreceived\t20");
    assert!(origin_alice.starts_with(&head), "{origin_alice}");
    assert!(refused(&class).contains("hand-in/zzz/alice: a hand-in branch is hand-in/NAME"));
    assert_refused(&class, Path::new(&remote), "bob", "link: a symbolic link");
    // The time received is the first fetch's, not the last one's.
    let mirror = std::fs::read_dir(&class)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "git"))
        .unwrap();
    std::fs::write(mirror.join("received").join(&commit), "2000-01-01T00:00:00Z\n").unwrap();
    intake_cmd(&class, None, None, &[remote]).unwrap();
    assert!(origin(&class, "alice").contains("received\t2000-01-01T00:00:00Z\n"));
}
