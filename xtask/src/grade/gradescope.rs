//! `grade gradescope-student METADATA [RESULTS]`: the student of a Gradescope submission, for
//! lab/ci/gradescope/run_autograder. Gradescope's autograder gets no name on its command
//! line: it reads /autograder/submission_metadata.json, whose `users` are the submitters
//! (gradescope-autograders.readthedocs.io, "Submission Metadata": each `{email, id,
//! name}`, several for a group submission). The grader's student NAME is the first user's
//! email before the `@`, made to fit [`valid_name`]: Gradescope, not the student's files,
//! says who submitted. With RESULTS, that results.json is rewritten to say whom it graded:
//! its `output` starts with the user's name and email, and `extra_data` carries them.

use std::path::Path;

use serde::Deserialize;

use super::intake::valid_name;
use super::io;
use super::reports::{ExtraData, GradescopeResults, Submitter};

/// What the grader reads of the submission metadata: the submission's id and its users
/// (the page's other fields, the assignment and the previous submissions, are left out).
/// The ids are only copied into the results ([`Submitter`]): one missing is null there.
#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    id: serde_json::Value,
    #[serde(default)]
    users: Vec<User>,
}

/// One user of [`Metadata`], `{email, id, name}`; a missing (or null) email or name is
/// left for [`student`] to judge.
#[derive(Deserialize)]
struct User {
    email: Option<String>,
    #[serde(default)]
    id: serde_json::Value,
    name: Option<String>,
}

/// The grader's NAME for the submission's first user, and who they are as Gradescope says.
pub(crate) fn student(metadata: &str) -> Result<(String, Submitter), String> {
    let metadata: Metadata =
        serde_json::from_str(metadata).map_err(|e| format!("not Gradescope's submission metadata: {e}"))?;
    let user = metadata.users.into_iter().next().ok_or("no `users` in the submission metadata")?;
    let email = user.email.filter(|e| e.contains('@')).ok_or("the first user has no email")?;
    let local = email.split('@').next().unwrap_or_default();
    let mut name: String =
        local.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        name.insert(0, 's');
    }
    name.truncate(64);
    if !valid_name(&name) {
        return Err(format!("`{email}` makes no student's name"));
    }
    let who = Submitter {
        name: user.name.unwrap_or_default(),
        email,
        gradescope_user_id: user.id,
        submission_id: metadata.id,
    };
    Ok((name, who))
}

/// `results` (a results.json) saying whom it graded, still Gradescope's format.
pub(crate) fn stamp(results: &str, name: &str, who: &Submitter) -> Result<String, String> {
    let mut results = GradescopeResults::parse(results)?;
    results.output = format!("Graded for {} <{}> (as `{name}`): {}", who.name, who.email, results.output);
    results.extra_data = Some(ExtraData { student: who.clone() });
    Ok(results.to_text())
}

/// `grade gradescope-student METADATA [RESULTS]`: prints the NAME; with RESULTS, stamps it.
pub(crate) fn student_cmd(metadata: &Path, results: Option<&Path>) -> Result<(), String> {
    let text = std::fs::read_to_string(metadata).map_err(io(metadata))?;
    let (name, who) = student(&text).map_err(|e| format!("{}: {e}", metadata.display()))?;
    match results {
        None => println!("{name}"),
        Some(path) => {
            let stamped = stamp(&std::fs::read_to_string(path).map_err(io(path))?, &name, &who)?;
            std::fs::write(path, stamped).map_err(io(path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of Gradescope's "Submission Metadata" page, its `//` comments taken out
    /// and its `...` cut, as /autograder/submission_metadata.json holds it.
    const METADATA: &str = r#"{
      "id": 123456,
      "created_at": "2018-07-01T14:22:32.365935-07:00",
      "assignment": {
        "due_date": "2018-07-31T23:00:00.000000-07:00",
        "group_size": 4,
        "group_submission": true,
        "id": 25828,
        "course_id": 1234,
        "late_due_date": null,
        "release_date": "2018-07-02T00:00:00.000000-07:00",
        "title": "Programming Assignment 1",
        "total_points": "20.0"
      },
      "submission_method": "upload",
      "users": [
        { "email": "student@example.com", "id": 1234, "name": "Student User" }
      ],
      "previous_submissions": [
        { "submission_time": "2017-04-06T14:24:48.087023-07:00", "score": 0.0, "results": {} }
      ]
    }"#;

    #[test]
    fn the_student_is_gradescopes_first_user() {
        let (name, who) = student(METADATA).unwrap();
        assert_eq!(name, "student");
        assert_eq!(
            who,
            Submitter {
                email: "student@example.com".into(),
                gradescope_user_id: 1234.into(),
                name: "Student User".into(),
                submission_id: 123456.into(),
            }
        );
        let odd = METADATA.replace("student@example.com", ".ada+rdma@example.com");
        assert_eq!(student(&odd).unwrap().0, "s_ada_rdma");
        assert!(student(&METADATA.replace("student@example.com", "nobody")).is_err());
        assert!(student(r#"{"users": []}"#).unwrap_err().contains("no `users`"));
        assert!(student(r#"{"users": [{"name": "No Mail"}]}"#).unwrap_err().contains("no email"));
        // Only the email is needed; what else is missing is null or empty in the results.
        let (_, bare) = student(r#"{"users": [{"email": "bare@example.com", "name": null}]}"#).unwrap();
        assert_eq!(
            (bare.name.as_str(), bare.gradescope_user_id.is_null(), bare.submission_id.is_null()),
            ("", true, true)
        );
    }

    #[test]
    fn the_results_name_whom_they_graded_in_gradescopes_format() {
        let (name, who) = student(METADATA).unwrap();
        let verdicts = [true, false].map(|passed| crate::exercise::Verdict {
            nn: "05".into(),
            passed,
            seconds: 1.0,
            message: String::new(),
        });
        let bins = ["05_modify_qp_rtr".to_string(), "05_modify_qp_rtr".into()];
        let results = super::super::reports::gradescope_json(&verdicts, &bins);
        let stamped = stamp(&results, &name, &who).unwrap();
        let read = GradescopeResults::parse(&stamped).unwrap();
        assert_eq!(
            read.output,
            "Graded for Student User <student@example.com> (as `student`): 1 of 2 steps behave like the reference"
        );
        assert_eq!((read.score, read.extra_data), (1, Some(ExtraData { student: who })));
        let extra_data = r#"  "extra_data": {
    "student": {
      "email": "student@example.com",
      "gradescope_user_id": 1234,
      "name": "Student User",
      "submission_id": 123456
    }
  }
}
"#;
        assert!(stamped.ends_with(extra_data), "{stamped}");
    }
}
