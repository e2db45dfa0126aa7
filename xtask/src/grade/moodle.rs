//! Moodle's gradebook, both ways: the assignment's "Download all submissions" zip in, a CSV
//! for "Import grades → CSV file" out.
//!
//! The zip names each student only as Moodle's `fullname($user)` and the assignment's
//! *participant id* (`get_uniqueid_for_user`, a number Moodle makes per assignment and
//! student): `Ada Lovelace_123456_assignsubmission_file/…` (one folder per student, the
//! default; Moodle 3.x wrote the folder with a trailing `_`) or, with "Download submissions
//! in folders" off, `Ada Lovelace_123456_assignsubmission_file_hand-in-ada.tar.gz` (moodle
//! `mod/assign/classes/downloader.php`, `get_student_prefix` and
//! `load_submissionplugin_filelist`; 3.x: `mod/assign/locallib.php`, `download_submissions`).
//! Neither is a name to grade under: full names collide and are not accounts, and the
//! participant id means nothing outside its assignment. The assignment's grading worksheet
//! ("Download grading worksheet", `mod/assign/gradingtable.php`) is Moodle's own table from
//! one to the other: its `Identifier` column is `Participant 123456`, beside the identity
//! fields the site shows (`Email address` by default). The class roster (lab/class's) gives
//! each account its Moodle email address in a third column. So the zip's participant id →
//! the worksheet's email → the roster's account: every link written by Moodle or the
//! instructor, none by the student (the file the student uploaded keeps whatever name they
//! gave it).
//!
//! Email, not username or ID number: the three are what Moodle's grade import can match a
//! row on (`grade/import/csv/classes/load_data.php`, `map_user_data_with_value`:
//! `useridnumber`, `useremail`, `username`, and the internal `userid`), and email is the one
//! the worksheet carries by default (`$CFG->showuseridentity`), so one column serves both
//! ways.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::Path;

use super::io;

/// The roster's accounts and their Moodle email addresses, as `grade intake --roster` read
/// them (CLASS/roster.tsv: `NAME\tEMAIL`, a line a student who has one).
pub(crate) const ROSTER_TSV: &str = "roster.tsv";

/// A roster row's Moodle email address: one `@`, something either side, no space or comma.
fn valid_email(email: &str) -> bool {
    email.split('@').count() == 2
        && !email.starts_with('@')
        && !email.ends_with('@')
        && !email.contains(|c: char| c.is_whitespace() || c == ',' || c == '"')
}

/// lab/class's roster (`NAME,SSH-PUBLIC-KEY[,MOODLE-EMAIL]`, blank lines and `#` lines
/// skipped, and a first line `name,…`): each account that has a Moodle email, with it. Rows
/// lab/class checks (the name, the key) are not checked again here: lab/class refuses the
/// roster whole, and a roster that made the class is the one graded.
pub(crate) fn read_roster(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (n, row) in text.lines().enumerate() {
        let row = row.trim_end_matches('\r');
        if row.trim().is_empty() || row.trim_start().starts_with('#') {
            continue;
        }
        if n == 0 && row.trim_start().to_ascii_lowercase().starts_with("name,") {
            continue;
        }
        let fields: Vec<&str> = row.split(',').map(str::trim).collect();
        let (name, email) = (fields[0], fields.get(2).copied().unwrap_or(""));
        if fields.len() > 3 {
            return Err(format!("line {}: more than three columns (NAME,SSH-PUBLIC-KEY,MOODLE-EMAIL)", n + 1));
        }
        if email.is_empty() {
            continue;
        }
        if !valid_email(email) {
            return Err(format!("line {}: `{email}` is not an email address", n + 1));
        }
        if let Some((other, _)) = out.iter().find(|(_, e)| e.eq_ignore_ascii_case(email)) {
            return Err(format!("line {}: {email} is {other}'s too: one address, one student", n + 1));
        }
        out.push((name.to_string(), email.to_string()));
    }
    Ok(out)
}

/// The grading worksheet's participant ids and email addresses: `Identifier` is
/// `Participant 123456` (the language string `hiddenuser` and the participant id).
pub(crate) fn read_worksheet(text: &str) -> Result<HashMap<String, String>, String> {
    let mut lines = text.trim_start_matches('\u{feff}').lines();
    let header = testkit::csv_fields(lines.next().unwrap_or_default());
    let column = |name: &str| {
        header.iter().position(|h| h.trim() == name).ok_or(format!(
            "the grading worksheet has no `{name}` column (its columns: {}); download it from the assignment's \
             \"View all submissions\" page, with the site showing users' email addresses",
            header.join(", ")
        ))
    };
    let (id, email) = (column("Identifier")?, column("Email address")?);
    let mut out = HashMap::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let fields = testkit::csv_fields(line);
        let (Some(who), Some(address)) = (fields.get(id), fields.get(email)) else { continue };
        // Moodle writes `Participant ` in the site's language: the number is what is after it.
        let Some(pid) = who.rsplit(' ').next().filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        else {
            return Err(format!("the grading worksheet's Identifier `{who}` ends with no participant id"));
        };
        out.insert(pid.to_string(), address.trim().to_string());
    }
    Ok(out)
}

/// Who the zip's entries are: the participant id → the roster's account, through the
/// worksheet's email.
pub(crate) struct Directory {
    accounts: HashMap<String, String>,
}

impl Directory {
    pub(crate) fn new(roster: &[(String, String)], worksheet: &HashMap<String, String>) -> Directory {
        let accounts = worksheet
            .iter()
            .filter_map(|(pid, email)| {
                let (name, _) = roster.iter().find(|(_, e)| e.eq_ignore_ascii_case(email))?;
                Some((pid.clone(), name.clone()))
            })
            .collect();
        Directory { accounts }
    }

    fn account(&self, pid: &str, worksheet_email: Option<&str>) -> Result<String, String> {
        self.accounts.get(pid).cloned().ok_or_else(|| match worksheet_email {
            Some(email) => format!("participant {pid} ({email}) has no row in the roster with that email"),
            None => format!("participant {pid} is not in the grading worksheet"),
        })
    }
}

/// One student's submission in the zip (or an entry of none).
pub(crate) struct Entry {
    /// The account it is, or why it is none.
    pub(crate) name: Result<String, String>,
    /// The one file's entry in the zip, or the folder or prefix Moodle gave the student.
    pub(crate) entry: String,
    /// Why the hand-in is refused, if it is.
    pub(crate) refused: Option<String>,
}

/// `Full Name_123456` and the rest of the entry's name after Moodle's file plugin's marker
/// (`/hand-in-x.tar.gz` in the folder forms, `hand-in-x.tar.gz` in the flat one), or None
/// for another plugin's entry (online text, feedback files).
fn split(name: &str) -> Option<(&str, &str)> {
    let first = name.split('/').next()?;
    let at = first.find("_assignsubmission_file")?;
    let rest = &name[at + "_assignsubmission_file".len()..];
    let rest =
        rest.strip_prefix("_/").or_else(|| rest.strip_prefix('/')).or_else(|| rest.strip_prefix('_')).unwrap_or(rest);
    Some((&name[..at], rest))
}

/// The participant id at the end of Moodle's prefix (`Full Name_123456`).
fn participant(prefix: &str) -> Option<&str> {
    let (_, id) = prefix.rsplit_once('_')?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then_some(id)
}

/// The hand-ins in Moodle's zip, each with the account it is (or why it is none): one file
/// per student, the hand-in archive. An entry that is a link, or named outside the zip
/// (absolute, `..`), refuses its student's hand-in, as a tar member would (see intake.rs);
/// an entry of another submission plugin, or of no student, is listed as refused.
pub(crate) fn find(
    zip: &Path,
    directory: &Directory,
    worksheet: &HashMap<String, String>,
) -> Result<Vec<Entry>, String> {
    let file = std::fs::File::open(zip).map_err(io(zip))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| format!("{}: not a zip: {e}", zip.display()))?;
    let mut by_prefix: Vec<(String, Vec<Result<String, String>>)> = Vec::new();
    let mut stray = Vec::new();
    for i in 0..archive.len() {
        let entry = archive.by_index_raw(i).map_err(|e| format!("{}: entry {i}: {e}", zip.display()))?;
        let name = entry.name().to_string();
        let Some((prefix, rest)) = split(&name) else {
            if !entry.is_dir() {
                let why = "not a file submission (Moodle's assignsubmission_file)".to_string();
                stray.push(Entry { name: Err(why), entry: name, refused: None });
            }
            continue;
        };
        let judged = if entry.is_symlink() {
            Err(format!("{name}: a symbolic link; a hand-in holds directories and regular files only"))
        } else if entry.enclosed_name().is_none() || name.split(['/', '\\']).any(|c| c == "..") {
            Err(format!("{name}: a path outside the hand-in; a hand-in holds directories and regular files only"))
        } else if entry.is_dir() || rest.is_empty() {
            continue;
        } else {
            Ok(name.clone())
        };
        match by_prefix.iter_mut().find(|(p, _)| p == prefix) {
            Some((_, files)) => files.push(judged),
            None => by_prefix.push((prefix.to_string(), vec![judged])),
        }
    }
    let mut out = stray;
    for (prefix, files) in by_prefix {
        let name = match participant(&prefix) {
            Some(pid) => directory.account(pid, worksheet.get(pid).map(String::as_str)),
            None => Err(format!("{prefix}: no participant id after the name (a team submission?)")),
        };
        let name = name.map_err(|why| format!("{prefix}: {why}"));
        let (entry, refused) = match files.into_iter().collect::<Result<Vec<_>, _>>() {
            Err(why) => (prefix, Some(why)),
            Ok(files) if files.len() == 1 => (files[0].clone(), None),
            Ok(files) => {
                let why = format!(
                    "{} files ({}); a hand-in is the one archive lab/submit makes",
                    files.len(),
                    files.join(", ")
                );
                (prefix, Some(why))
            }
        };
        out.push(Entry { name, entry, refused });
    }
    Ok(out)
}

/// Writes the zip's entry `name` to `to`, a new file.
pub(crate) fn extract(zip: &Path, name: &str, to: &Path) -> Result<(), String> {
    let file = std::fs::File::open(zip).map_err(io(zip))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| format!("{}: not a zip: {e}", zip.display()))?;
    let mut entry = archive.by_name(name).map_err(|e| format!("{}: {name}: {e}", zip.display()))?;
    let mut out = std::fs::OpenOptions::new().write(true).create_new(true).open(to).map_err(io(to))?;
    // Bounded: a zip bomb is the student's failure, not the grader's disk.
    let copied = std::io::copy(&mut (&mut entry).take(MAX_HAND_IN + 1), &mut out).map_err(io(to))?;
    if copied > MAX_HAND_IN {
        return Err(format!("{name}: more than {} MiB unpacked; a hand-in is a few source files", MAX_HAND_IN >> 20));
    }
    Ok(())
}

/// The most a hand-in archive may weigh, unpacked from Moodle's zip.
const MAX_HAND_IN: u64 = 64 << 20;

/// The roster, as CLASS/roster.tsv keeps it for `grade report`.
pub(crate) fn write_roster(class: &Path, roster: &[(String, String)]) -> Result<(), String> {
    let path = class.join(ROSTER_TSV);
    std::fs::write(&path, roster.iter().map(|(n, e)| format!("{n}\t{e}\n")).collect::<String>()).map_err(io(&path))
}

/// Each account's Moodle email from CLASS/roster.tsv, or None when intake had no roster.
pub(crate) fn emails(class: &Path) -> Option<HashMap<String, String>> {
    let text = std::fs::read_to_string(class.join(ROSTER_TSV)).ok()?;
    Some(text.lines().filter_map(|l| l.split_once('\t')).map(|(n, e)| (n.to_string(), e.to_string())).collect())
}

/// Reads `--roster` and `--moodle-worksheet`'s files.
pub(crate) fn load(roster: Option<&Path>, worksheet: Option<&Path>) -> Result<Loaded, String> {
    let roster = match roster {
        Some(path) => read_roster(&std::fs::read_to_string(path).map_err(io(path))?)
            .map_err(|e| format!("{}: {e}", path.display()))?,
        None => Vec::new(),
    };
    let worksheet = match worksheet {
        Some(path) => read_worksheet(&std::fs::read_to_string(path).map_err(io(path))?)
            .map_err(|e| format!("{}: {e}", path.display()))?,
        None => HashMap::new(),
    };
    Ok(Loaded { directory: Directory::new(&roster, &worksheet), roster, worksheet })
}

/// The roster and worksheet `grade intake` was given.
pub(crate) struct Loaded {
    pub(crate) roster: Vec<(String, String)>,
    pub(crate) worksheet: HashMap<String, String>,
    pub(crate) directory: Directory,
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::process::Command;

    use super::*;

    /// The grading worksheet as Moodle 4.x's `gradingtable.php` downloads it: `Identifier`
    /// (`recordid`: the string `hiddenuser`, "Participant ", and the participant id), `Full
    /// name`, the identity fields (`Email address`), then the assignment's columns.
    const WORKSHEET: &str = "\u{feff}Identifier,\"Full name\",\"Email address\",Status,Grade,\"Maximum grade\",\
                             \"Grade can be changed\",\"Last modified (submission)\",\"File submissions\",\
                             \"Last modified (grade)\",\"Feedback comments\"\n\
        \"Participant 123456\",\"Ada Lovelace\",ada@uni.example,\"Submitted for grading\",,100.00,Yes,\"Friday, 27 November 2026, 10:00 AM\",hand-in-ada.tar.gz,-,\n\
        \"Participant 123457\",\"Bob O'Neil\",bob@uni.example,\"Submitted for grading\",,100.00,Yes,\"Friday, 27 November 2026, 10:05 AM\",hand-in-bob.tar.gz,-,\n\
        \"Participant 123458\",\"Carol Jones\",carol@uni.example,\"Submitted for grading\",,100.00,Yes,\"Friday, 27 November 2026, 10:09 AM\",\"hand-in-carol.tar.gz\",-,\n\
        \"Participant 123459\",\"Dave Doe\",dave@uni.example,\"Submitted for grading\",,100.00,Yes,\"Friday, 27 November 2026, 10:11 AM\",x,-,\n\
        \"Participant 123460\",\"Eve Stranger\",eve@elsewhere.example,\"Submitted for grading\",,100.00,Yes,\"Friday, 27 November 2026, 10:12 AM\",x,-,\n";

    /// lab/class's roster with the third column.
    const ROSTER: &str = "name,key,moodle\n\
        ada,ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAda ada@laptop,ada@uni.example\n\
        bob,ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBob,Bob@Uni.Example\n\
        carol,ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICar,carol@uni.example\n\
        dave,ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDav,dave@uni.example\n\
        zoe,ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIZoe\n";

    fn zip(path: &Path, entries: &[(&str, Option<&[u8]>)]) {
        let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, data) in entries {
            match data {
                Some(data) => {
                    w.start_file(*name, options).unwrap();
                    w.write_all(data).unwrap();
                }
                None => w.add_symlink(*name, "/etc/passwd", options).unwrap(),
            }
        }
        w.finish().unwrap();
    }

    /// A three-student class from Moodle's two zip forms, through intake and out as the
    /// CSV for Moodle's import: each hand-in under its roster account, the email in the CSV.
    #[test]
    fn a_moodle_zip_goes_in_by_the_roster_and_comes_out_by_email() {
        let root = std::env::temp_dir().join(format!("xtask-moodle-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("ex/exercises")).unwrap();
        std::fs::write(root.join("ex/exercises/05_modify_qp_rtr.rs"), "fn x() {}\n").unwrap();
        let tar = Command::new("tar").args(["-czf", "h.tar.gz", "-C", "ex", "exercises"]).current_dir(&root).status();
        assert!(tar.unwrap().success());
        let handin = std::fs::read(root.join("h.tar.gz")).unwrap();
        std::fs::write(root.join("roster.csv"), ROSTER).unwrap();
        std::fs::write(root.join("worksheet.csv"), WORKSHEET).unwrap();
        // Folders (the default; Moodle 4.x names them `…_assignsubmission_file`, 3.x with a
        // trailing `_`), each holding the uploaded file as the student named it.
        zip(
            &root.join("folders.zip"),
            &[
                ("Ada Lovelace_123456_assignsubmission_file/hand-in-ada.tar.gz", Some(&handin)),
                ("Bob O'Neil_123457_assignsubmission_file_/hand-in-whoever.tar.gz", Some(&handin)),
                ("Dave Doe_123459_assignsubmission_file/hand-in-dave.tar.gz", None),
                ("Eve Stranger_123460_assignsubmission_file/hand-in-eve.tar.gz", Some(&handin)),
            ],
        );
        // "Download submissions in folders" off: one flat prefix per file.
        zip(
            &root.join("flat.zip"),
            &[("Carol Jones_123458_assignsubmission_file_hand-in-carol.tar.gz", Some(&handin))],
        );
        let class = root.join("class");
        let arg = |p: &str| root.join(p).display().to_string();
        let (roster, worksheet) = (root.join("roster.csv"), root.join("worksheet.csv"));
        let submissions = [arg("folders.zip"), arg("flat.zip")];
        super::super::intake::intake_cmd(&class, Some(&roster), Some(&worksheet), &submissions).unwrap();
        for name in ["ada", "bob", "carol"] {
            assert!(class.join("incoming").join(name).join("exercises/05_modify_qp_rtr.rs").is_file(), "{name}");
        }
        let origin = std::fs::read_to_string(class.join("origin/bob")).unwrap();
        let source =
            format!("source\t{} Bob O'Neil_123457_assignsubmission_file_/hand-in-whoever.tar.gz\n", arg("folders.zip"));
        assert!(origin.starts_with(&source), "{origin}");
        // Dave's link refuses his hand-in, as his; Eve is in no roster row: refused, nobody's.
        let dave = std::fs::read_to_string(class.join("origin/dave")).unwrap();
        assert!(
            dave.contains("refused\tDave Doe_123459_assignsubmission_file/hand-in-dave.tar.gz: a symbolic link"),
            "{dave}"
        );
        let refused = std::fs::read_to_string(class.join("reports/refused.txt")).unwrap();
        assert!(refused.contains("participant 123460 (eve@elsewhere.example) has no row in the roster"), "{refused}");
        assert!(!class.join("incoming/eve").exists() && !class.join("incoming/zoe").exists());

        std::fs::write(class.join("steps.txt"), "05_modify_qp_rtr\n").unwrap();
        std::fs::write(class.join("results/ada.tsv"), "05\tpass\t2.000\t2 runs\n").unwrap();
        std::fs::write(class.join("results/carol.tsv"), "05\tfail\t2.000\ta hole is still empty\n").unwrap();
        super::super::reports::report_cmd(&class, "xtask test").unwrap();
        let csv = std::fs::read_to_string(class.join("reports/moodle.csv")).unwrap();
        let mut lines = csv.lines();
        assert_eq!(lines.next(), Some("\"Email address\",\"student\",\"05_modify_qp_rtr\",total,feedback"));
        assert!(csv.contains("\n\"ada@uni.example\",\"ada\",1,1,\"\"\n"), "{csv}");
        assert!(csv.contains("\n\"Bob@Uni.Example\",\"bob\",,,\"not graded"), "{csv}");
        assert!(csv.contains("\n\"carol@uni.example\",\"carol\",0,0,\"05: a hole is still empty\"\n"), "{csv}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn entry_names_split_in_every_form_moodle_writes() {
        assert_eq!(split("A B_1_assignsubmission_file/x.tar.gz"), Some(("A B_1", "x.tar.gz")));
        assert_eq!(split("A B_1_assignsubmission_file_/x.tar.gz"), Some(("A B_1", "x.tar.gz")));
        assert_eq!(split("A B_1_assignsubmission_file_x.tar.gz"), Some(("A B_1", "x.tar.gz")));
        assert_eq!(split("A B_1_assignsubmission_file_/"), Some(("A B_1", "")));
        assert_eq!(split("A B_1_assignsubmission_onlinetext/onlinetext.html"), None);
        assert_eq!(participant("Ada Lovelace_123456"), Some("123456"));
        assert_eq!(participant("Default group"), None);
    }

    #[test]
    fn a_roster_email_is_one_students() {
        assert!(read_roster("a,k,x@y\nb,k,X@Y\n").unwrap_err().contains("a's too"));
        assert!(read_roster("a,k,not-an-address\n").unwrap_err().contains("not an email"));
        assert_eq!(read_roster("# c\n\na,k\n").unwrap(), []);
    }
}
