//! Hand-ins: what a student hands in (`lab/submit`), and what the grader takes from one.
//!
//! A hand-in is a directory (an archive `lab/submit` made, unpacked; or a branch a student
//! pushed) holding `exercises/NN_<step>.rs`, `manifest.txt` and, for the student's own
//! information, `self-check.tsv` (their last `lab/check` verdicts). The grader takes the
//! exercise files and nothing else: the manifest is what the student says (who, where,
//! when, from which commit), the verdicts are never read. It hashes the files itself.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The first line of a manifest: what it is, and its format's version.
pub(crate) const MANIFEST_HEADER: &str = "# rdma-dissect hand-in, format 1";

/// The SHA-256 of `bytes`, in hex as `sha256sum` prints it.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// One exercise file handed in: the step's binary name and the file.
pub(crate) struct Handed {
    pub(crate) bin: String,
    pub(crate) path: PathBuf,
    pub(crate) sha256: String,
}

/// The exercise files in `dir` (`NN_<step>.rs` for a step of steps/list.txt), in the
/// steps' order. Only regular files count: a symlink could point at the reference's own
/// answer. Anything else in `dir` is not an exercise and is left alone.
pub(crate) fn exercise_files(dir: &Path) -> Result<Vec<Handed>, String> {
    let mut files = Vec::new();
    for step in testkit::load_steps()? {
        let path = dir.join(format!("{}.rs", step.bin));
        match path.symlink_metadata() {
            Ok(meta) if meta.is_file() => {
                let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                files.push(Handed { bin: step.bin, sha256: sha256(&bytes), path });
            }
            Ok(_) => return Err(format!("{}: not a regular file (a link?): hand in the file itself", path.display())),
            Err(_) => {}
        }
    }
    Ok(files)
}

/// Who handed in what, from where: the manifest `lab/submit` writes.
#[derive(Debug)]
pub(crate) struct Manifest {
    pub(crate) account: String,
    pub(crate) host: String,
    pub(crate) time: String,
    /// The project's commit the student's copy was made from.
    pub(crate) commit: String,
    /// (file name, SHA-256)
    pub(crate) files: Vec<(String, String)>,
}

impl Manifest {
    pub(crate) fn text(&self) -> String {
        let mut t = format!("{MANIFEST_HEADER}\n");
        for (key, value) in
            [("account", &self.account), ("host", &self.host), ("time", &self.time), ("commit", &self.commit)]
        {
            let _ = writeln!(t, "{key}\t{}", value.replace(['\t', '\n'], " "));
        }
        for (file, sha) in &self.files {
            let _ = writeln!(t, "file\t{file}\t{sha}");
        }
        t
    }

    /// Reads a manifest back; a missing or unknown one is an error the report shows (the
    /// files are graded all the same: the grader's hashes are what counts).
    pub(crate) fn parse(text: &str) -> Result<Manifest, String> {
        let mut lines = text.lines();
        if lines.next() != Some(MANIFEST_HEADER) {
            return Err(format!("not a hand-in manifest (its first line is not `{MANIFEST_HEADER}`)"));
        }
        let mut m = Manifest {
            account: String::new(),
            host: String::new(),
            time: String::new(),
            commit: String::new(),
            files: vec![],
        };
        for line in lines {
            let cols: Vec<&str> = line.split('\t').collect();
            match cols[..] {
                ["account", v] => m.account = v.to_string(),
                ["host", v] => m.host = v.to_string(),
                ["time", v] => m.time = v.to_string(),
                ["commit", v] => m.commit = v.to_string(),
                ["file", f, sha] => m.files.push((f.to_string(), sha.to_string())),
                _ => return Err(format!("manifest line {line:?}: want `KEY<TAB>VALUE`")),
            }
        }
        Ok(m)
    }
}

/// `grade manifest EXERCISES ACCOUNT HOST TIME COMMIT`: the manifest of a hand-in of the
/// exercise files in EXERCISES, on stdout; an error when there is none to hand in.
pub(crate) fn manifest_cmd(dir: &Path, account: &str, host: &str, time: &str, commit: &str) -> Result<(), String> {
    let files = exercise_files(dir)?;
    if files.is_empty() {
        return Err(format!(
            "nothing to hand in: {} holds no exercise file (NN_<step>.rs); lab/exercise NN makes one",
            dir.display()
        ));
    }
    let files = files.into_iter().map(|h| (format!("{}.rs", h.bin), h.sha256)).collect();
    let m = Manifest { account: account.into(), host: host.into(), time: time.into(), commit: commit.into(), files };
    print!("{}", m.text());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_is_sha256sums() {
        assert_eq!(sha256(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn a_manifest_reads_back_as_written() {
        let m = Manifest {
            account: "alice".into(),
            host: "lab-07".into(),
            time: "2026-11-26T23:00:00Z".into(),
            commit: "eaffb09".into(),
            files: vec![("05_modify_qp_rtr.rs".into(), sha256(b"x"))],
        };
        let back = Manifest::parse(&m.text()).unwrap();
        assert_eq!((back.account.as_str(), back.commit.as_str()), ("alice", "eaffb09"));
        assert_eq!(back.files, m.files);
        assert!(Manifest::parse("account\tx\n").unwrap_err().contains("not a hand-in manifest"));
    }
}
