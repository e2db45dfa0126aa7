//! What `cargo xtask new-step` writes: the list's line, the `[[bin]]`, the step file made
//! from its base's, and the skeletons of the stage, the chapter, the answers page and the
//! snapshot test.

use std::path::Path;

use testkit::Roles;

use super::{read, New};

/// The list's line: bin and roles padded as the list pads them, the base when it is not
/// the previous step.
pub(super) fn list_line(new: &New) -> String {
    // No `c=`: a new pair step is graded against the reference until its line names a C tool.
    let base = if new.base.bin == new.previous.bin { String::new() } else { format!("base={}", new.base.bin) };
    format!("{:<18}{:<7}{base}", new.bin, new.roles.word()).trim_end().to_string()
}

pub(super) fn bin_block(bin: &str) -> String {
    format!("[[bin]]\nname = \"{bin}\"\npath = \"steps/{bin}.rs\"\ntest = false\n")
}

/// The base's step file, made step NN's: its doc and `--help` say so, no `--break` cases,
/// the base's new lines no longer marked new, and the new stage called after them.
pub(super) fn step_file(new: &New, base: &str) -> Result<String, String> {
    let (nn, stage) = (new.nn(), new.stage());
    let mut out = Vec::new();
    let mut doc_done = false;
    let mut last_end = None;
    let mut in_about = false;
    for line in base.lines() {
        let t = line.trim_start();
        if t.starts_with("//!") && !doc_done {
            if t.starts_with("//! Step ") {
                out.push(format!("//! Step {nn}: {stage}. TODO: what this step adds, in a sentence."));
            } else if t.starts_with("//! New: stage") {
                out.push(format!("//! New: stage {nn}, [`rdma_dissect::stages::{stage}`]."));
            } else if t == "//!" {
                out.push(line.to_string());
            }
            continue;
        }
        doc_done = true;
        if in_about {
            in_about = !t.ends_with("\";");
            continue;
        }
        if t.starts_with("const CASES:") {
            out.push("const CASES: &[Case<Args>] = &[];".into());
        } else if t.starts_with("const ABOUT:") {
            out.push(format!("const ABOUT: &str = \"Step {nn}: {stage} (TODO: what it adds)\";"));
            in_about = !t.ends_with("\";");
        } else if t.starts_with("// ANCHOR: new") {
        } else if t.starts_with("// ANCHOR_END: new") {
            // The new stage's call goes after the last of the base's new lines.
            last_end = Some((out.len(), line[..line.len() - t.len()].to_string()));
        } else {
            out.push(line.to_string());
        }
    }
    let (at, indent) = last_end.ok_or("the base step has no `// ANCHOR_END: new`")?;
    let call =
        [format!("{indent}// ANCHOR: new"), format!("{indent}{stage}()?;"), format!("{indent}// ANCHOR_END: new")];
    out.splice(at..at, call);
    let last_use =
        out.iter().rposition(|l| l.starts_with("use rdma_dissect::")).ok_or("the base step imports nothing")?;
    out.insert(last_use + 1, format!("use rdma_dissect::stages::{stage}::{stage};"));
    Ok(out.join("\n") + "\n")
}

pub(super) fn stage_file(new: &New) -> String {
    let (nn, stage) = (new.nn(), new.stage());
    format!(
        "//! Stage {nn}: {stage}. TODO: what this stage does and why, for a reader of the chapter.
//!
//! C reference: TODO: the function of rc_pingpong.c (or rping.c) this stage corresponds to.

use crate::error::Result;

/// Stage {nn}. TODO: its verbs, each through `src/verbs/` with a `c_ibv_…` anchor.
pub fn {stage}() -> Result<()> {{
    // ANCHOR: stage
    // ANCHOR: hole_first_verb HOLE: TODO: the hint a student gets for this hole
    let verbs_called = 0;
    // ANCHOR_END: hole_first_verb
    debug_assert_eq!(verbs_called, 0, \"TODO: call the stage's verbs\");
    Ok(())
    // ANCHOR_END: stage
}}
"
    )
}

/// The base's row of src/lib.rs's step table: its verbs column, which the skeleton's
/// chapter shows (with their C anchors) until the stage has verbs of its own.
pub(super) fn base_verbs(lib: &str, base: &str) -> Result<String, String> {
    let row =
        lib.lines().find(|l| l.starts_with(&format!("//! | `{base}`"))).ok_or("src/lib.rs: no row for the base")?;
    Ok(row.rsplit('|').nth(1).unwrap_or("").trim().to_string())
}

pub(super) fn lib_row(new: &New, verbs: &str) -> String {
    let (bin, stage) = (format!("`{}`", new.bin), format!("[`stages::{}`]", new.stage()));
    format!("//! | {bin:<19}| {stage:<26}| TODO (for now its base's): {verbs} |")
}

/// The `{{#include …:c_<verb>}}` of each verb in `verbs` (src/verbs/'s anchors).
pub(super) fn c_includes(root: &Path, verbs: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for verb in verbs.split('`').skip(1).step_by(2).filter(|v| v.starts_with("ibv_") || v.starts_with("rdma_")) {
        let anchor = format!("// ANCHOR: c_{verb}");
        let mut found = None;
        for entry in std::fs::read_dir(root.join("src/verbs")).map_err(|e| format!("src/verbs: {e}"))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if read(&path)?.lines().any(|l| l.trim() == anchor) {
                found = Some(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
        let file = found.ok_or_else(|| format!("src/verbs/ has no c_{verb} anchor"))?;
        out.push(format!("```rust,ignore\n{{{{#include ../../src/verbs/{file}:c_{verb}}}}}\n```\n"));
    }
    Ok(out)
}

/// The snapshot and output names of a step: one, or the server's and the client's.
pub(super) fn run_names(bin: &str, roles: Roles) -> Vec<String> {
    match roles {
        Roles::Alone => vec![format!("steps__{bin}")],
        Roles::Pair | Roles::Cm => vec![format!("steps__{bin}-server"), format!("steps__{bin}-client")],
    }
}

/// The chapter, in the book's template; `added` are the "what it adds" views `cargo xtask
/// book` made of its outputs (none while it prints what its base prints).
pub(super) fn chapter(new: &New, c_refs: &[String], added: &[String]) -> String {
    let (bin, nn, stage, base) = (&new.bin, new.nn(), new.stage(), &new.base.bin);
    let run = match new.roles {
        Roles::Alone => format!("$ lab/run cargo run --bin {bin} -- -g 1"),
        Roles::Pair | Roles::Cm => format!("$ lab/run cargo xtask run {nn}"),
    };
    let outputs: String = added
        .iter()
        .map(|n| format!("```console\n{{{{#include added/{n}}}}}\n```\n\n"))
        .chain(
            run_names(bin, new.roles).iter().map(|n| format!("```console\n{{{{#include output/{n}.txt}}}}\n```\n\n")),
        )
        .collect();
    format!(
        "# {nn} TODO: the chapter's title

## What this stage does, and why

TODO: the semantics of the verbs this stage adds, and why rc_pingpong needs them.

## The code

### The verbs, as C sees them

TODO: the stage's own verbs. Until it has some, these are its base's ({base}):

{c_refs}
### The stage

The stage, in `src/stages/{stage}.rs`:

```rust,ignore
{{{{#include ../../src/stages/{stage}.rs:stage}}}}
```

What step {nn} adds, in `steps/{bin}.rs`:

```rust,ignore
{{{{#include ../../steps/{bin}.rs:new}}}}
```

## Run it

```console
{run}
```

TODO: what to look at in the trace.

{outputs}## What changed since the previous step

```diff
{{{{#include generated/{bin}.diff}}}}
```

## Break it

TODO: the characteristic mistake of this stage (a module of `src/breakit/`) and its real
output.

## The C reference

TODO: the lines of `rc_pingpong.c` this stage corresponds to.

## Exercises

1. TODO: a question whose answer is in the trace.
",
        c_refs = c_refs.join("\n")
    )
}

pub(super) fn answers_page(new: &New) -> String {
    let (bin, nn) = (&new.bin, new.nn());
    let stage = new.stage();
    format!(
        "# {nn} TODO: the chapter's title

## Exercise 1

TODO: the answer to the chapter's exercise 1,
in a few lines.

## Graded exercise: `lab/exercise {nn}`

One hole:

```rust,ignore
{{{{#include ../../../../src/stages/{stage}.rs:hole_first_verb}}}}
```

TODO: what the hole teaches, for `{bin}`.
"
    )
}

/// The test of the step in tests/device/steps.rs: `single`, `pair` or `cm` as its roles.
pub(super) fn snapshot_test(new: &New) -> String {
    let run = match new.roles {
        Roles::Alone => "single",
        Roles::Pair => "pair",
        Roles::Cm => "cm",
    };
    // `pair` takes the flags both sides run with: none, to begin with.
    let flags = if matches!(new.roles, Roles::Pair) { ", &[]" } else { "" };
    let bin = &new.bin;
    format!("\n#[test]\nfn step_{bin}() {{\n    {run}(\"{bin}\", env!(\"CARGO_BIN_EXE_{bin}\"){flags});\n}}\n")
}

pub(super) fn exe(bin: &str) -> String {
    format!("env!(\"CARGO_BIN_EXE_{bin}\")")
}
