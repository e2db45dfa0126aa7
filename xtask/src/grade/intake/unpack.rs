//! What a hand-in may hold — directories and regular files, nothing named outside it —
//! checked before anything of it is written where the grader will read: a tar archive's
//! members from tar's own listing, a git commit's tree from `git ls-tree`, a directory by
//! walking it without following links.

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::git;
use crate::grade::io;

/// What a file that is not a directory or a regular file of one name is, as a refusal says.
pub(super) fn kind(meta: &std::fs::Metadata) -> String {
    let t = meta.file_type();
    if t.is_symlink() {
        "a symbolic link".into()
    } else if t.is_file() {
        format!("a hard link (a file of {} names)", meta.nlink())
    } else if t.is_block_device() || t.is_char_device() {
        "a device file".into()
    } else if t.is_fifo() {
        "a FIFO".into()
    } else if t.is_socket() {
        "a socket".into()
    } else {
        "neither a directory nor a regular file".into()
    }
}

/// The paths under `root`, relative to it, parents first, each with whether it is a
/// directory; anything but a directory or a regular file of one name refuses the hand-in,
/// its path named.
pub(super) fn regular_tree(root: &Path) -> Result<Vec<(PathBuf, bool)>, String> {
    let (mut out, mut dirs) = (Vec::new(), vec![PathBuf::new()]);
    while let Some(dir) = dirs.pop() {
        let at = root.join(&dir);
        let mut entries: Vec<_> =
            std::fs::read_dir(&at).map_err(io(&at))?.collect::<Result<_, _>>().map_err(io(&at))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            // Not followed: a link is what is refused, not what it points at.
            let meta = entry.path().symlink_metadata().map_err(io(&entry.path()))?;
            let path = dir.join(entry.file_name());
            if meta.is_dir() {
                out.push((path.clone(), true));
                dirs.push(path);
            } else if meta.is_file() && meta.nlink() == 1 {
                out.push((path, false));
            } else {
                return Err(format!(
                    "{}: {}; a hand-in holds directories and regular files only",
                    path.display(),
                    kind(&meta)
                ));
            }
        }
    }
    Ok(out)
}

/// `tar ARGS…`'s output, or what tar said.
fn tar(args: &[&std::ffi::OsStr]) -> Result<String, String> {
    let out = Command::new("tar").env("LC_ALL", "C").args(args).output().map_err(|e| format!("tar: {e}"))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "not an archive lab/submit made: tar says {}",
            said.trim().chars().take(300).collect::<String>()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The member's name in a line of `tar --list --verbose` (after mode, owner, size, date and
/// time; a link's line goes on with its target, which a refusal shows too).
fn member(line: &str) -> &str {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        rest = &rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..];
    }
    rest.trim_start()
}

/// Unpacks `archive` (a tar, gzipped or not) into the empty directory `into`, after reading
/// its members: every one a directory or a regular file, none named outside the hand-in.
/// GNU tar would drop a leading `/` and skip `..`, but a link it puts in place is followed
/// by whoever reads the hand-in next (`exercises` → anywhere: the grader's check of each
/// exercise file, a leaf, cannot see it), so links are refused before anything is written.
pub(super) fn unpack(archive: &Path, into: &Path) -> Result<(), String> {
    let file = archive.as_os_str();
    // --absolute-names: the members' names as they are, which tar would otherwise mend.
    // --force-local: a `:` in a path is a file's name, not a remote host's.
    let list = ["--list", "--verbose", "--absolute-names", "--quoting-style=escape", "--force-local", "--file"];
    let mut args: Vec<&std::ffi::OsStr> = list.iter().map(|a| a.as_ref()).collect();
    args.push(file);
    let listing = tar(&args)?;
    for line in listing.lines() {
        let name = member(line);
        let why = match line.chars().next() {
            Some('-') | Some('d') => {
                if name.starts_with('/') {
                    "an absolute path"
                } else if name.split('/').any(|c| c == "..") {
                    "a path outside the hand-in (`..`)"
                } else {
                    continue;
                }
            }
            Some('l') => "a symbolic link",
            Some('h') => "a hard link",
            Some('b') | Some('c') => "a device file",
            Some('p') => "a FIFO",
            _ => "neither a directory nor a regular file",
        };
        return Err(format!("{name}: {why}; a hand-in holds directories and regular files only"));
    }
    let extract = ["--extract", "--no-same-owner", "--no-same-permissions", "--force-local", "--file"];
    let mut args: Vec<&std::ffi::OsStr> = extract.iter().map(|a| a.as_ref()).collect();
    args.extend([file, "--directory".as_ref(), into.as_os_str()]);
    tar(&args).map(drop)
}

/// Unpacks the commit's tree into `into`: refused if it holds a symbolic link (mode 120000)
/// or a submodule (160000), which `git archive` would hand on as a link or leave empty.
pub(super) fn from_git(mirror: &Path, commit: &str, into: &Path) -> Result<(), String> {
    for entry in git(mirror, &["ls-tree", "-r", "-z", "--full-tree", commit])?.split('\0') {
        let Some((meta, path)) = entry.split_once('\t') else { continue };
        match meta.split(' ').next() {
            Some("120000") => return Err(format!("{path}: a symbolic link; a hand-in holds regular files only")),
            Some("160000") => return Err(format!("{path}: a submodule; a hand-in holds regular files only")),
            _ => {}
        }
    }
    let archive = into.with_extension("tar");
    git(mirror, &["archive", "--format=tar", "-o", &archive.to_string_lossy(), commit])?;
    let unpacked = unpack(&archive, into);
    std::fs::remove_file(&archive).map_err(io(&archive))?;
    unpacked
}
