//! "What changed since the previous step": `book/src/generated/<bin>.diff` is the unified
//! diff of `steps/<base>.rs` → `steps/<bin>.rs`, the base being the step it is built on
//! (the previous one, unless `steps/list.txt`'s `base=` names another: 09 grows out of
//! 06, 10 out of 04), for every step after the first; `book/src/generated/<first bin>.rs` is the first
//! step's whole file, which has nothing to diff against.
//!
//! The diffs are what `diff -u --label steps/<base>.rs --label steps/<bin>.rs` prints (three
//! lines of context, no timestamps), so they read as any reader's `diff` would show them.

use std::path::Path;

use similar::TextDiff;
use testkit::Step;

use super::Generated;

/// The directory the diffs go to, relative to the project.
pub const DIR: &str = "book/src/generated";

/// The diffs and the first step's file, from the project at `root`.
pub fn generate(root: &Path, steps: &[Step]) -> Result<Generated, String> {
    let read = |bin: &str| {
        let rel = format!("steps/{bin}.rs");
        std::fs::read_to_string(root.join(&rel))
            .map(|text| (rel.clone(), without_anchors(&text)))
            .map_err(|e| format!("{rel}: {e}"))
    };
    let mut files = Vec::new();
    for step in steps {
        let (path, text) = read(&step.bin)?;
        match &step.base {
            None => files.push((format!("{}.rs", step.bin), text)),
            Some(base) => {
                let (base_path, base_text) = read(base)?;
                files.push((format!("{}.diff", step.bin), unified_diff(&base_path, &base_text, &path, &text)));
            }
        }
    }
    // Every file of the directory is one of these: a step that is gone leaves a stale file.
    Ok(Generated { dir: DIR, whole_dir: true, files })
}

/// `text` without its `// ANCHOR: x` / `// ANCHOR_END: x` lines: mdBook drops them from
/// the listings it includes, so the diffs drop them too and show only code. Every line
/// ends in a newline, as `grep` writes them.
pub fn without_anchors(text: &str) -> String {
    text.lines()
        .filter(|l| {
            let l = l.trim_start();
            !(l.starts_with("// ANCHOR: ") || l.starts_with("// ANCHOR_END: "))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `diff -u --label old_label --label new_label`'s output for two texts whose lines all end
/// in a newline; empty when they are equal.
pub fn unified_diff(old_label: &str, old: &str, new_label: &str, new: &str) -> String {
    TextDiff::from_lines(old, new).unified_diff().context_radius(3).header(old_label, new_label).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchor_lines_go_and_every_line_ends_in_a_newline() {
        let text = "a\n  // ANCHOR: new\nb\n// ANCHOR_END: new\n// ANCHOR is prose\nc";
        assert_eq!(without_anchors(text), "a\nb\n// ANCHOR is prose\nc\n");
    }

    #[test]
    fn the_diff_is_gnu_diff_u() {
        // What `diff -u --label a --label b` prints for these (GNU diffutils 3.8).
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n";
        let new = "0\n1\n2\n3\n4\n5\n6\n7\n8\nnine\n10\n11\n12\n";
        assert_eq!(
            unified_diff("a", old, "b", new),
            "--- a\n+++ b\n@@ -1,3 +1,4 @@\n+0\n 1\n 2\n 3\n@@ -6,7 +7,7 @@\n 6\n 7\n 8\n-9\n+nine\n 10\n 11\n 12\n"
        );
        assert_eq!(unified_diff("a", "x\n", "b", "y\n"), "--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n");
        assert_eq!(unified_diff("a", "", "b", "y\n"), "--- a\n+++ b\n@@ -0,0 +1 @@\n+y\n");
        assert_eq!(unified_diff("a", "x\n", "b", "x\n"), "");
    }

    #[test]
    fn each_step_is_diffed_against_its_base() {
        let root = std::env::temp_dir().join(format!("xtask-diffs-{}", std::process::id()));
        std::fs::create_dir_all(root.join("steps")).unwrap();
        for (bin, text) in
            [("01_a", "// ANCHOR: new\none\n// ANCHOR_END: new\n"), ("02_b", "one\ntwo\n"), ("03_c", "one\nthree\n")]
        {
            std::fs::write(root.join(format!("steps/{bin}.rs")), text).unwrap();
        }
        let steps = testkit::parse_steps("01_a alone\n02_b alone\n03_c alone base=01_a\n").unwrap();
        let generated = generate(&root, &steps).unwrap();
        assert_eq!(
            generated.files,
            [
                ("01_a.rs".to_string(), "one\n".to_string()),
                ("02_b.diff".into(), "--- steps/01_a.rs\n+++ steps/02_b.rs\n@@ -1 +1,2 @@\n one\n+two\n".into()),
                ("03_c.diff".into(), "--- steps/01_a.rs\n+++ steps/03_c.rs\n@@ -1 +1,2 @@\n one\n+three\n".into()),
            ]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
