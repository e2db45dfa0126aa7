//! What the grader checks of a handed file on the host, before anything is built: that it
//! keeps to the safe, self-contained part of the language ([`refusal`]), and whether it is,
//! token for token, the reference's stage or another student's file ([`flags`]). Both read
//! the file through one small lexer ([`tokens`]): a grep would take a word in a string or
//! a comment for code, and miss `r#include_str!`.
//!
//! A hand-in is hostile until proven otherwise. The sandbox bounds what a program does when
//! it runs; this bounds what the compiler makes of the file: it reads nothing but the file
//! (no `include_str!`, `#[path]`, `env!`), keeps to what the compiler checks (no `unsafe`,
//! no `extern`, no assembly), and leaves the linker's symbols alone (`#[link_section]` with
//! `#[used]` runs code before `main`; `#[no_mangle]` can take the place of a library's
//! function). The reference's stages use none of it (a test checks).

mod lex;

use std::path::Path;

use super::handin::sha256;
use lex::{tokens, Kind, Token};

/// What every refusal ends with: the rule, whole.
const RULE: &str = "a hand-in may not (the grader refuses unsafe code, foreign functions, macros that read files \
                    or the environment, and attributes that place or name symbols)";

/// Names refused wherever they are, and why. `env` is a module too (`std::env::var`): it is
/// refused as the macro, `env!`, or renamed to be one (`use std::env as e;` makes `e!`).
/// The keywords `unsafe` and `extern` only as keywords: `r#unsafe` is a plain identifier.
const ANYWHERE: [(&str, &str); 13] = [
    ("unsafe", "opts out of the compiler's checks"),
    ("extern", "declares or exports foreign functions"),
    ("macro_rules", "defines a macro, code the grader's check does not see as it is expanded"),
    ("asm", "is inline assembly"),
    ("global_asm", "is assembly"),
    ("naked_asm", "is assembly"),
    ("include", "reads a file at compile time"),
    ("include_str", "reads a file at compile time"),
    ("include_bytes", "reads a file at compile time"),
    ("option_env", "reads the grader's environment at compile time"),
    ("env", "reads the grader's environment at compile time"),
    ("concat_idents", "makes identifiers the grader's check does not see"),
    // Not in issue 44's list, in its spirit: `mod name;` takes a module from another file.
    ("mod", "takes a module from another file"),
];

/// Names refused inside an attribute (`#[…]`, `#![…]`), and why; `proc_macro` stands for
/// every name it starts (`proc_macro_derive`).
const IN_ATTRIBUTES: [(&str, &str); 9] = [
    ("path", "takes a module from a file of its choosing"),
    ("link_section", "places a symbol where the loader runs it (`.init_array`: before main)"),
    ("no_mangle", "names a symbol for the linker, which can take another's place"),
    ("export_name", "names a symbol for the linker, which can take another's place"),
    ("used", "keeps a symbol nothing uses (with `#[link_section]`, a hook run before main)"),
    ("link", "links a foreign library"),
    ("link_name", "names a foreign function"),
    ("naked", "makes a function of assembly"),
    ("proc_macro", "defines a procedural macro, code the compiler runs"),
];

/// The index of the `]` that closes the `[` at `open`.
fn closing(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t.text {
            "[" => depth += 1,
            "]" if depth == 1 => return i,
            "]" => depth -= 1,
            _ => {}
        }
    }
    tokens.len()
}

/// Why `src`, handed in as `file`, is refused, naming the token and its line (the first
/// one found); `None` when it keeps to the rule.
pub(crate) fn refusal(src: &str, file: &str) -> Option<String> {
    let tokens = match tokens(src) {
        Ok(tokens) => tokens,
        Err(e) => return Some(format!("{file}:{e}: the grader reads a hand-in as the compiler does, and cannot")),
    };
    let text = |i: usize| tokens.get(i).map_or("", |t| t.text);
    let mut attribute_end = 0;
    for (i, t) in tokens.iter().enumerate() {
        if t.text == "#" {
            let open = if text(i + 1) == "!" { i + 2 } else { i + 1 };
            if text(open) == "[" {
                // The furthest end: an attribute inside another cannot end the outer early.
                attribute_end = attribute_end.max(closing(&tokens, open));
            }
        }
        if !matches!(t.kind, Kind::Ident | Kind::RawIdent) {
            continue;
        }
        let name = t.name();
        let bang = text(i + 1) == "!";
        let refused = match name {
            "unsafe" | "extern" if t.kind == Kind::RawIdent => None,
            "env" if bang => Some("env!".to_string()),
            "env" if text(i + 1) == "as" => Some("env as".to_string()),
            "env" => None,
            "mod" if matches!(tokens.get(i + 1), Some(n) if n.kind != Kind::Punct) && text(i + 2) == ";" => {
                Some(format!("mod {};", text(i + 1)))
            }
            "mod" => None,
            n if ANYWHERE.iter().any(|(a, _)| *a == n) => Some(if bang { format!("{n}!") } else { n.to_string() }),
            n if i < attribute_end && (n.starts_with("proc_macro") || IN_ATTRIBUTES.iter().any(|(a, _)| *a == n)) => {
                Some(format!("#[{n}]"))
            }
            _ => None,
        };
        if let Some(shown) = refused {
            let key = if name.starts_with("proc_macro") { "proc_macro" } else { name };
            let why = ANYWHERE.iter().chain(&IN_ATTRIBUTES).find(|(a, _)| *a == key).map_or("", |(_, w)| w);
            return Some(format!("{file}:{}: `{shown}` {why}: {RULE}", t.line));
        }
    }
    None
}

/// A key of `src`'s tokens: two files have the same key when they are the same token for
/// token, whatever their comments and whitespace. `None` when the file does not lex.
pub(crate) fn token_key(src: &str) -> Option<String> {
    let tokens = tokens(src).ok()?;
    // Each token with its length: no two streams run together into one.
    let stream: String = tokens.iter().map(|t| format!("{}:{}\n", t.text.len(), t.text)).collect();
    Some(sha256(stream.as_bytes()))
}

/// What the grader knows of one step before it takes the hand-ins, read on the host (in
/// the VM the sources are hidden): the token keys of the reference's stage and of the
/// exercise as handed out.
pub(crate) struct Known {
    bin: String,
    stage_file: String,
    reference: Option<String>,
    template: Option<String>,
}

/// [`Known`] of each of `steps`.
pub(crate) fn known(project: &Path, steps: &[&testkit::Step]) -> Result<Vec<Known>, String> {
    let mut out = Vec::new();
    for step in steps {
        let stage_file = format!("src/stages/{}.rs", step.stage());
        let path = project.join(&stage_file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        // A step without holes has no exercise: no template to leave untouched.
        let template = crate::exercise::exercise_text(step.nn()).ok();
        out.push(Known {
            bin: step.bin.clone(),
            stage_file,
            reference: token_key(&text),
            template: template.as_deref().and_then(token_key),
        });
    }
    Ok(out)
}

/// Takes a file `bytes` of step `bin`: appends to a students/NAME/handin.tsv's `record` why
/// it is refused (`refused BIN WHY`), or its token key (`tokens BIN KEY`) and whether it is
/// the reference's (`same_tokens_as BIN WHAT`). Returns whether to build it. An untouched
/// exercise gets no key: every student was handed it, and two who leave it so did not copy.
/// The book quotes the reference's stages by anchor, so a copy of the book's code is a copy
/// of the reference's.
pub(crate) fn take(known: &[Known], bin: &str, bytes: &[u8], record: &mut String) -> bool {
    use std::fmt::Write as _;
    let file = format!("exercises/{bin}.rs");
    let (text, why) = match std::str::from_utf8(bytes) {
        Err(_) => ("", Some(format!("{file}: not UTF-8 text, so not Rust: {RULE}"))),
        Ok(text) => (text, refusal(text, &file)),
    };
    if let Some(why) = why {
        let _ = writeln!(record, "refused\t{bin}\t{}", why.replace(['\t', '\n'], " "));
        return false;
    }
    let (Some(key), Some(k)) = (token_key(text), known.iter().find(|k| k.bin == bin)) else {
        return true;
    };
    if k.reference.as_ref() == Some(&key) {
        let _ = writeln!(record, "same_tokens_as\t{bin}\tthe reference's {}", k.stage_file);
    }
    if k.template.as_ref() != Some(&key) {
        let _ = writeln!(record, "tokens\t{bin}\t{key}");
    }
    true
}

/// Why the file of step `bin` in a students/NAME/handin.tsv's key-values was refused.
pub(crate) fn refused<'a>(handin: &'a [(String, String)], bin: &str) -> Option<&'a str> {
    handin.iter().find_map(|(k, v)| (k == "refused").then(|| v.strip_prefix(bin)?.strip_prefix('\t')).flatten())
}

/// A handed file flagged: what it is the same as, token for token.
pub(crate) struct Flag {
    pub(crate) bin: String,
    pub(crate) text: String,
}

/// `a's`, `a's and b's`, `a's, b's and c's`.
fn owners(names: &[&str]) -> String {
    let owned: Vec<String> = names.iter().map(|n| format!("{n}'s")).collect();
    match owned.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The flags of each student of `names` (their handin.tsv's key-values in `handins`): a
/// file the same token for token as the reference's stage (found by `grade prepare`, where
/// the reference can be read), or as other students' file of the same step (found here,
/// from every student's key, so a student graded before a copy of their file names it too).
pub(crate) fn flags(names: &[String], handins: &[Vec<(String, String)>]) -> Vec<Vec<Flag>> {
    let keys = |handin: &[(String, String)]| -> Vec<String> {
        handin.iter().filter(|(k, _)| k == "tokens").map(|(_, v)| v.clone()).collect()
    };
    let all: Vec<Vec<String>> = handins.iter().map(|h| keys(h)).collect();
    let mut out = Vec::new();
    for (i, handin) in handins.iter().enumerate() {
        let mut flags: Vec<Flag> = Vec::new();
        // The reference first, the students after.
        let lines =
            ["same_tokens_as", "tokens"].into_iter().flat_map(|key| handin.iter().filter(move |(k, _)| k == key));
        for (k, v) in lines {
            let Some((bin, what)) = v.split_once('\t') else { continue };
            let what = match k.as_str() {
                "same_tokens_as" => what.to_string(),
                "tokens" => {
                    let others: Vec<&str> =
                        (0..names.len()).filter(|&j| j != i && all[j].contains(v)).map(|j| names[j].as_str()).collect();
                    if others.is_empty() {
                        continue;
                    }
                    format!("the same as {}", owners(&others))
                }
                _ => continue,
            };
            match flags.iter_mut().find(|f| f.bin == bin) {
                Some(f) => f.text = format!("{} and {what}", f.text),
                None => flags.push(Flag { bin: bin.to_string(), text: what }),
            }
        }
        for f in &mut flags {
            f.text = format!("exercises/{}.rs is token for token {} (comments and whitespace aside)", f.bin, f.text);
        }
        out.push(flags);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refused name is refused where it is code, with its line and why.
    #[test]
    fn what_reaches_outside_the_file_is_refused() {
        for (src, shown, line) in [
            ("fn f() {\n    unsafe { g() }\n}", "`unsafe`", 2),
            ("extern \"C\" fn f() {}", "`extern`", 1),
            ("macro_rules! m { () => {} }", "`macro_rules!`", 1),
            ("use std::arch::asm;", "`asm`", 1),
            ("const A: &str = include_str!(\"/etc/passwd\");", "`include_str!`", 1),
            ("const A: &[u8] = r#include_bytes!(\"x\");", "`include_bytes!`", 1),
            ("include!(\"x.rs\");", "`include!`", 1),
            ("const H: &str = env!(\"HOME\");", "`env!`", 1),
            ("use std::env as e;", "`env as`", 1),
            ("const H: Option<&str> = option_env!(\"HOME\");", "`option_env!`", 1),
            ("\n\n#[path = \"../../x.rs\"]\nmod answer;", "`#[path]`", 3),
            ("mod answer;", "`mod answer;`", 1),
            ("#[cfg_attr(all(), path = \"x.rs\")] mod a {}", "`#[path]`", 1),
            ("#![no_mangle]", "`#[no_mangle]`", 1),
            ("#[export_name = \"main\"] fn f() {}", "`#[export_name]`", 1),
            (
                "#[allow(unsafe_code)]\n#[link_section = \".init_array\"]\n#[used]\nstatic H: u8 = 0;",
                "`#[link_section]`",
                2,
            ),
            ("#[used] static H: u8 = 0;", "`#[used]`", 1),
            ("#[link(name = \"c\")] fn f() {}", "`#[link]`", 1),
            ("#[proc_macro_derive(X)] fn f() {}", "`#[proc_macro_derive]`", 1),
            ("fn main() {\n\"x\";\n\"never ends", "does not end", 3),
            ("#!/bin/sh\n\"", "shebang", 1),
        ] {
            let why = refusal(src, "exercises/05_x.rs").unwrap_or_else(|| panic!("not refused: {src}"));
            assert!(why.starts_with(&format!("exercises/05_x.rs:{line}: ")), "{src}: {why}");
            assert!(why.contains(shown), "{src}: {why}");
        }
        let why = refusal("const A: &str = include_str!(\"a\");", "exercises/05_x.rs").unwrap();
        assert_eq!(
            why,
            "exercises/05_x.rs:1: `include_str!` reads a file at compile time: a hand-in may not (the grader \
             refuses unsafe code, foreign functions, macros that read files or the environment, and attributes \
             that place or name symbols)"
        );
    }

    /// What only looks like a refused name, is one outside an attribute, or is a raw
    /// identifier that cannot be the keyword.
    #[test]
    fn honest_code_that_looks_alike_passes() {
        let src = "#![allow(unused)]\n#[must_use = \"used\"]\nfn f(path: &str, used: u8) -> Option<String> {\n\
                   let r#unsafe = 1; let link = path; let c = 'x';\n\
                   std::env::var(\"HOME\").ok() }\nmod tests { use std::env; }";
        assert_eq!(refusal(src, "f.rs"), None);
    }

    fn project() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
    }

    /// The reference's stages are what a correct hand-in looks like: the rule refuses
    /// none, and no exercise as handed out either.
    #[test]
    fn no_stage_and_no_exercise_is_refused() {
        let dir = project().join("src/stages");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            // The list of stage modules (`mod alloc_pd;`, …): no step's stage, never handed in.
            if path.ends_with("mod.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(refusal(&text, &path.display().to_string()), None);
            checked += 1;
        }
        assert!(checked >= 10, "only {checked} stages in {}", dir.display());
        for step in testkit::steps() {
            if let Ok(text) = crate::exercise::exercise_text(step.nn()) {
                assert_eq!(refusal(&text, &step.bin), None);
            }
        }
    }

    /// A class of four for step 05: a copy of the reference with its comments changed, two
    /// students with the same file but for the layout, an untouched exercise, an honest
    /// one, and a refused one.
    #[test]
    fn copies_are_flagged_and_honest_files_are_not() {
        let steps = testkit::steps();
        let step = steps.iter().find(|s| s.nn() == "05").unwrap();
        let known = known(&project(), &[step]).unwrap();
        let reference = std::fs::read_to_string(project().join("src/stages/modify_qp_rtr.rs")).unwrap();
        let exercise = crate::exercise::exercise_text("05").unwrap();
        let honest = reference.replacen(
            "qp_state: IBV_QPS_RTR,\n        path_mtu: mtu,",
            "path_mtu: mtu, qp_state: IBV_QPS_RTR,",
            1,
        );
        assert_ne!(honest, reference);
        let files = [
            ("alice", reference.replace("//", "// copied:")),
            ("bob", honest.replace(",\n", " ,\n")),
            ("carol", honest.clone() + "\n\n// mine\n"),
            ("dave", exercise.clone()),
            ("erin", exercise.replace("// EXERCISE", "// a student's EXERCISE")),
            ("frank", honest.replace("attr.ah_attr.is_global = 1;", "attr.ah_attr.is_global = 2;")),
            ("grace", reference.clone() + "const A: &str = include_str!(\"x\");\n"),
        ];
        let mut handins: Vec<Vec<(String, String)>> = Vec::new();
        for (_, text) in &files {
            let mut record = String::new();
            let build = take(&known, &step.bin, text.as_bytes(), &mut record);
            assert_eq!(build, !record.starts_with("refused"), "{record}");
            handins
                .push(record.lines().filter_map(|l| l.split_once('\t')).map(|(k, v)| (k.into(), v.into())).collect());
        }
        assert!(refused(&handins[6], &step.bin).unwrap().contains("`include_str!`"));
        let names: Vec<String> = files.iter().map(|(n, _)| n.to_string()).collect();
        let flags = flags(&names, &handins);
        let flag = |i: usize| flags[i].iter().map(|f| f.text.as_str()).collect::<Vec<_>>().join("|");
        assert_eq!(
            flag(0),
            "exercises/05_modify_qp_rtr.rs is token for token the reference's src/stages/modify_qp_rtr.rs \
             (comments and whitespace aside)"
        );
        assert_eq!(
            flag(1),
            "exercises/05_modify_qp_rtr.rs is token for token the same as carol's (comments and whitespace aside)"
        );
        assert!(flag(2).contains("the same as bob's"), "{}", flag(2));
        for i in [3, 4, 5, 6] {
            assert_eq!(flag(i), "", "{}", names[i]);
        }
        assert_eq!(owners(&["a", "b", "c"]), "a's, b's and c's");
    }
}
