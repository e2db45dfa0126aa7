//! The crate a student's stage is built in.

use std::path::{Path, PathBuf};

/// What the copy links besides `src/`: the step binaries.
const LINKED: [&str; 1] = ["steps"];

/// The tables of the project's manifest the copy leaves out: the tests' dependencies and
/// targets. The copy builds the library and one step, and cargo resolves dev-dependencies
/// even for that; testkit's dependency on the crate, by its package name, would find no
/// such package in the copy. The profiles stay: with the project's profiles and features,
/// the copy's dependencies are the very builds `cargo build --bins` made in the project's
/// target directory, which the copy shares — an exercise's first check compiles the crate,
/// not its dependencies again.
const LEFT_OUT: [&str; 2] = ["[dev-dependencies]", "[[test]]"];

/// The name of step `bin` built from a student's file. Copies and project share one target
/// directory, so the copy's steps must not be uplifted to `target/debug/<bin>` over the
/// reference's.
pub(super) fn exercise_bin(bin: &str) -> String {
    format!("exercise-{bin}")
}

/// A copy of the crate at `project` whose `stage_file` (`src/stages/<stage>.rs`) is the
/// student's file, in `target/exercise/<bin>`: every other file a symlink to the real one,
/// so the copy follows the project. The copies build in the project's target directory, so
/// a check after an edit rebuilds only the library and the step; their steps are named by
/// [`exercise_bin`]. Each copy is a package of its own
/// name (cargo would otherwise take the copies for one package and reuse one copy's
/// library for another's) whose library keeps the name rdma_dissect. The student's file is
/// copied, not linked, whenever it changed: a new mtime is what tells cargo to rebuild,
/// whichever file LAB_EXERCISES points at. Files that have not changed are not rewritten,
/// so cargo rebuilds nothing for them.
pub(super) fn exercise_crate(
    project: &Path,
    target: &Path,
    bin: &str,
    stage_file: &str,
    student: &Path,
) -> Result<PathBuf, String> {
    let krate = target.join("exercise").join(bin);
    std::fs::create_dir_all(krate.join("src/stages")).map_err(io_error(&krate))?;
    // The copy is a workspace of its own: the project's [workspace] without its members,
    // keeping [workspace.lints].
    let manifest = project.join("Cargo.toml");
    let mut toml = String::new();
    let (mut left_out, mut in_bin) = (false, false);
    for line in std::fs::read_to_string(&manifest).map_err(io_error(&manifest))?.lines() {
        if line.starts_with('[') {
            left_out = LEFT_OUT.iter().any(|table| line.starts_with(table));
            in_bin = line == "[[bin]]";
        }
        if left_out {
            continue;
        }
        if line == "name = \"rdma-dissect\"" {
            toml += &format!("name = \"rdma-dissect-exercise-{bin}\"\n");
        } else if let Some(name) = line.strip_prefix("name = \"").and_then(|n| n.strip_suffix('"')).filter(|_| in_bin) {
            toml += &format!("name = \"{}\"\n", exercise_bin(name));
        } else if !line.starts_with("members = ") {
            toml += &format!("{line}\n");
        }
    }
    toml += "\n# lab/check: a copy for one exercise.\n[lib]\nname = \"rdma_dissect\"\npath = \"src/lib.rs\"\n";
    write_if_changed(&krate.join("Cargo.toml"), toml.as_bytes())?;
    let lock = project.join("Cargo.lock");
    write_if_changed(&krate.join("Cargo.lock"), &std::fs::read(&lock).map_err(io_error(&lock))?)?;
    for name in LINKED {
        link(&project.join(name), &krate.join(name))?;
    }
    let src = project.join("src");
    for entry in std::fs::read_dir(&src).map_err(io_error(&src))? {
        let name = entry.map_err(io_error(&src))?.file_name();
        if name != "stages" {
            link(&src.join(&name), &krate.join("src").join(&name))?;
        }
    }
    let stages = project.join("src/stages");
    for entry in std::fs::read_dir(&stages).map_err(io_error(&stages))? {
        let name = entry.map_err(io_error(&stages))?.file_name();
        if Path::new(&name).extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let copy = krate.join("src/stages").join(&name);
        if Path::new("src/stages").join(&name) == Path::new(stage_file) {
            if copy.is_symlink() {
                std::fs::remove_file(&copy).map_err(io_error(&copy))?;
            }
            if std::fs::read(student).ok() != std::fs::read(&copy).ok() {
                std::fs::copy(student, &copy).map_err(io_error(student))?;
            }
        } else {
            link(&stages.join(&name), &copy)?;
        }
    }
    Ok(krate)
}

/// The tables of a manifest, each its header line and the lines up to the next header
/// (the lines before the first header are a table of their own, with an empty header).
fn tables(manifest: &str) -> Vec<(String, Vec<&str>)> {
    let mut tables: Vec<(String, Vec<&str>)> = vec![(String::new(), vec![])];
    for line in manifest.lines() {
        if line.starts_with('[') {
            tables.push((line.to_string(), vec![]));
        }
        tables.last_mut().expect("one table at least").1.push(line);
    }
    tables
}

/// The workspace a class is built in (`cargo xtask grade`): a crate per graded step, whose
/// builds share their dependencies. Its manifest is the
/// project's `[workspace…]` and `[profile…]` tables (profiles and lints are a workspace's,
/// not a member's) with `members` the crates given, relative to `build`.
pub(crate) fn class_workspace(project: &Path, build: &Path, members: &[String]) -> Result<(), String> {
    let manifest = project.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(io_error(&manifest))?;
    let mut toml =
        String::from("# cargo xtask grade: every student's crates, built in one run.\n[workspace]\nresolver = \"2\"\n");
    toml += "members = [\n";
    for m in members {
        toml += &format!("    \"{m}\",\n");
    }
    toml += "]\n";
    for (header, lines) in tables(&text) {
        // Not the project's optimised packages (`[profile.dev.package.regex-…]`): they are
        // for its tools, and here only bindgen, in ibverbs-sys's build script, would use them.
        let tools_only = header.starts_with("[profile.dev.package.");
        if header.starts_with("[workspace.") || (header.starts_with("[profile") && !tools_only) {
            toml += &format!("\n{}\n", lines.join("\n").trim_end());
        }
    }
    if !text.lines().any(|l| l == "[profile.dev]") {
        // A step's crate is built once per different file, each build but the stage file
        // the same as the last: incremental compilation reuses what the stage does not
        // touch. No debugger to feed.
        toml += "\n[profile.dev]\ndebug = 0\nincremental = true\n";
    }
    std::fs::create_dir_all(build).map_err(io_error(build))?;
    write_if_changed(&build.join("Cargo.toml"), toml.as_bytes())?;
    let lock = project.join("Cargo.lock");
    let copy = build.join("Cargo.lock");
    if !copy.exists() {
        std::fs::copy(&lock, &copy).map_err(io_error(&lock))?;
    }
    Ok(())
}

/// The crate of a class's workspace that builds step `bin`, at `krate`: a member of it (no
/// `[workspace]`, `[profile]` or tests' tables), with step `bin` its one binary, the package
/// and binary named after `prefix` (`grade-`), so they do not take the reference's names in
/// the one target directory. With `hollow` (the exercise, holes and all: the reference's
/// answer is not in it) as its library's `stage_file`, the student's file, at `student` (an
/// absolute path), is a module of the binary, which uses it in place of the library's: a
/// student's build compiles the binary, not the library, which is built once, on the host.
/// Without, the student's file is to be the library's `stage_file` (`student` is that
/// path). Every file is a copy, not a link: the grader hides the project's sources from the
/// students' code in the lab VM, so the copy must not need them.
pub(crate) fn class_crate(
    project: &Path,
    krate: &Path,
    prefix: &str,
    bin: &str,
    stage_file: &str,
    hollow: Option<&str>,
    student: &Path,
) -> Result<(), String> {
    let manifest = project.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(io_error(&manifest))?;
    let mut toml = String::new();
    let mut step_file = None;
    for (header, lines) in tables(&text) {
        let member_of_class = header.starts_with("[workspace") || header.starts_with("[profile");
        // Of the steps, only the one graded: the others would be built for nothing.
        let other_step = header == "[[bin]]" && !lines.contains(&format!("name = \"{bin}\"").as_str());
        if member_of_class || other_step || LEFT_OUT.iter().any(|t| header.starts_with(t)) {
            continue;
        }
        for line in lines {
            let name = line.strip_prefix("name = \"").and_then(|n| n.strip_suffix('"'));
            if header == "[[bin]]" {
                step_file = step_file.or(line.strip_prefix("path = \"").and_then(|p| p.strip_suffix('"')));
            }
            match name {
                Some("rdma-dissect") => toml += &format!("name = \"rdma-dissect-{prefix}{bin}\"\n"),
                Some(name) if header == "[[bin]]" => toml += &format!("name = \"{prefix}{name}\"\n"),
                _ => toml += &format!("{line}\n"),
            }
        }
    }
    let step_file = step_file.ok_or_else(|| format!("{}: no [[bin]] `{bin}` with a path", manifest.display()))?;
    toml += "\n[lib]\nname = \"rdma_dissect\"\npath = \"src/lib.rs\"\n";
    if krate.exists() {
        std::fs::remove_dir_all(krate).map_err(io_error(krate))?;
    }
    std::fs::create_dir_all(krate).map_err(io_error(krate))?;
    std::fs::write(krate.join("Cargo.toml"), toml).map_err(io_error(krate))?;
    for dir in LINKED.iter().chain(&["src"]) {
        copy_tree(&project.join(dir), &krate.join(dir))?;
    }
    let Some(hollow) = hollow else { return Ok(()) };
    let stage = krate.join(stage_file);
    std::fs::write(&stage, hollow).map_err(io_error(&stage))?;
    let dir = student.parent().ok_or_else(|| format!("{}: not a file's path", student.display()))?;
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    // The step's own code, unchanged but for where it takes the stage from: `crate::`
    // paths in the student's file reach the library through the glob.
    let module = Path::new(stage_file).file_stem().and_then(|m| m.to_str()).ok_or("a stage file is NAME.rs")?;
    let path = student
        .to_str()
        .filter(|p| !p.contains(['"', '\\']))
        .ok_or_else(|| format!("{}: a path with `\"` or `\\` cannot be a module's", student.display()))?;
    let step = krate.join(step_file);
    let code = std::fs::read_to_string(&step).map_err(io_error(&step))?;
    // Every stage path of the step goes through the binary's `stages` below, the library's
    // stages but for the student's, which its own module shadows: a grouped import
    // (`stages::{alloc_pd::alloc_pd, …}`) as well as a path naming the module.
    let code = code.replace("rdma_dissect::stages::", "crate::stages::");
    let wrapper = format!(
        "\n// cargo xtask grade: the student's stage, in place of the library's.\n\
         #[allow(unused_imports)]\nuse rdma_dissect::*;\n\
         #[allow(dead_code, unused_imports)]\nmod stages {{\n    pub use rdma_dissect::stages::*;\n    \
         #[path = \"{path}\"]\n    pub mod {module};\n}}\n"
    );
    std::fs::write(&step, code + &wrapper).map_err(io_error(&step))
}

/// `cp -r from to` for a tree of directories and regular files (symlinks are followed).
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(io_error(to))?;
    for entry in std::fs::read_dir(from).map_err(io_error(from))? {
        let path = entry.map_err(io_error(from))?.path();
        let dest = to.join(path.file_name().expect("an entry has a name"));
        if path.is_dir() {
            copy_tree(&path, &dest)?;
        } else {
            std::fs::copy(&path, &dest).map_err(io_error(&path))?;
        }
    }
    Ok(())
}

/// An I/O error as a message naming the file.
fn io_error(path: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// Writes `bytes` to `path` unless it holds them already (its mtime then stays).
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if std::fs::read(path).ok().as_deref() == Some(bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).map_err(io_error(path))
}

/// `ln -sfn to at`: `at` becomes a symlink to `to`, whatever file or link was there.
fn link(to: &Path, at: &Path) -> Result<(), String> {
    if std::fs::read_link(at).is_ok_and(|old| old == to) {
        return Ok(());
    }
    if at.symlink_metadata().is_ok() {
        std::fs::remove_file(at).map_err(io_error(at))?;
    }
    std::os::unix::fs::symlink(to, at).map_err(|e| format!("{} → {}: {e}", at.display(), to.display()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_exercise_crate_is_the_project_but_for_the_students_stage() {
        let tmp = std::env::temp_dir().join(format!("xtask-exercise-crate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let (project, target) = (tmp.join("project"), tmp.join("target"));
        for dir in ["src/stages", "src/breakit", "steps", "tests", "examples", "testkit", "xtask"] {
            std::fs::create_dir_all(project.join(dir)).unwrap();
        }
        let toml = "[package]\nname = \"rdma-dissect\"\n\n[workspace]\nmembers = [\"testkit\", \"xtask\"]\n\n\
                    [dev-dependencies]\ntestkit = { path = \"testkit\" }\n\n[[test]]\nname = \"t\"\n\n\
                    [[bin]]\nname = \"02_b\"\npath = \"steps/02_b.rs\"\n\n\
                    [profile.dev.package.regex-syntax]\nopt-level = 3\n";
        for (file, text) in [
            ("Cargo.toml", toml),
            ("Cargo.lock", "# lock\n"),
            ("src/lib.rs", "pub mod stages;\n"),
            ("src/stages/mod.rs", "pub mod a;\npub mod b;\n"),
            ("src/stages/a.rs", "// a\n"),
            ("src/stages/b.rs", "// b\n"),
            ("src/stages/notes.txt", "not a stage\n"),
            ("student.rs", "// mine\n"),
        ] {
            std::fs::write(project.join(file), text).unwrap();
        }
        let student = project.join("student.rs");
        let krate = exercise_crate(&project, &target, "02_b", "src/stages/b.rs", &student).unwrap();
        assert_eq!(krate, target.join("exercise/02_b"));
        assert_eq!(
            std::fs::read_to_string(krate.join("Cargo.toml")).unwrap(),
            "[package]\nname = \"rdma-dissect-exercise-02_b\"\n\n[workspace]\n\n\
             [[bin]]\nname = \"exercise-02_b\"\npath = \"steps/02_b.rs\"\n\n\
             [profile.dev.package.regex-syntax]\nopt-level = 3\n\n\
             # lab/check: a copy for one exercise.\n[lib]\nname = \"rdma_dissect\"\npath = \"src/lib.rs\"\n"
        );
        assert_eq!(std::fs::read_to_string(krate.join("Cargo.lock")).unwrap(), "# lock\n");
        for left_out in ["tests", "examples", "testkit", "xtask"] {
            assert!(!krate.join(left_out).exists(), "{left_out}: the tests' part of the package");
        }
        for linked in ["steps", "src/lib.rs", "src/breakit", "src/stages/mod.rs", "src/stages/a.rs"] {
            assert_eq!(std::fs::read_link(krate.join(linked)).unwrap(), project.join(linked), "{linked}");
        }
        let stage = krate.join("src/stages/b.rs");
        assert!(!stage.is_symlink() && std::fs::read_to_string(&stage).unwrap() == "// mine\n");
        assert!(!krate.join("src/stages/notes.txt").exists(), "only the .rs files of src/stages/");
        // Again, unchanged: nothing is rewritten, so cargo has nothing to rebuild.
        let mtime = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
        let (toml_mtime, stage_mtime) = (mtime(&krate.join("Cargo.toml")), mtime(&stage));
        std::thread::sleep(Duration::from_millis(20));
        exercise_crate(&project, &target, "02_b", "src/stages/b.rs", &student).unwrap();
        assert_eq!((mtime(&krate.join("Cargo.toml")), mtime(&stage)), (toml_mtime, stage_mtime));
        // The student's file changed: its copy follows.
        std::fs::write(&student, "// mine, better\n").unwrap();
        exercise_crate(&project, &target, "02_b", "src/stages/b.rs", &student).unwrap();
        assert_eq!(std::fs::read_to_string(&stage).unwrap(), "// mine, better\n");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
