//! "Run it" shows first what the stage adds: each step's real trace with the lines the
//! previous step printed too folded into one `⋮ N lines as in …` line, generated into
//! `book/src/added/` from `book/src/output/` (the whole trace follows, folded, in a
//! `<details>`). A line counts as printed before when it matches one of the previous
//! step's lines but for its numbers (QPNs, keys, addresses and counts change from run to
//! run and step to step).

use std::collections::BTreeMap;
use std::path::Path;

use testkit::Step;

use super::Generated;

/// The directory the views go to, relative to the project.
pub const DIR: &str = "book/src/added";

/// The views of every step after the first (`steps__<bin>[-server|-client].txt`, as its
/// outputs are named), from the outputs in the project at `root`.
pub fn generate(root: &Path, steps: &[Step]) -> Result<Generated, String> {
    let outputs = root.join("book/src/output");
    let read =
        |name: &str| std::fs::read_to_string(outputs.join(name)).map_err(|e| format!("book/src/output/{name}: {e}"));
    let mut files = Vec::new();
    for (n, step) in steps.iter().enumerate().skip(1) {
        // Compared with the last step before it that runs the same way (a pair step's
        // server with a server): for every step but a new one, the previous step.
        let Some(prev) = steps[..n].iter().rev().find(|s| s.roles == step.roles) else { continue };
        let (prev, step) = (&prev.bin, &step.bin);
        let roles: &[&str] =
            if outputs.join(format!("steps__{step}.txt")).exists() { &[""] } else { &["-server", "-client"] };
        for role in roles {
            let name = format!("steps__{step}{role}.txt");
            let prev_file = [format!("steps__{prev}{role}.txt"), format!("steps__{prev}.txt")]
                .into_iter()
                .find(|f| outputs.join(f).exists())
                .ok_or_else(|| format!("no output of {prev} to compare {name} with"))?;
            // A stage that prints nothing yet (`cargo xtask new-step`'s skeleton) has no
            // view: its chapter shows the whole trace.
            if let Some(view) = view(prev, &read(&prev_file)?, &read(&name)?) {
                files.push((name, view));
            }
        }
    }
    Ok(Generated { dir: DIR, whole_dir: false, files })
}

/// `line` with its numbers as '#': hex after 0x, then decimal runs.
fn shape(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.trim_end().chars().peekable();
    while let Some(c) = chars.next() {
        if c == '0' && chars.peek() == Some(&'x') {
            chars.next();
            out.push_str("0x#");
            while chars.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                chars.next();
            }
        } else if c.is_ascii_digit() {
            out.push('#');
            while chars.peek().is_some_and(|c| c.is_ascii_digit()) {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `trace` with the lines `prev` (the previous step, whose trace is `before`) printed too
/// folded; None when every line was printed before.
fn view(prev: &str, before: &str, trace: &str) -> Option<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for l in before.lines() {
        *seen.entry(shape(l)).or_default() += 1;
    }
    let mut view = String::new();
    let mut folded = 0;
    let mut new_lines = 0;
    let fold = |view: &mut String, folded: &mut usize| {
        if *folded > 0 {
            let s = if *folded == 1 { "" } else { "s" };
            view.push_str(&format!("  ⋮ {folded} line{s} as in {prev}\n"));
            *folded = 0;
        }
    };
    for line in trace.lines() {
        match seen.get_mut(&shape(line)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                folded += 1;
            }
            _ => {
                fold(&mut view, &mut folded);
                view.push_str(line);
                view.push('\n');
                new_lines += 1;
            }
        }
    }
    fold(&mut view, &mut folded);
    (new_lines > 0).then_some(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_do_not_count() {
        assert_eq!(shape("qp_num=0x00011a lkey=0xdeadbeef n=100 x9  "), "qp_num=0x# lkey=0x# n=# x#");
    }

    #[test]
    fn lines_printed_before_fold_as_often_as_they_were() {
        let before = "open dev=0x1\nalloc_pd\nalloc_pd\n";
        let trace = "open dev=0x2\nalloc_pd\nalloc_pd\nalloc_pd\nreg_mr len=4096\nok\nopen dev=0x3\n";
        assert_eq!(
            view("01_x", before, trace).unwrap(),
            "  ⋮ 3 lines as in 01_x\nalloc_pd\nreg_mr len=4096\nok\nopen dev=0x3\n"
        );
        assert_eq!(view("01_x", "a\nb\n", "a\n"), None);
        assert_eq!(view("01_x", "a\nb\n", "b\nc\n").unwrap(), "  ⋮ 1 line as in 01_x\nc\n");
    }
}
