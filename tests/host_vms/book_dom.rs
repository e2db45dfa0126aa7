//! The built book, opened in a real browser: Debian's headless Chromium renders one step
//! chapter and we read its DOM. It must show the chapter's title, the stage's code (an
//! included Rust block, highlighted by the page's scripts) and the step's trace (included
//! from the real lab run kept beside its snapshot, `book/src/output/`), so a reader of
//! `mdbook serve book` sees what the tests ran.
//!
//! Also `mdbook test book` (every fence is `rust,ignore`, but mdBook still starts one rustdoc
//! per chapter, which is slow under the lab VM's emulated CPU, so it runs here).
//!
//! Host-only (`cargo test --test host_vms`): it needs `mdbook` (book/install-tools) and `chromium`
//! (`book/install-tools --with-chromium`, i.e. `apt-get install chromium`), and fails loudly
//! without them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The chapter we open, and the output and stage file its "Run it" and code come from.
const CHAPTER: &str = "05_modify_qp_rtr";
const TITLE: &str = "05 Exchange addresses, move to RTR";
const STAGE_FILE: &str = "src/stages/modify_qp_rtr.rs";
const OUTPUT: &str = "book/src/output/steps__05_modify_qp_rtr-server.txt";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn find_tool(name: &str, hint: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` not found on PATH: {hint}"))
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("book-dom").join(format!("{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `cmd` to completion or kills it after `limit`; returns stdout.
fn run_with_timeout(cmd: &mut Command, limit: Duration) -> (bool, String, String) {
    // One directory per call: the tests run in parallel in one process.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let out_path = temp_dir(&format!("run{}", CALLS.fetch_add(1, Ordering::Relaxed))).join("out");
    let err_path = out_path.with_file_name("err");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    let ok = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.success();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish in {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (ok, fs::read_to_string(&out_path).unwrap_or_default(), fs::read_to_string(&err_path).unwrap_or_default())
}

/// Text content of an HTML fragment: tags removed, the common entities decoded.
fn text_of(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The `<code class="…lang…">…</code>` elements of the DOM, as (class, text).
fn code_blocks(dom: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find("<code") {
        let tag_end = rest[i..].find('>').map(|e| i + e).unwrap();
        let tag = &rest[i..tag_end];
        let class =
            tag.split_once("class=\"").map(|(_, c)| c.split('"').next().unwrap().to_string()).unwrap_or_default();
        let close = rest[tag_end..].find("</code>").map(|e| tag_end + e).unwrap();
        blocks.push((class, text_of(&rest[tag_end + 1..close])));
        rest = &rest[close..];
    }
    blocks
}

fn first_content_line(lines: impl Iterator<Item = String>) -> String {
    lines.map(|l| l.trim().to_string()).find(|l| l.len() > 8).expect("a non-trivial line")
}

/// `mdbook build book` into a fresh directory of ours; its path.
fn build_book(tag: &str) -> PathBuf {
    let mdbook = find_tool("mdbook", "run book/install-tools");
    let html = temp_dir(tag);
    let (ok, out, err) = run_with_timeout(
        Command::new(&mdbook).arg("build").arg(root().join("book")).arg("-d").arg(&html),
        Duration::from_secs(120),
    );
    assert!(ok, "mdbook build failed:\n{out}{err}");
    html
}

/// The DOM of `page` after its scripts ran, from headless Chromium (with `extra` flags).
fn chromium_dom(page: &Path, extra: &[&str], limit: Duration) -> String {
    let chromium = find_tool("chromium", "run book/install-tools --with-chromium (apt-get install chromium)");
    let profile = temp_dir("chromium-profile");
    let (ok, dom, err) = run_with_timeout(
        Command::new(&chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ])
            .args(extra)
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("--dump-dom")
            .arg(format!("file://{}", page.display())),
        limit,
    );
    let _ = fs::remove_dir_all(&profile);
    assert!(ok && dom.contains("</html>"), "chromium --dump-dom failed:\n{err}");
    dom
}

#[test]
fn chromium_renders_a_step_chapter_with_its_code_and_trace() {
    let html = build_book("html");
    let page = html.join(format!("{CHAPTER}.html"));
    assert!(page.is_file(), "{} not built", page.display());
    let dom = chromium_dom(&page, &[], Duration::from_secs(120));

    // The title, in <title> and as the chapter's heading.
    let title = dom.split_once("<title>").and_then(|(_, t)| t.split_once("</title>")).map(|(t, _)| text_of(t));
    assert!(
        title.as_deref().is_some_and(|t| t.starts_with(TITLE)),
        "<title> is {title:?}, expected it to start with {TITLE:?}"
    );
    assert!(text_of(&dom).contains(TITLE), "the heading {TITLE:?} is not on the page");

    let blocks = code_blocks(&dom);

    // An included code block: the stage's first line of code, in a Rust block that
    // highlight.js has processed (the page's scripts ran).
    let stage_src = fs::read_to_string(root().join(STAGE_FILE)).expect("stage file");
    let stage_body = stage_src
        .lines()
        .skip_while(|l| !l.contains("ANCHOR: stage"))
        .skip(1)
        .filter(|l| !l.contains("ANCHOR"))
        .map(str::to_string);
    let code_line = first_content_line(stage_body);
    assert!(
        blocks.iter().any(|(class, text)| class.contains("language-rust") && text.contains(&code_line)),
        "no rendered Rust block contains the stage's line {code_line:?}; code blocks: {:?}",
        blocks.iter().map(|(c, t)| (c, t.chars().take(60).collect::<String>())).collect::<Vec<_>>()
    );
    assert!(
        blocks.iter().any(|(class, _)| class.contains("language-rust") && class.contains("hljs")),
        "the Rust blocks were not highlighted: did the page's JavaScript run?"
    );

    // An included trace: the real output's first line, in a console block.
    let output = fs::read_to_string(root().join(OUTPUT)).expect("the chapter's output file");
    let trace_line = first_content_line(output.lines().map(str::to_string));
    assert!(
        blocks.iter().any(|(class, text)| class.contains("language-console") && text.contains(&trace_line)),
        "no rendered console block contains the trace line {trace_line:?}"
    );
    // And no snapshot instead of it: no insta header, no placeholder.
    assert!(
        !text_of(&dom).contains("expression:") && !text_of(&dom).contains("[QPN:"),
        "a snapshot (YAML header or placeholders) leaked into the page"
    );
}

#[test]
fn mdbook_test_passes() {
    let mdbook = find_tool("mdbook", "run book/install-tools");
    let (ok, out, err) =
        run_with_timeout(Command::new(&mdbook).arg("test").arg(root().join("book")), Duration::from_secs(300));
    assert!(ok, "mdbook test book failed:\n{out}{err}");
    let problems: Vec<&str> = err.lines().chain(out.lines()).filter(|l| l.contains("ERROR")).collect();
    assert!(problems.is_empty(), "mdbook test book logged errors:\n{}", problems.join("\n"));
}

/// No listing or output block of a step's chapter scrolls sideways at 1280 px: a reader sees
/// the whole of every trace line (book/theme/wrap.css wraps them). Chromium loads each
/// chapter into a 1280-px-wide frame of a page of ours, which opens every folded
/// `<details>` and lists each `<pre>` wider than its box.
#[test]
fn no_block_of_a_step_chapter_scrolls_sideways_at_1280px() {
    let html = build_book("html-width");
    let mut chapters: Vec<String> = fs::read_dir(&html)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| {
            n.len() > 3
                && n.as_bytes()[2] == b'_'
                && n.as_bytes()[..2].iter().all(u8::is_ascii_digit)
                && n.ends_with(".html")
        })
        .collect();
    chapters.sort();
    let steps = testkit::steps().len();
    assert_eq!(chapters.len(), steps, "the {steps} steps' chapters built: {chapters:?}");

    let measure = html.join("measure-width.html");
    let list = chapters.iter().map(|c| format!("{c:?}")).collect::<Vec<_>>().join(",");
    fs::write(
        &measure,
        format!(
            r#"<!DOCTYPE html><html><body><pre id="result">pending</pre>
<iframe id="f" style="width:1280px;height:900px;border:0"></iframe>
<script>
const chapters = [{list}];
const found = new Set();
const seen = new Set();
function next(i) {{
  if (i === chapters.length) {{
    document.getElementById("result").textContent =
      "blocks " + seen.size + "\n" + [...found].join("\n");
    return;
  }}
  const f = document.getElementById("f");
  let measured = false;
  f.onload = () => {{
    // Measure each chapter once, on its first load.
    if (measured) return;
    measured = true;
    const d = f.contentDocument;
    d.querySelectorAll("details").forEach(x => x.open = true);
    d.querySelectorAll("main pre").forEach((p, k) => {{
      seen.add(chapters[i] + " " + k);
      // The scroller may be the <pre> or the highlighted <code> inside it.
      for (const e of [p, p.querySelector("code")]) {{
        if (e && e.scrollWidth > e.clientWidth + 1) {{
          found.add(chapters[i] + " block " + k + ": " + e.scrollWidth + " px in a " +
            e.clientWidth + " px box: " + p.textContent.trim().replace(/\s+/g, " ").slice(0, 70));
          break;
        }}
      }}
    }});
    next(i + 1);
  }};
  f.src = chapters[i];
}}
next(0);
</script></body></html>"#
        ),
    )
    .unwrap();
    let dom = chromium_dom(
        &measure,
        &[
            // The frame's chapters are files too: let our page read their DOM.
            "--allow-file-access-from-files",
            "--window-size=1300,1000",
            "--virtual-time-budget=60000",
        ],
        Duration::from_secs(180),
    );
    let result = dom
        .split_once("<pre id=\"result\">")
        .and_then(|(_, r)| r.split_once("</pre>"))
        .map(|(r, _)| text_of(r))
        .unwrap_or_default();
    let mut lines = result.lines();
    let counted = lines.next().unwrap_or("");
    let blocks: usize = counted
        .strip_prefix("blocks ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the measuring page did not finish: {result:?}"));
    assert!(blocks >= 100, "only {blocks} blocks measured in the steps' chapters");
    let wide: Vec<&str> = lines.collect();
    assert!(wide.is_empty(), "{} of {blocks} blocks scroll sideways at 1280 px:\n{}", wide.len(), wide.join("\n"));
}
