//! `grade intake CLASS SUBMISSION…`: the hand-ins into `CLASS/incoming/NAME/`, each with
//! `CLASS/origin/NAME` saying where it came from and when (`source`, `received`, and a git
//! hand-in's `commit`).
//!
//! Who a hand-in is from, and when it came, is read from the channel it came through, never
//! from what the student wrote. The name is the archive's file name (`hand-in-NAME.tar.gz`
//! or `NAME.tar.gz`), the unpacked directory's name, the branch `hand-in/NAME`, or, in
//! Moodle's submissions zip, the roster's account for Moodle's participant (moodle.rs): the
//! instructor's LMS, or the git server's accounts, decide who can put it there. The time is
//! when the hand-in reached the instructor's disk, or when the grader first fetched the
//! commit. The manifest's account, host and time are the student's to write: `grade
//! prepare` shows them as `claimed_*`, never as facts.
//!
//! One name is one student: a name that breaks [`valid_name`], or a branch with a `/` after
//! `hand-in/`, is refused, never mangled into another student's; a second hand-in of a
//! student in one run is refused, never taken over the first. A hand-in holds directories
//! and regular files only: a symbolic or hard link, a device, a FIFO or a member named
//! outside the hand-in would have the host read or write what the student chose, so the
//! whole hand-in is refused, the path named. A refused hand-in of a valid name is still
//! that student's (an empty `incoming/NAME/` and `refused` in its origin, which `grade
//! prepare` turns into the student's failure); every refusal is printed and listed in
//! `CLASS/reports/refused.txt`.

use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use super::handin::sha256;
use super::moodle;
use super::reports::utc;
use super::{done, io};
use unpack::{from_git, kind, regular_tree, unpack};

mod unpack;

/// The rule [`valid_name`] keeps, as a refusal says it.
pub(crate) const NAME_RULE: &str =
    "a student's name is letters, digits, - and _, starts with a letter or digit, and is at most 64 bytes";

/// A student's name in CLASS (a directory and file name part, a cargo package's too): the
/// one rule for every way a hand-in comes in (see [`NAME_RULE`]).
pub(crate) fn valid_name(name: &str) -> bool {
    name.len() <= 64
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn checked(name: &str) -> Result<String, String> {
    if valid_name(name) {
        Ok(name.to_string())
    } else {
        Err(format!("`{name}` names no student ({NAME_RULE})"))
    }
}

/// The student an archive's file name names: `hand-in-NAME.tar.gz` or `NAME.tar.gz`.
fn archive_name(file: &str) -> Result<String, String> {
    let stem = file
        .strip_suffix(".tar.gz")
        .ok_or("neither a hand-in archive (hand-in-NAME.tar.gz) nor a directory of hand-ins")?;
    checked(stem.strip_prefix("hand-in-").unwrap_or(stem))
}

/// The student a branch names: `hand-in/NAME`, nothing after NAME.
fn branch_name(branch: &str) -> Result<String, String> {
    let rest = branch.strip_prefix("hand-in/").ok_or("not a branch hand-in/NAME")?;
    if rest.contains('/') {
        return Err("a hand-in branch is hand-in/NAME, with no `/` after `hand-in/`".into());
    }
    checked(rest)
}

/// Where a hand-in came from.
enum Channel {
    /// A hand-in archive, `lab/submit`'s.
    Archive(PathBuf),
    /// An unpacked hand-in.
    Directory(PathBuf),
    /// The commit of a branch `hand-in/NAME` of `remote`, fetched into `mirror`.
    Branch { remote: String, branch: String, commit: String, mirror: PathBuf },
    /// A student's one file in Moodle's "Download all submissions" zip (moodle.rs).
    Moodle { zip: PathBuf, entry: String, refused: Option<String> },
}

impl Channel {
    /// As `origin/NAME`'s `source` and a refusal say it.
    fn source(&self) -> String {
        match self {
            Channel::Archive(path) | Channel::Directory(path) => path.display().to_string(),
            Channel::Branch { remote, branch, .. } => format!("{remote} {branch}"),
            Channel::Moodle { zip, entry, .. } => format!("{} {entry}", zip.display()),
        }
    }
}

/// A hand-in found, and the student it names (or why it names none).
struct Found {
    name: Result<String, String>,
    channel: Channel,
}

/// The hand-ins SUBMISSION holds: an archive, Moodle's zip of them (named through the
/// roster), a directory of archives and unpacked hand-ins, or a git remote's `hand-in/*`
/// branches (fetched into a mirror in CLASS).
fn find(class: &Path, submission: &str, roster: &moodle::Loaded) -> Result<Vec<Found>, String> {
    let path = Path::new(submission);
    let absolute = std::path::absolute(path).map_err(io(path))?;
    // The instructor's own arguments are followed if they are links; what is in them is not.
    let meta = path.metadata();
    if meta.as_ref().is_ok_and(|m| m.is_file()) && submission.ends_with(".zip") {
        if roster.worksheet.is_empty() {
            return Err(format!(
                "{submission}: Moodle's zip names students by participant id only: give the assignment's grading \
                 worksheet (--moodle-worksheet) and the roster with each student's Moodle email (--roster)"
            ));
        }
        let found = moodle::find(&absolute, &roster.directory, &roster.worksheet)?;
        return Ok(found
            .into_iter()
            .map(|moodle::Entry { name, entry, refused }| Found {
                name,
                channel: Channel::Moodle { zip: absolute.clone(), entry, refused },
            })
            .collect());
    }
    if meta.as_ref().is_ok_and(|m| m.is_file()) {
        let file = path.file_name().unwrap_or_default().to_string_lossy();
        return Ok(vec![Found { name: archive_name(&file), channel: Channel::Archive(absolute) }]);
    }
    if meta.is_ok_and(|m| m.is_dir()) && !path.join(".git").exists() && !path.join("HEAD").is_file() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io(path))?
            .map(|e| e.map(|e| absolute.join(e.file_name())))
            .collect::<Result<_, _>>()
            .map_err(io(path))?;
        entries.sort();
        let mut found = Vec::new();
        for entry in entries {
            let meta = entry.symlink_metadata().map_err(io(&entry))?;
            let file = entry.file_name().unwrap_or_default().to_string_lossy().into_owned();
            found.push(if meta.is_dir() {
                Found { name: checked(&file), channel: Channel::Directory(entry) }
            } else if meta.is_file() {
                Found { name: archive_name(&file), channel: Channel::Archive(entry) }
            } else {
                Found {
                    name: Err(format!("{}, not a hand-in (an archive or a directory)", kind(&meta))),
                    channel: Channel::Archive(entry),
                }
            });
        }
        return Ok(found);
    }
    fetch(class, submission)
}

/// `git -C DIR ARGS…`'s output, or what git said.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        return Err(format!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Fetches the `hand-in/*` branches of `remote` into its mirror in CLASS (kept: the next
/// run fetches only what is new), and records when each commit was first fetched there
/// (`received/COMMIT`): the time a commit reached the grader, which no committer date can
/// claim.
fn fetch(class: &Path, remote: &str) -> Result<Vec<Found>, String> {
    let mirror = class.join(format!("remote-{}.git", &sha256(remote.as_bytes())[..12]));
    if !mirror.is_dir() {
        git(class, &["init", "--quiet", "--bare", &mirror.to_string_lossy()])?;
    }
    // A remote that is a path is the instructor's, from here: git runs in the mirror.
    let url = match Path::new(remote).exists() {
        true => std::path::absolute(remote).map_err(io(Path::new(remote)))?.to_string_lossy().into_owned(),
        false => remote.to_string(),
    };
    git(&mirror, &["fetch", "--quiet", "--prune", &url, "+refs/heads/hand-in/*:refs/heads/hand-in/*"])?;
    let received = mirror.join("received");
    std::fs::create_dir_all(&received).map_err(io(&received))?;
    let mut found = Vec::new();
    for line in git(&mirror, &["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/hand-in/"])?.lines() {
        let Some((commit, branch)) = line.split_once(' ').and_then(|(c, r)| Some((c, r.strip_prefix("refs/heads/")?)))
        else {
            continue;
        };
        if !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("git for-each-ref: not a commit: {line}"));
        }
        let record = received.join(commit);
        if !record.exists() {
            std::fs::write(&record, format!("{}\n", utc(secs(SystemTime::now())))).map_err(io(&record))?;
        }
        let channel = Channel::Branch {
            remote: remote.to_string(),
            branch: branch.to_string(),
            commit: commit.to_string(),
            mirror: mirror.clone(),
        };
        found.push(Found { name: branch_name(branch), channel });
    }
    Ok(found)
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// When a file or directory was last modified, in UTC.
fn mtime(path: &Path) -> Result<String, String> {
    Ok(utc(secs(path.metadata().and_then(|m| m.modified()).map_err(io(path))?)))
}

/// Takes the hand-in of `name` from `channel`: unpacked in a fresh private directory
/// (CLASS/intake/NAME), checked, and only then put in CLASS/incoming/NAME, with
/// CLASS/origin/NAME. A refused one leaves `incoming/NAME/` empty and its reason in the
/// origin, and is the `Err` of the inner result; the outer one is the grader's own failure.
fn take(class: &Path, name: &str, channel: &Channel) -> Result<Result<(), String>, String> {
    let (incoming, staging) = (class.join("incoming").join(name), class.join("intake").join(name));
    for dir in [&incoming, &staging] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(io(dir))?;
        }
    }
    std::fs::create_dir_all(class.join("intake")).map_err(io(class))?;
    std::fs::DirBuilder::new().mode(0o700).create(&staging).map_err(io(&staging))?;
    let mut origin = format!("source\t{}\n", channel.source());
    let taken = match channel {
        // The file's time on the instructor's disk: when it came there (the LMS's download,
        // a copy), which the student does not write. A production system would take the
        // LMS's own submission time through its API.
        Channel::Archive(file) => mtime(file).and_then(|t| {
            origin += &format!("received\t{t}\n");
            unpack(file, &staging)
        }),
        Channel::Directory(dir) => mtime(dir).and_then(|t| {
            origin += &format!("received\t{t}\n");
            regular_tree(dir)?.iter().try_for_each(|(path, is_dir)| {
                let (from, to) = (dir.join(path), staging.join(path));
                match is_dir {
                    true => std::fs::create_dir(&to).map_err(io(&to)),
                    false => std::fs::copy(&from, &to).map(drop).map_err(io(&from)),
                }
            })
        }),
        // Moodle's zip: its time on this disk, as an archive's; the one file Moodle kept for
        // the student, written beside the staging directory, then unpacked as an archive is.
        Channel::Moodle { zip, entry, refused } => mtime(zip).and_then(|t| {
            origin += &format!("received\t{t}\n");
            if let Some(why) = refused {
                return Err(why.clone());
            }
            let archive = staging.with_extension("tar.gz");
            let _ = std::fs::remove_file(&archive);
            let unpacked = moodle::extract(zip, entry, &archive).and_then(|()| unpack(&archive, &staging));
            let _ = std::fs::remove_file(&archive);
            unpacked
        }),
        Channel::Branch { commit, mirror, .. } => {
            let record = mirror.join("received").join(commit);
            let received = std::fs::read_to_string(&record).map_err(io(&record))?;
            origin += &format!("commit\t{commit}\nreceived\t{}\n", received.trim());
            from_git(mirror, commit, &staging)
        }
    };
    // Whatever made it, what is taken is checked once more as it lies on this disk.
    let taken = taken.and_then(|()| regular_tree(&staging).map(drop));
    match &taken {
        Ok(()) => std::fs::rename(&staging, &incoming).map_err(io(&incoming))?,
        Err(why) => {
            std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
            std::fs::create_dir(&incoming).map_err(io(&incoming))?;
            origin += &format!("refused\t{}\n", why.replace(['\t', '\n'], " "));
        }
    }
    let path = class.join("origin").join(name);
    std::fs::write(&path, origin).map_err(io(&path))?;
    Ok(taken)
}

/// `grade intake CLASS [--roster ROSTER.csv] [--moodle-worksheet WORKSHEET.csv]
/// SUBMISSION…`: takes every hand-in SUBMISSION holds (see the module's doc) but those of
/// students already graded (CLASS/results/NAME.tsv), and prints and lists the refused ones
/// in CLASS/reports/refused.txt (empty when none was). A refusal is not an error: the others
/// are taken. The roster's Moodle emails are kept in CLASS/roster.tsv for `grade report`.
pub(crate) fn intake_cmd(
    class: &Path,
    roster: Option<&Path>,
    worksheet: Option<&Path>,
    submissions: &[String],
) -> Result<(), String> {
    let roster = moodle::load(roster, worksheet)?;
    for dir in ["incoming", "origin", "results", "reports"] {
        std::fs::create_dir_all(class.join(dir)).map_err(io(class))?;
    }
    if !roster.roster.is_empty() {
        moodle::write_roster(class, &roster.roster)?;
    }
    let mut found = Vec::new();
    for submission in submissions {
        found.extend(find(class, submission, &roster)?);
    }
    let (mut refused, mut first, mut taken, mut graded) = (Vec::new(), HashMap::new(), 0, 0);
    for Found { name, channel } in found {
        let name = match name {
            Ok(name) => name,
            Err(why) => {
                refused.push(format!("{}: {why}", channel.source()));
                continue;
            }
        };
        if let Some(earlier) = first.get(&name) {
            refused.push(format!(
                "{}: a second hand-in of {name}, refused: the one from {earlier} is theirs",
                channel.source()
            ));
            continue;
        }
        first.insert(name.clone(), channel.source());
        if done(class, &name) {
            graded += 1;
        } else if let Err(why) = take(class, &name, &channel)? {
            refused.push(format!("{}: {name}'s hand-in, refused (their report says why): {why}", channel.source()));
        } else {
            taken += 1;
        }
    }
    let _ = std::fs::remove_dir(class.join("intake"));
    let list = class.join("reports").join("refused.txt");
    std::fs::write(&list, refused.iter().map(|r| format!("{r}\n")).collect::<String>()).map_err(io(&list))?;
    for r in &refused {
        eprintln!("grade: refused {r}");
    }
    eprintln!(
        "grade: {taken} hand-ins taken, {graded} of students graded before (kept), {} refused{}",
        refused.len(),
        if refused.is_empty() { String::new() } else { format!(" (listed in {})", list.display()) }
    );
    Ok(())
}

#[cfg(test)]
mod tests;
