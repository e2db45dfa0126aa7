//! The steps are one ordered list, and everything hangs off it: each step has its
//! `[[bin]]`, its `steps/` file with `// ANCHOR: new`, its stage module with
//! `// ANCHOR: stage` and a C reference, and its snapshot files. Runs on any host.

use std::fs;
use std::path::{Path, PathBuf};

/// (bin, stage module) in order: the project's one list of steps, which every other list
/// (Cargo.toml's `[[bin]]`s, SUMMARY.md, the snapshots) is checked against.
const STEPS: [(&str, &str); 9] = [
    ("01_open_device", "open_device"),
    ("02_alloc_pd", "alloc_pd"),
    ("03_reg_mr", "reg_mr"),
    ("04_create_qp", "create_qp"),
    ("05_modify_qp_rtr", "modify_qp_rtr"),
    ("06_modify_qp_rts", "modify_qp_rts"),
    ("07_post_send", "post_send"),
    ("08_poll_cq", "poll_cq"),
    ("09_rdma_write", "rdma_write"),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: impl AsRef<Path>) -> String {
    let path = root().join(path);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `ANCHOR: x` has an `ANCHOR_END: x` after it, and the region holds some code.
fn assert_anchor(file: &str, text: &str, name: &str) {
    let start = format!("// ANCHOR: {name}\n");
    let end = format!("// ANCHOR_END: {name}\n");
    let s = text.find(&start).unwrap_or_else(|| panic!("{file}: no `// ANCHOR: {name}`"));
    let e = text.find(&end).unwrap_or_else(|| panic!("{file}: no `// ANCHOR_END: {name}`"));
    assert!(s < e, "{file}: ANCHOR_END: {name} before its ANCHOR");
    let body = &text[s + start.len()..e];
    assert!(body.lines().any(|l| !l.trim().is_empty() && !l.contains("ANCHOR")), "{file}: anchor {name} is empty");
}

#[test]
fn every_step_has_its_bin_file_stage_and_snapshots() {
    let manifest = read("Cargo.toml");
    let stages_mod = read("src/stages/mod.rs");
    for (n, (bin, module)) in STEPS.iter().enumerate() {
        let step = format!("steps/{bin}.rs");
        assert!(
            manifest.contains(&format!("name = \"{bin}\"\npath = \"{step}\"")),
            "Cargo.toml has no [[bin]] {bin} at {step}"
        );
        let step_text = read(&step);
        assert_anchor(&step, &step_text, "new");
        assert!(step_text.contains(&format!("stages::{module}")), "{step} does not use stage {module}");

        let stage = format!("src/stages/{module}.rs");
        let stage_text = read(&stage);
        assert_anchor(&stage, &stage_text, "stage");
        assert!(stage_text.starts_with(&format!("//! Stage {:02}:", n + 1)), "{stage}: doc must start `//! Stage {:02}:`", n + 1);
        assert!(stage_text.contains("C reference:"), "{stage}: doc must name its rc_pingpong.c counterpart");
        assert!(stages_mod.contains(&format!("pub mod {module};")), "src/stages/mod.rs lacks {module}");

        let snaps: Vec<String> = if n < 4 {
            vec![format!("steps__{bin}.snap")]
        } else {
            vec![format!("steps__{bin}-server.snap"), format!("steps__{bin}-client.snap")]
        };
        for snap in snaps {
            assert!(root().join("tests/snapshots").join(&snap).is_file(), "missing tests/snapshots/{snap}");
        }
    }
}

#[test]
fn steps_call_the_connection_stages_in_order() {
    // Stages 01-06 build the connection every later step needs, each through one call named
    // after its module; 07-09 then use the connection in their own ways (08 posts its
    // receives through `prepare`, 09 replaces the ping-pong).
    for (n, (bin, _)) in STEPS.iter().enumerate() {
        let text = read(format!("steps/{bin}.rs"));
        let body = &text[text.find("fn main").expect("fn main")..];
        let mut last = 0;
        for (_, module) in &STEPS[..=n.min(5)] {
            let call = format!("{module}(");
            let at = body.find(&call).unwrap_or_else(|| panic!("steps/{bin}.rs does not call {call}"));
            assert!(at >= last, "steps/{bin}.rs calls {call} out of order");
            last = at;
        }
    }
}

#[test]
fn unsafe_lives_only_in_the_verbs_layer_with_a_safety_comment() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root().join("src"), &mut files);
    walk(&root().join("steps"), &mut files);
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap();
            if !code.contains("unsafe {") && !code.contains("unsafe fn") && !code.contains("unsafe impl") {
                continue;
            }
            assert_eq!(name, "src/verbs.rs", "{name}:{}: unsafe outside the FFI layer", i + 1);
            let has_safety = lines[..i].iter().rev().take_while(|l| {
                let t = l.trim();
                t.starts_with("//") || !t.ends_with(';') && !t.ends_with('}') && !t.ends_with('{')
            }).any(|l| l.contains("// SAFETY:")) || line.contains("SAFETY");
            assert!(has_safety, "{name}:{}: unsafe block without a `// SAFETY:` comment", i + 1);
        }
    }
}
