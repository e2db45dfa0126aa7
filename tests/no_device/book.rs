//! The book must never drift from the code: these checks run with plain `cargo test`.
//!
//! - `mdbook build book` succeeds without an error or warning line;
//! - every `{{#include}}` / `{{#rustdoc_include}}` names a file that exists, and every anchor
//!   or line range it names exists and is not empty (a wrong anchor silently includes
//!   nothing, which is the failure mdBook will not report);
//! - every step of `steps/list.txt` has a chapter, listed in SUMMARY.md, with the
//!   template's sections in order;
//! - every "Run it" and "Break it" section includes the real output behind each of the
//!   step's snapshots (`book/src/output/*.txt`), and each output redacts exactly to its
//!   snapshot; every snapshot included directly has insta's YAML header cut off exactly;
//! - the files `cargo xtask book` generates are current, by its own check (`cargo xtask book
//!   --check`): the step diffs, "Run it"'s views of what each stage adds to the trace
//!   (`book/src/added/`) and the ladder diagrams of the wire; and the chapters show them;
//! - every Rust fence is `rust,ignore` (the code is compiled as the crate, not as doctests),
//!   so `mdbook test book` has nothing to compile (tests/host_vms/book_dom.rs runs `mdbook test` on
//!   the host: it starts one rustdoc per chapter, ~1 min under the lab VM's emulated CPU);
//! - every relative link and image in the rendered HTML resolves (offline link check,
//!   including `#fragment`s into the book's pages);
//! - the SVG diagrams are well-formed XML with an `<svg>` root, and every one is used;
//! - every `lab/...` command the book mentions exists, and the flag reference agrees with
//!   `src/cli/mod.rs`;
//! - every stage chapter shows the C verbs its stage calls (the `ibv_*` names of its row in
//!   the crate doc's step table) from the `c_*` anchors of `src/verbs/`, and each anchor's
//!   `// C:` prototype is the installed `<infiniband/verbs.h>`'s and is the call it holds.
//!
//! They need `mdbook` 0.5 on PATH (or in ~/.cargo/bin): `book/install-tools` installs it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rdma_dissect::role::Role;
use testkit as common;

use common::check_xml;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn book_src() -> PathBuf {
    root().join("book/src")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The mdbook binary, or a loud failure that says how to get it.
fn mdbook() -> PathBuf {
    let candidates = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("mdbook")).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(std::env::var_os("CARGO_HOME").map(|h| PathBuf::from(h).join("bin/mdbook")))
        .chain(std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo/bin/mdbook")));
    for c in candidates {
        if c.is_file() {
            let out = Command::new(&c).arg("--version").output();
            if let Ok(out) = out {
                let v = String::from_utf8_lossy(&out.stdout).to_string();
                assert!(
                    v.starts_with("mdbook v0.5."),
                    "{} is {v:?}; the book needs mdBook 0.5.x: run book/install-tools",
                    c.display()
                );
                return c;
            }
        }
    }
    panic!(
        "mdbook not found on PATH or in ~/.cargo/bin. The book checks need mdBook 0.5: run \
         `book/install-tools` (= cargo install --locked mdbook --version ^0.5)"
    );
}

/// A fresh temporary directory under target/ (visible inside the lab VM too).
fn temp_dir(tag: &str) -> PathBuf {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("book-tests");
    fs::create_dir_all(&base).unwrap();
    let dir = base.join(format!("{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Builds the book once per test run, into a private directory (never over book/book).
fn built_book() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dest = temp_dir("html");
        let out = Command::new(mdbook())
            .arg("build")
            .arg(root().join("book"))
            .arg("-d")
            .arg(&dest)
            .output()
            .expect("run mdbook build");
        let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "mdbook build book failed:\n{log}");
        let bad: Vec<&str> = log.lines().filter(|l| l.contains("ERROR") || l.contains("WARN")).collect();
        assert!(bad.is_empty(), "mdbook build book logged problems:\n{}", bad.join("\n"));
        dest
    })
}

/// The steps' bin names, in order (`steps/list.txt`, which tests/no_device/consistency.rs checks
/// Cargo.toml's `[[bin]]`s against).
fn bins() -> Vec<String> {
    let bins: Vec<String> = common::steps().into_iter().map(|s| s.bin).collect();
    assert!(!bins.is_empty(), "no step in steps/list.txt");
    bins
}

fn markdown_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(book_src())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    v.sort();
    v
}

/// One `{{#include ...}}` or `{{#rustdoc_include ...}}` found in a chapter.
#[derive(Debug)]
struct Include {
    chapter: PathBuf,
    line: usize,
    /// The file, resolved against the chapter's directory.
    file: PathBuf,
    /// What follows the path: "" (whole file), an anchor name, or a line range "N:M".
    selector: String,
}

fn includes_in(chapter: &Path) -> Vec<Include> {
    let text = read(chapter);
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find("{{#") {
            let after = &rest[start + 3..];
            let end = after.find("}}").unwrap_or_else(|| panic!("{}:{}: unterminated {{{{#", chapter.display(), n + 1));
            let body = after[..end].trim();
            rest = &after[end + 2..];
            let (kind, arg) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
            if kind != "include" && kind != "rustdoc_include" {
                continue;
            }
            let arg = arg.trim();
            let (path, selector) = arg.split_once(':').unwrap_or((arg, ""));
            out.push(Include {
                chapter: chapter.to_path_buf(),
                line: n + 1,
                file: chapter.parent().unwrap().join(path),
                selector: selector.to_string(),
            });
        }
    }
    out
}

fn all_includes() -> Vec<Include> {
    markdown_files().iter().flat_map(|p| includes_in(p)).collect()
}

/// The lines between `ANCHOR: name` and `ANCHOR_END: name`, without nested anchor lines.
fn anchor_body(text: &str, name: &str) -> Option<Vec<String>> {
    let is_marker =
        |l: &str, kind: &str| l.split_once(kind).is_some_and(|(_, n)| n.trim().trim_end_matches("-->").trim() == name);
    let mut lines = text.lines();
    lines.by_ref().find(|l| is_marker(l, "ANCHOR:"))?;
    let mut body = Vec::new();
    for l in lines {
        if is_marker(l, "ANCHOR_END:") {
            return Some(body);
        }
        if !l.contains("ANCHOR:") && !l.contains("ANCHOR_END:") {
            body.push(l.to_string());
        }
    }
    None
}

fn parse_range(selector: &str) -> Option<(Option<usize>, Option<usize>)> {
    let num = |s: &str| {
        if s.is_empty() {
            Ok(None)
        } else {
            s.parse::<usize>().map(Some)
        }
    };
    match selector.split_once(':') {
        Some((a, b)) => Some((num(a).ok()?, num(b).ok()?)),
        None => Some((Some(num(selector).ok()??), Some(num(selector).ok()??))),
    }
}

fn where_(inc: &Include) -> String {
    format!("{}:{}", inc.chapter.strip_prefix(root()).unwrap_or(&inc.chapter).display(), inc.line)
}

#[test]
fn book_builds() {
    let dir = built_book();
    assert!(dir.join("index.html").is_file());
    for bin in bins() {
        assert!(dir.join(format!("{bin}.html")).is_file(), "no {bin}.html in the built book");
    }
}

#[test]
fn every_include_and_anchor_resolves_to_something() {
    let includes = all_includes();
    assert!(includes.len() >= 9, "the chapters include almost nothing: {includes:#?}");
    let mut problems = Vec::new();
    for inc in &includes {
        let Ok(text) = fs::read_to_string(&inc.file) else {
            problems.push(format!("{}: no such file {}", where_(inc), inc.file.display()));
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        let body: Vec<String> = if inc.selector.is_empty() {
            lines.iter().map(|s| s.to_string()).collect()
        } else if let Some((from, to)) = parse_range(&inc.selector) {
            let from = from.unwrap_or(1);
            let to = to.unwrap_or(lines.len());
            if from == 0 || from > lines.len() || to > lines.len() {
                problems.push(format!(
                    "{}: lines {} of {} ({} lines)",
                    where_(inc),
                    inc.selector,
                    inc.file.display(),
                    lines.len()
                ));
                continue;
            }
            lines[from - 1..to].iter().map(|s| s.to_string()).collect()
        } else {
            match anchor_body(&text, &inc.selector) {
                Some(b) => b,
                None => {
                    problems.push(format!(
                        "{}: no anchor `{}` (ANCHOR: … ANCHOR_END:) in {}",
                        where_(inc),
                        inc.selector,
                        inc.file.display()
                    ));
                    continue;
                }
            }
        };
        if body.iter().all(|l| l.trim().is_empty()) {
            problems.push(format!("{}: {}:{} includes nothing", where_(inc), inc.file.display(), inc.selector));
        }
    }
    assert!(problems.is_empty(), "includes that resolve to nothing:\n{}", problems.join("\n"));
}

const SECTIONS: [&str; 7] = [
    "## What this stage does",
    "## The code",
    "## Run it",
    "## What changed since the previous step",
    "## Break it",
    "## The C reference",
    "## Exercises",
];

#[test]
fn every_step_has_a_chapter_in_the_summary_with_the_template() {
    let summary = read(&book_src().join("SUMMARY.md"));
    for bin in bins() {
        assert!(summary.contains(&format!("({bin}.md)")), "SUMMARY.md does not list {bin}.md");
        let chapter = read(&book_src().join(format!("{bin}.md")));
        let mut at = 0;
        for s in SECTIONS {
            let found = chapter[at..]
                .find(&format!("\n{s}"))
                .unwrap_or_else(|| panic!("{bin}.md: section `{s}` missing or out of order (template: {SECTIONS:?})"));
            at += found + 1;
        }
        // The stage's code and the step's new lines are both quoted.
        let includes = includes_in(&book_src().join(format!("{bin}.md")));
        assert!(
            includes.iter().any(|i| i.file.starts_with(book_src().join("../../src/stages")) && i.selector == "stage"),
            "{bin}.md does not include a src/stages/*.rs:stage anchor"
        );
        assert!(
            includes.iter().any(|i| i.file.ends_with(format!("steps/{bin}.rs")) && i.selector == "new"),
            "{bin}.md does not include steps/{bin}.rs:new"
        );
    }
}

/// insta's YAML header: `---`, `key: value` lines, `---`. Returns its length in lines.
fn snapshot_header_len(text: &str) -> Option<usize> {
    let mut lines = text.lines();
    if lines.next()? != "---" {
        return None;
    }
    lines.position(|l| l == "---").map(|i| i + 2)
}

/// The book's real output behind a snapshot: `book/src/output/<snapshot's stem>.txt`.
fn output_of(snapshot: &str) -> PathBuf {
    book_src().join("output").join(snapshot.replace(".snap", ".txt"))
}

#[test]
fn run_it_shows_every_snapshot_of_the_step_and_nothing_else() {
    let snapdir = root().join("tests/snapshots");
    for bin in bins() {
        let chapter_path = book_src().join(format!("{bin}.md"));
        let chapter = read(&chapter_path);
        let start = chapter.find("\n## Run it").expect("Run it section") + 1;
        let end = chapter[start + 1..].find("\n## ").map_or(chapter.len(), |e| start + 1 + e);
        let run_it_lines = chapter[..start].lines().count() + 1..=chapter[..end].lines().count();
        let incs: Vec<Include> =
            includes_in(&chapter_path).into_iter().filter(|i| run_it_lines.contains(&i.line)).collect();
        assert!(!incs.is_empty(), "{bin}.md: `Run it` includes no trace");
        let mut shown = BTreeSet::new();
        for inc in &incs {
            let name = inc.file.file_name().unwrap().to_string_lossy().to_string();
            // What the stage adds, generated from the same output (run_it_shows_what_each_stage_adds).
            if inc.file == book_src().join("added").join(&name) && inc.selector.is_empty() {
                continue;
            }
            assert!(
                inc.file == output_of(&name.replace(".txt", ".snap")) && inc.selector.is_empty(),
                "{}: `Run it` must include a whole book/src/output/<snapshot>.txt (the real output \
                 behind a snapshot), not {}:{}",
                where_(inc),
                inc.file.display(),
                inc.selector
            );
            shown.insert(name.replace(".txt", ".snap"));
        }
        let expected: BTreeSet<String> = fs::read_dir(&snapdir)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                    .filter(|n| {
                        n == &format!("steps__{bin}.snap")
                            || n == &format!("steps__{bin}-server.snap")
                            || n == &format!("steps__{bin}-client.snap")
                    })
                    .collect()
            })
            .unwrap_or_default();
        assert!(!expected.is_empty(), "no snapshot tests/snapshots/steps__{bin}[-server|-client].snap");
        assert_eq!(shown, expected, "{bin}.md: `Run it` must show exactly the step's snapshots (their real outputs)");
    }
}

/// The book shows real runs, the snapshots the same runs with placeholders: every
/// `steps__`/`break_it__` snapshot has its real output in `book/src/output/`, written by
/// the test that made the snapshot (`RDMA_DISSECT_BOOK=write`, see `testkit`), and
/// that output, redacted by the same code with the device it ran on (`output/device.txt`),
/// *is* the snapshot. No output is left without a snapshot, and none shows a placeholder.
#[test]
fn book_outputs_are_real_runs_of_their_snapshots() {
    let n = outputs_are_real_runs(&root().join("tests/snapshots"), &book_src().join("output"));
    assert!(n >= 50, "expected the step and break-it snapshots, found {n}");
    // An iWARP device's own (siw0 in the lab VM with LAB_DEVICE=siw), with its device.txt.
    let n = outputs_are_real_runs(&root().join("tests/snapshots/iwarp"), &common::iwarp_output_dir());
    assert!(n >= 4, "expected the iWARP snapshots (steps 01 and 10, tests/iwarp), found {n}");
}

/// [`book_outputs_are_real_runs_of_their_snapshots`] for one directory of snapshots and
/// the one of their outputs; how many it checked.
fn outputs_are_real_runs(snapdir: &Path, outdir: &Path) -> usize {
    let dev = common::Device::parse(&read(&outdir.join("device.txt")));
    let output_of = |snapshot: &str| outdir.join(snapshot.replace(".snap", ".txt"));
    let text = |name: &str| fs::read_to_string(output_of(name)).ok();
    let mut n = 0;
    for entry in fs::read_dir(snapdir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !(name.starts_with("steps__") || name.starts_with("break_it__") || name.starts_with("iwarp__")) {
            continue;
        }
        let raw = text(&name).unwrap_or_else(|| {
            panic!(
                "no book/src/output/{} for tests/snapshots/{name}: regenerate the outputs with \
                 `RDMA_DISSECT_BOOK=write lab/run cargo test --test device -- steps:: break_it::`",
                name.replace(".snap", ".txt")
            )
        });
        for placeholder in ["[QPN", "[PSN", "[LKEY", "[RKEY", "[ADDR", "[GUID", "[DEVICE", "[GID"] {
            assert!(
                !raw.contains(placeholder),
                "book/src/output/{name}: the book shows real values, not {placeholder}…]"
            );
        }
        // The values each side picked come from the traces of the same run.
        let picks = if let Some(stem) = name.strip_suffix("-server.snap").or(name.strip_suffix("-client.snap")) {
            let side = |s: &str| text(&format!("{stem}-{s}.snap")).expect("both sides' outputs");
            common::Picks::pair(&side("server"), &side("client"))
        } else if name.starts_with("break_it__") && !name.ends_with("-trace.snap") {
            common::Picks::from_sections(&text(&name.replace(".snap", "-trace.snap")).unwrap_or_default())
        } else {
            common::Picks::from_sections(&raw)
        };
        let side = if name.ends_with("-server.snap") {
            Some(Role::Server)
        } else if name.ends_with("-client.snap") {
            Some(Role::Client)
        } else {
            None
        };
        let redacted = match side {
            None => common::redact_sections(&raw, &picks, &dev),
            Some(_) => common::redact(&raw, side, &picks, &dev),
        };
        // A step that connects with rdma_cm shows what only the CM does (testkit's cm.rs).
        let cm = common::steps().iter().any(|s| s.cm && name.contains(&format!("__{}", s.bin)));
        let redacted = if cm { common::cm::redact_cm_values(&redacted, &dev) } else { redacted };
        let snap = read(&snapdir.join(&name));
        let header = snapshot_header_len(&snap).unwrap_or_else(|| panic!("{name}: no insta header"));
        let body: String = snap.lines().skip(header).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            redacted.trim_end(),
            body.trim_end(),
            "book/src/output/{} does not redact to tests/snapshots/{name}: a snapshot changed \
             without its book output (or the other way round); regenerate both in the lab VM with \
             `INSTA_UPDATE=always RDMA_DISSECT_BOOK=write lab/run cargo test --test device -- steps:: break_it::`",
            name.replace(".snap", ".txt")
        );
        n += 1;
    }
    for entry in fs::read_dir(outdir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            name == "device.txt" || entry.path().is_dir() || snapdir.join(name.replace(".txt", ".snap")).is_file(),
            "{}/{name} has no snapshot: a stale output",
            outdir.display()
        );
    }
    n
}

/// Every break-it snapshot (`break_it__<bin>-<case>[-trace|-help].snap`) is shown — its
/// real output, `book/src/output/<name>.txt` — in the "Break it" section of its step's
/// chapter, so no case's real output is left out of the book (tests/device/break_it.rs makes one per case, from the library's tables).
#[test]
fn break_it_shows_every_break_snapshot_of_the_step() {
    let snapdir = root().join("tests/snapshots");
    let mut n = 0;
    for entry in fs::read_dir(&snapdir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("break_it__") else { continue };
        let bin = &rest[..rest.find('-').expect("break_it__<bin>-<case>.snap")];
        let chapter_path = book_src().join(format!("{bin}.md"));
        let chapter = read(&chapter_path);
        let start = chapter.find("\n## Break it").expect("Break it section") + 1;
        let end = chapter[start + 1..].find("\n## ").map_or(chapter.len(), |e| start + 1 + e);
        let lines = chapter[..start].lines().count() + 1..=chapter[..end].lines().count();
        let shown = includes_in(&chapter_path).iter().any(|i| lines.contains(&i.line) && i.file == output_of(&name));
        assert!(shown, "{bin}.md: `Break it` does not include book/src/output/ for tests/snapshots/{name}");
        n += 1;
    }
    assert!(n >= 30, "expected the break-it snapshots (3 per case), found {n}");
}

/// The snapshots the book includes directly (the two-host wire captures of 07–09, whose
/// VMs the host cannot ask about their devices) are included from the line after their
/// YAML header, so the header never shows and no output line is lost.
#[test]
fn every_snapshot_include_skips_exactly_the_yaml_header() {
    let mut n = 0;
    for inc in all_includes().iter().filter(|i| i.file.extension().is_some_and(|e| e == "snap")) {
        let Ok(text) = fs::read_to_string(&inc.file) else {
            panic!("{}: no such file {}", where_(inc), inc.file.display());
        };
        let header = snapshot_header_len(&text).unwrap_or_else(|| panic!("{}: no insta header", inc.file.display()));
        assert_eq!(
            inc.selector,
            format!("{}:", header + 1),
            "{}: {} has a {header}-line header: include it with `:{}:`",
            where_(inc),
            inc.file.display(),
            header + 1
        );
        n += 1;
    }
    assert!(n >= 5, "expected the 5 two-host snapshots at least, found {n} snapshot includes");
}

/// The files `cargo xtask book` generates are current, by its own check: run as a command,
/// so the tests do not build the tooling's library into every test target.
#[test]
fn generated_files_are_current() {
    let out = Command::new(env!("CARGO"))
        .args(["xtask", "book", "--check"])
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("cargo xtask book --check: {e}"));
    assert!(out.status.success(), "cargo xtask book --check: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
}

/// The first step shows its whole file, every later one its diff (`book/src/generated/`).
#[test]
fn every_chapter_includes_its_generated_diff() {
    let first = &bins()[0];
    assert!(
        read(&book_src().join(format!("{first}.md"))).contains(&format!("{{{{#include generated/{first}.rs}}}}")),
        "{first}.md does not include generated/{first}.rs"
    );
    for bin in bins().iter().skip(1) {
        let chapter = read(&book_src().join(format!("{bin}.md")));
        assert!(
            chapter.contains(&format!("{{{{#include generated/{bin}.diff}}}}")),
            "{bin}.md does not include generated/{bin}.diff"
        );
    }
}

#[test]
fn rust_fences_are_ignore_and_languages_are_known() {
    let allowed = ["rust,ignore", "console", "diff", "text", "c", "toml", "sh"];
    for md in markdown_files() {
        let mut open = false;
        for (n, line) in read(&md).lines().enumerate() {
            let t = line.trim_start();
            if let Some(info) = t.strip_prefix("```") {
                if open {
                    open = false;
                    continue;
                }
                open = true;
                let info = info.trim();
                assert!(
                    allowed.contains(&info),
                    "{}:{}: fence ```{info}: use one of {allowed:?} (Rust listings are compiled \
                     by cargo, so they are `rust,ignore` here)",
                    md.display(),
                    n + 1
                );
            }
        }
        assert!(!open, "{}: unclosed code fence", md.display());
    }
}

/// Values of `href="…"` and `src="…"` in an HTML page.
fn html_links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in ["href=\"", "src=\""] {
        let mut rest = html;
        while let Some(i) = rest.find(attr) {
            // Only real attributes: preceded by whitespace.
            let ok = rest[..i].ends_with(char::is_whitespace);
            let after = &rest[i + attr.len()..];
            let end = after.find('"').unwrap_or(after.len());
            if ok {
                out.push(after[..end].replace("&amp;", "&"));
            }
            rest = &after[end..];
        }
    }
    out
}

fn html_ids(html: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut rest = html;
    while let Some(i) = rest.find(" id=\"") {
        let after = &rest[i + 5..];
        let end = after.find('"').unwrap_or(after.len());
        ids.insert(after[..end].to_string());
        rest = &after[end..];
    }
    ids
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn offline_link_check() {
    let dir = built_book();
    let mut files = Vec::new();
    walk(dir, &mut files);
    let pages: Vec<&PathBuf> = files.iter().filter(|p| p.extension().is_some_and(|e| e == "html")).collect();
    assert!(pages.len() > 10);
    let mut broken = Vec::new();
    let mut checked = 0;
    // Each page's ids, parsed once: print.html alone links to itself hundreds of times.
    let mut ids: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    for page in &pages {
        // mdBook's 404 page resolves its links against `<base href="{site-url}">`, i.e. the
        // server's root: they only mean something when served, not as files.
        if page.file_name().is_some_and(|n| n == "404.html") {
            continue;
        }
        let html = read(page);
        for link in html_links(&html) {
            let external = link.contains("://")
                || link.starts_with("//")
                || ["mailto:", "data:", "javascript:", "tel:"].iter().any(|s| link.starts_with(s));
            if external || link.is_empty() || link.contains("{{") {
                continue;
            }
            let (path, fragment) = match link.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (link.as_str(), None),
            };
            let path = path.split('?').next().unwrap();
            let target = if path.is_empty() { page.to_path_buf() } else { page.parent().unwrap().join(path) };
            let target = if target.is_dir() { target.join("index.html") } else { target };
            checked += 1;
            if !target.is_file() {
                broken.push(format!("{}: {link}", page.strip_prefix(dir).unwrap().display()));
                continue;
            }
            if let Some(f) = fragment.filter(|f| !f.is_empty()) {
                let target_ids = ids.entry(target.clone()).or_insert_with(|| html_ids(&read(&target)));
                if target.extension().is_some_and(|e| e == "html") && !target_ids.contains(f) {
                    broken.push(format!("{}: {link} (no id `{f}`)", page.strip_prefix(dir).unwrap().display()));
                }
            }
        }
    }
    assert!(checked > 100, "the link check saw only {checked} links");
    assert!(broken.is_empty(), "broken links in the rendered book:\n{}", broken.join("\n"));
}

#[test]
fn xml_checker_rejects_what_it_should() {
    assert_eq!(check_xml("<?xml version=\"1.0\"?>\n<svg a=\"1\"><g/><!-- c --></svg>\n"), Ok("svg".into()));
    for bad in [
        "<svg><g></svg>",
        "<svg a=1></svg>",
        "<svg a=\"1\" a=\"2\"></svg>",
        "<svg>&nbsp;</svg>",
        "<svg>a & b</svg>",
        "<svg></svg><svg></svg>",
        "<svg><!-- a -- b --></svg>",
        "<svg>",
    ] {
        assert!(check_xml(bad).is_err(), "accepted {bad:?}");
    }
}

#[test]
fn diagrams_are_well_formed_svg_and_all_used() {
    let dir = book_src().join("diagrams");
    let all_md: String = markdown_files().iter().map(|p| read(p)).collect();
    let mut n = 0;
    for e in fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|e| e != "svg") {
            continue;
        }
        n += 1;
        let text = read(&p);
        let root_el = check_xml(&text).unwrap_or_else(|e| panic!("{}: not well-formed XML: {e}", p.display()));
        assert_eq!(root_el, "svg", "{}: root element", p.display());
        assert!(text.contains("xmlns=\"http://www.w3.org/2000/svg\""), "{}: no SVG namespace", p.display());
        assert!(text.contains("viewBox=\""), "{}: no viewBox (it will not scale)", p.display());
        assert!(text.contains("<title"), "{}: no <title> (accessibility)", p.display());
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        assert!(all_md.contains(&format!("diagrams/{name}")), "diagram {name} is not used by any chapter");
    }
    assert!(n >= 4, "expected the four diagrams (objects, QP states, exchange, pipeline)");
}

#[test]
fn lab_commands_the_book_mentions_exist() {
    for md in markdown_files() {
        let text = read(&md);
        let mut rest = text.as_str();
        while let Some(i) = rest.find("lab/") {
            let before_ok = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
            let after = &rest[i + 4..];
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
                .unwrap_or(after.len());
            let name = after[..end].trim_end_matches('.');
            if before_ok && !name.is_empty() {
                assert!(
                    root().join("lab").join(name).exists(),
                    "{} mentions lab/{name}, which does not exist",
                    md.display()
                );
            }
            rest = &after[end..];
        }
    }
}

/// The flag reference's table: for each row naming one of our flags (`--long`), src/cli/mod.rs must
/// declare `long = "long"`, and a default given in our column must be its `default_value`.
#[test]
fn flag_reference_agrees_with_cli_rs() {
    let cli = read(&root().join("src/cli/mod.rs"));
    let flags = read(&book_src().join("flags.md"));
    let mut rows = 0;
    for line in flags.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | C flag | C default | our flag | our default | notes |
        if cells.len() < 6 {
            continue;
        }
        let ours = cells[3];
        // Flags are the `code` spans: the odd pieces of a split on backticks.
        let Some(long) = ours.split('`').skip(1).step_by(2).find_map(|f| f.strip_prefix("--")) else {
            continue;
        };
        rows += 1;
        let decl = cli
            .lines()
            .find(|l| l.contains(&format!("long = \"{long}\"")))
            .unwrap_or_else(|| panic!("flags.md lists --{long}, src/cli/mod.rs has no `long = \"{long}\"`"));
        let default = cells[4].trim_matches('`');
        if default.chars().all(|c| c.is_ascii_digit()) && !default.is_empty() {
            assert!(
                decl.contains(&format!("default_value = \"{default}\"")),
                "flags.md says --{long} defaults to {default}; src/cli/mod.rs says: {decl}"
            );
        }
    }
    assert!(rows >= 10, "flags.md: expected a row per flag, found {rows}");
}

/// The files of `dir` under `book/src/` whose names start with `prefix`, sorted.
fn book_files(dir: &str, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(book_src().join(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names
}

/// The ladder diagrams of the wire (`book/src/diagrams/ladder-*.svg`; `cargo xtask book`
/// draws them from the two-host captures): every one is shown.
#[test]
fn ladder_diagrams_are_shown() {
    let chapters: String = markdown_files().iter().map(|p| read(p)).collect();
    let ladders = book_files("diagrams", "ladder-");
    assert!(!ladders.is_empty(), "no book/src/diagrams/ladder-*.svg");
    for svg_name in ladders {
        assert!(chapters.contains(&format!("(diagrams/{svg_name})")), "no chapter shows diagrams/{svg_name}");
    }
}

/// "Run it" shows first what the stage adds (`book/src/added/`, generated by `cargo xtask
/// book` from `book/src/output/`): each step's chapter shows its own.
#[test]
fn run_it_shows_what_each_stage_adds() {
    for name in book_files("added", "steps__") {
        // steps__<bin>[-server|-client].txt
        let step =
            name["steps__".len()..name.len() - ".txt".len()].trim_end_matches("-server").trim_end_matches("-client");
        let chapter = read(&book_src().join(format!("{step}.md")));
        assert!(chapter.contains(&format!("{{{{#include added/{name}}}}}")), "{step}.md does not show added/{name}");
    }
}

/// `s` with runs of white space folded to one space, and none after `(` or before `)`.
fn fold_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").replace("( ", "(").replace(" )", ")")
}

/// A `c_<verb>` anchor of the FFI layer: the file that holds it (`src/verbs/….rs`, relative
/// to the root), the `// C:` prototype, and the anchor's body.
struct CAnchor {
    file: String,
    proto: String,
    body: Vec<String>,
}

/// The `c_<verb>` anchors of `src/verbs/`, by verb.
fn c_anchors() -> BTreeMap<String, CAnchor> {
    let mut files: Vec<PathBuf> = fs::read_dir(root().join("src/verbs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    let mut out = BTreeMap::new();
    for path in files {
        let file = path.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
        let verbs = read(&path);
        for line in verbs.lines() {
            let Some(name) = line.trim().strip_prefix("// ANCHOR: c_") else { continue };
            let body = anchor_body(&verbs, &format!("c_{name}")).expect("anchor without its end");
            // The prototype starts on a `// C: ` line and runs on over comment lines to its `;`.
            let starts: Vec<usize> = (0..body.len()).filter(|&i| body[i].trim().starts_with("// C: ")).collect();
            assert_eq!(starts.len(), 1, "{file} c_{name}: wants exactly one `// C: ` prototype");
            let mut proto = String::new();
            for l in &body[starts[0]..] {
                let text = l.trim().trim_start_matches("// C: ").trim_start_matches("//").trim();
                proto = format!("{proto} {text}");
                if text.ends_with(';') {
                    break;
                }
            }
            assert!(proto.ends_with(';'), "{file} c_{name}: the prototype has no `;`");
            let anchor = CAnchor { file: file.clone(), proto: proto.trim().to_string(), body };
            assert!(out.insert(name.to_string(), anchor).is_none(), "c_{name}: two anchors of that name in src/verbs/");
        }
    }
    out
}

#[test]
fn every_c_anchor_holds_the_header_prototype_and_its_call() {
    // Verbs are declared in libibverbs' header, the connection manager's functions (step 10,
    // `src/verbs/rdma_cm.rs`, called through its `sys` module) in librdmacm's.
    let header = |path: &str| {
        fold_ws(
            &fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("{path}: {e} — install libibverbs-dev and librdmacm-dev (lab/setup does)")),
        )
    };
    let (verbs_h, cma_h) = (header("/usr/include/infiniband/verbs.h"), header("/usr/include/rdma/rdma_cma.h"));
    let anchors = c_anchors();
    assert!(anchors.len() >= 15, "only {} c_ anchors in src/verbs/", anchors.len());
    for (name, CAnchor { proto, body, .. }) in &anchors {
        let proto = fold_ws(proto.trim_end_matches(';'));
        let func = proto.split('(').next().unwrap().rsplit([' ', '*']).next().unwrap();
        let (header, file, module) =
            if func.starts_with("rdma_") { (&cma_h, "rdma_cma.h", "sys") } else { (&verbs_h, "verbs.h", "ffi") };
        assert!(header.contains(&proto), "c_{name}: `{proto}` is not a declaration in {file}");
        assert!(
            func.trim_start_matches('_').starts_with(name.as_str()),
            "c_{name}: its prototype declares `{func}`, another verb"
        );
        // An exported symbol is called as ffi::name( (sys::name( for librdmacm's); a static
        // inline through the ops table, as verbs.h's own body does.
        let call = match proto.starts_with("static inline") {
            true => format!("ops.{}", func.trim_start_matches("ibv_")),
            false => format!("{module}::{func}("),
        };
        assert!(body.iter().any(|l| l.contains(&call)), "c_{name}: no `{call}` in the anchor");
    }
}

#[test]
fn every_stage_chapter_shows_its_c_calls() {
    let lib = read(&root().join("src/lib.rs"));
    let anchors = c_anchors();
    for bin in bins() {
        let row = lib
            .lines()
            .find(|l| l.starts_with(&format!("//! | `{bin}`")))
            .unwrap_or_else(|| panic!("src/lib.rs: no row for {bin} in the step table"));
        let verbs_col = row.rsplit('|').nth(1).unwrap();
        let verbs: Vec<&str> = verbs_col
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|v| v.starts_with("ibv_") || v.starts_with("rdma_"))
            .collect();
        assert!(!verbs.is_empty(), "src/lib.rs: {bin}'s row names no ibv_ or rdma_ call");
        let chapter = read(&book_src().join(format!("{bin}.md")));
        for verb in verbs {
            let anchor = anchors.get(verb).unwrap_or_else(|| panic!("src/verbs/ has no c_{verb} anchor ({bin})"));
            let include = format!("{{{{#include ../../{}:c_{verb}}}}}", anchor.file);
            assert!(chapter.contains(&include), "book/src/{bin}.md does not show {include}");
        }
    }
}
