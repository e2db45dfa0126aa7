//! Variants: each student's exercise asks for values of its own, PrairieLearn-style, so
//! that a copy of the stage (which every student's checkout holds whole, and the book
//! prints) or of a classmate's file is not an answer.
//!
//! A variant is a pure function of the student's name (the name they hand in under:
//! `id -un`, as `lab/submit` uses it, or the name the grader reads from the channel) and
//! the step: the SHA-256 of both picks, for each [`Field`] of the step, one of the values
//! that field may take. A field is an attribute whose value only our side reads (the RNR
//! timer we advertise, our ACK timeout, the rights a region or QP grants), never one both
//! sides must agree on (path MTU, PSNs, QP numbers, the wire format): the C peer works the
//! same whatever the variant. Every value differs from rc_pingpong's, so the stage, the
//! book's listing and a file made from them fail every variant.
//!
//! No secret: a student can compute anyone's variant (`lab/exercise --as NAME`), and that
//! is no answer to their own. What a variant asks is said plainly in the exercise's header;
//! what it tests is that the student knows where each value goes. It does not stop a
//! student who understands the stage from adapting a classmate's file to their own values:
//! that understanding is what the exercise asks for.
//!
//! Grading applies a variant to the reference's trace ([`Variant::expected`]): the fields'
//! lines with the variant's values in place of rc_pingpong's, nothing else. The teaching
//! library and its stages do not know variants exist (the book quotes them).

use sha2::{Digest, Sha256};

/// One attribute a variant sets.
pub(crate) struct Field {
    /// The trace's key for it (`min_rnr_timer=12`), on a line of the event whose line
    /// holds `event` (`INIT→RTR`, `ibv_reg_mr`).
    pub(crate) key: &'static str,
    event: &'static str,
    /// rc_pingpong's value, as the trace shows it.
    pub(crate) reference: &'static str,
    /// The hole it is the answer of, the answer's line there (trimmed), and that line with
    /// `{}` where the variant's code goes.
    hole: &'static str,
    answer: &'static str,
    template: &'static str,
    /// The hole's hint in an exercise with a variant.
    hint: &'static str,
    /// The values it may take: as the trace shows it, and as code writes it.
    values: Values,
    /// What it is, for the exercise's header.
    what: &'static str,
}

/// A field's values.
enum Values {
    /// Numbers, the same in the trace and the code.
    Numbers(&'static [u32]),
    /// Flags: the trace's names (`|`-joined, in the trace's order) and the code.
    Flags(&'static [(&'static str, &'static str)]),
}

impl Values {
    fn len(&self) -> usize {
        match self {
            Values::Numbers(n) => n.len(),
            Values::Flags(f) => f.len(),
        }
    }

    /// Value `i`: as the trace shows it, and as code writes it.
    fn get(&self, i: usize) -> (String, String) {
        match self {
            Values::Numbers(n) => (n[i].to_string(), n[i].to_string()),
            Values::Flags(f) => (f[i].0.to_string(), f[i].1.to_string()),
        }
    }
}

/// Every field, by step. Steps not listed have none (see the instructor's guide, "Copies").
const FIELDS: [(&str, &[Field]); 4] = [
    (
        "03",
        &[Field {
            key: "access",
            event: "ibv_reg_mr",
            reference: "IBV_ACCESS_LOCAL_WRITE",
            hole: "hole_reg_mr",
            answer: "let mr = Mr::reg(pd, buf, access)?;",
            template: "let mr = Mr::reg(pd, buf, ibv_access_flags(access.0 | {}))?;",
            hint: "register `buf` in `pd` with the access flags the caller asked for and your variant's (the header says which) (ibv_reg_mr)",
            values: Values::Flags(&[
                ("IBV_ACCESS_LOCAL_WRITE|IBV_ACCESS_REMOTE_WRITE", "crate::verbs::IBV_ACCESS_REMOTE_WRITE.0"),
                ("IBV_ACCESS_LOCAL_WRITE|IBV_ACCESS_REMOTE_READ", "crate::verbs::IBV_ACCESS_REMOTE_READ.0"),
                (
                    "IBV_ACCESS_LOCAL_WRITE|IBV_ACCESS_REMOTE_WRITE|IBV_ACCESS_REMOTE_READ",
                    "crate::verbs::IBV_ACCESS_REMOTE_WRITE.0 | crate::verbs::IBV_ACCESS_REMOTE_READ.0",
                ),
            ]),
            what: "the region's access: the caller's (LOCAL_WRITE) and the remote rights your variant adds",
        }],
    ),
    (
        "04",
        &[Field {
            key: "qp_access_flags",
            event: "RESET→INIT",
            reference: "0",
            hole: "hole_init_access",
            answer: "qp_access_flags: opts.access.0,",
            template: "qp_access_flags: opts.access.0 | {},",
            hint: "what remote peers may do to our memory through this QP: the caller's opts.access and your variant's flags (the header says which)",
            values: Values::Flags(&[
                ("IBV_ACCESS_REMOTE_WRITE", "crate::verbs::IBV_ACCESS_REMOTE_WRITE.0"),
                ("IBV_ACCESS_REMOTE_READ", "crate::verbs::IBV_ACCESS_REMOTE_READ.0"),
                (
                    "IBV_ACCESS_REMOTE_WRITE|IBV_ACCESS_REMOTE_READ",
                    "crate::verbs::IBV_ACCESS_REMOTE_WRITE.0 | crate::verbs::IBV_ACCESS_REMOTE_READ.0",
                ),
            ]),
            what: "the QP's qp_access_flags at INIT: the caller's (none) and the remote rights your variant adds",
        }],
    ),
    (
        "05",
        &[
            Field {
                key: "min_rnr_timer",
                event: "INIT→RTR",
                reference: "12",
                hole: "hole_min_rnr_timer",
                answer: "min_rnr_timer: 12,",
                template: "min_rnr_timer: {},",
                hint: "the RNR timer code the peer waits before retrying a SEND that found no receive: your variant's (the header says it)",
                values: Values::Numbers(&[
                    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
                    27, 28, 29, 30, 31,
                ]),
                what: "the RNR NAK timer code we advertise (rc_pingpong's 12 is 0.64 ms)",
            },
            Field {
                key: "max_dest_rd_atomic",
                event: "INIT→RTR",
                reference: "1",
                hole: "hole_max_dest_rd_atomic",
                answer: "max_dest_rd_atomic: 1,",
                template: "max_dest_rd_atomic: {},",
                hint: "how many RDMA READs/atomics the peer may have outstanding against us: your variant's value (the header says it)",
                values: Values::Numbers(&[2, 4, 8, 16]),
                what: "the READs/atomics the peer may have outstanding against us",
            },
        ],
    ),
    (
        "06",
        &[
            Field {
                key: "timeout",
                event: "RTR→RTS",
                reference: "14",
                hole: "hole_timeout",
                answer: "timeout: 14,",
                template: "timeout: {},",
                hint: "the local ACK timeout code, 4.096 us * 2^timeout: your variant's (the header says it)",
                values: Values::Numbers(&[8, 9, 10, 11, 12, 13, 15, 16, 17, 18, 19, 20]),
                what: "the local ACK timeout code, 4.096 us * 2^timeout (rc_pingpong's 14 is about 67 ms)",
            },
            Field {
                key: "retry_cnt",
                event: "RTR→RTS",
                reference: "7",
                hole: "hole_retry_cnt",
                answer: "retry_cnt: 7,",
                template: "retry_cnt: {},",
                hint: "how many times to resend a packet that was not acknowledged: your variant's value (the header says it)",
                values: Values::Numbers(&[1, 2, 3, 4, 5, 6]),
                what: "how many times to resend a packet that was not acknowledged",
            },
            Field {
                key: "max_rd_atomic",
                event: "RTR→RTS",
                reference: "1",
                hole: "hole_max_rd_atomic",
                answer: "max_rd_atomic: 1,",
                template: "max_rd_atomic: {},",
                hint: "how many RDMA READs/atomics we may have outstanding as requester: your variant's value (the header says it)",
                values: Values::Numbers(&[2, 4, 8, 16]),
                what: "the READs/atomics we may have outstanding as requester",
            },
        ],
    ),
];

/// The fields of step `nn`: none for most steps.
fn fields(nn: &str) -> &'static [Field] {
    FIELDS.iter().find(|(n, _)| *n == nn).map_or(&[], |(_, f)| f)
}

/// The hint of hole `hole` of step `nn` in an exercise with a variant, when the variant
/// sets its value. The same for every student: an untouched exercise is the same code for
/// all (see `vet`); the values are in the header, a comment.
pub(crate) fn hint(nn: &str, hole: &str) -> Option<&'static str> {
    fields(nn).iter().find(|f| f.hole == hole).map(|f| f.hint)
}

/// One student's values for one step.
pub(crate) struct Variant {
    pub(crate) name: String,
    pub(crate) nn: String,
    /// Each field, and its value: as the trace shows it, as code writes it.
    picks: Vec<(&'static Field, String, String)>,
}

/// A line of the expected trace a variant changed: where, which key, and what to say.
pub(crate) struct Note {
    pub(crate) line: usize,
    pub(crate) key: &'static str,
    pub(crate) text: String,
}

impl Variant {
    /// `name`'s variant of step `nn`; None when the step has none.
    pub(crate) fn of(name: &str, nn: &str) -> Option<Variant> {
        let fields = fields(nn);
        if fields.is_empty() {
            return None;
        }
        let seed = Sha256::digest(format!("rdma-dissect variant 1\0{name}\0{nn}").as_bytes());
        let picks = fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let word = u32::from_be_bytes(seed[4 * i..4 * i + 4].try_into().expect("4 bytes"));
                let (trace, code) = f.values.get(word as usize % f.values.len());
                (f, trace, code)
            })
            .collect();
        Some(Variant { name: name.to_string(), nn: nn.to_string(), picks })
    }

    /// The values, one `key=value` each, space-separated: what tells two variants apart.
    pub(crate) fn id(&self) -> String {
        self.picks.iter().map(|(f, v, _)| format!("{}={v}", f.key)).collect::<Vec<_>>().join(" ")
    }

    /// The exercise's header: whose variant, and its values beside rc_pingpong's.
    pub(crate) fn header(&self) -> Vec<String> {
        let mut out = vec![
            format!("// YOUR VARIANT (for `{}`, the name you hand in under): this exercise asks for", self.name),
            "// values of its own where rc_pingpong's would work as well. lab/check and the grader".into(),
            "// expect yours, in the trace; rc_pingpong's values (the book's, src/stages') fail.".into(),
            "// (Graded under another name, e.g. your GitHub login? LAB_STUDENT=NAME lab/exercise.)".into(),
        ];
        let width = self.picks.iter().map(|(f, ..)| f.key.len()).max().unwrap_or(0);
        let values = self.picks.iter().map(|(_, v, _)| v.len()).max().unwrap_or(0);
        for (f, v, _) in &self.picks {
            out.push(format!("//   {:width$} = {v:values$}   (rc_pingpong: {})", f.key, f.reference));
            out.push(format!("//   {:width$}   {}", "", f.what));
        }
        out
    }

    /// `reference`, a redacted trace of the reference, as this variant's answer prints it:
    /// each field's value in place of rc_pingpong's on its event's lines, every other byte
    /// the same. With it, a note for each line changed.
    pub(crate) fn expected(&self, reference: &str) -> (String, Vec<Note>) {
        let mut notes = Vec::new();
        let mut event = "";
        let mut out = String::with_capacity(reference.len() + 64);
        for (i, line) in reference.lines().enumerate() {
            if !line.starts_with(' ') {
                event = line;
            }
            let mut tokens: Vec<String> = line.split(' ').map(String::from).collect();
            for (f, value, _) in &self.picks {
                let from = format!("{}={}", f.key, f.reference);
                let Some(at) = tokens.iter().position(|t| *t == from).filter(|_| event.contains(f.event)) else {
                    continue;
                };
                tokens[at] = format!("{}={value}", f.key);
                notes.push(Note {
                    line: i,
                    key: f.key,
                    text: format!(
                        "your variant ({}, step {}) asks for {} here, where rc_pingpong has {}",
                        self.name, self.nn, tokens[at], f.reference
                    ),
                });
            }
            out.push_str(&tokens.join(" "));
            out.push('\n');
        }
        (out, notes)
    }

    /// `stage`, the reference's stage file, with this variant's values in its holes: the
    /// answer for this student (the synthetic class's complete hand-ins).
    pub(crate) fn complete(&self, stage: &str) -> Result<String, String> {
        let mut text = stage.to_string();
        for (f, _, code) in &self.picks {
            let at = text
                .find(&format!("// ANCHOR: {} ", f.hole))
                .ok_or_else(|| format!("the stage of step {} has no {}", self.nn, f.hole))?;
            let end = at + text[at..].find("// ANCHOR_END").unwrap_or(text.len() - at);
            let line = text[at..end]
                .find(f.answer)
                .ok_or_else(|| format!("{} no longer answers `{}`: update exercise/variant.rs", f.hole, f.answer))?;
            let line = at + line;
            let with = f.template.replace("{}", code);
            text.replace_range(line..line + f.answer.len(), &with);
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("student{i:03}")).collect()
    }

    #[test]
    fn a_variant_is_a_stable_function_of_name_and_step() {
        let a = Variant::of("ada", "05").unwrap();
        assert_eq!(a.id(), Variant::of("ada", "05").unwrap().id());
        // Pinned: a variant must not change under a class between two checkouts.
        assert_eq!(a.id(), PINNED_ADA_05);
        // tests/host_vms/exercises.rs fills ada's exercises with these.
        assert_eq!(Variant::of("ada", "04").unwrap().id(), "qp_access_flags=IBV_ACCESS_REMOTE_WRITE");
        assert_eq!(Variant::of("ada", "06").unwrap().id(), "timeout=12 retry_cnt=5 max_rd_atomic=8");
        assert!(Variant::of("ada", "01").is_none() && Variant::of("ada", "07").is_none());
        for nn in ["03", "04", "05", "06"] {
            let v = Variant::of("ada", nn).unwrap();
            for (f, value, _) in &v.picks {
                assert_ne!(value, f.reference, "{nn} {}: a variant never gives rc_pingpong's value", f.key);
            }
        }
    }

    const PINNED_ADA_05: &str = "min_rnr_timer=10 max_dest_rd_atomic=2";

    #[test]
    fn variants_spread_over_every_value() {
        for (nn, fields) in FIELDS {
            for (i, f) in fields.iter().enumerate() {
                let mut seen = vec![0usize; f.values.len()];
                for name in names(3000) {
                    let v = Variant::of(&name, nn).unwrap();
                    let at = (0..f.values.len()).find(|&j| f.values.get(j).0 == v.picks[i].1).unwrap();
                    seen[at] += 1;
                }
                // Each value at least a third as often as an even spread gives it.
                let even = 3000 / f.values.len();
                assert!(seen.iter().all(|&n| n * 3 >= even), "{nn} {}: {seen:?}", f.key);
            }
        }
        let ids: std::collections::HashSet<String> =
            names(30).iter().map(|n| Variant::of(n, "05").unwrap().id()).collect();
        assert!(ids.len() >= 20, "thirty students, {} variants of 05", ids.len());
    }

    #[test]
    fn the_fields_are_the_stages_holes_and_the_books_traces() {
        let root = testkit::find_root().unwrap();
        for (nn, fields) in FIELDS {
            let step = testkit::step(nn).unwrap();
            let stage = std::fs::read_to_string(root.join(format!("src/stages/{}.rs", step.stage()))).unwrap();
            let v = Variant::of("ada", nn).unwrap();
            let done = v.complete(&stage).unwrap();
            assert_ne!(done, stage);
            for (f, _, code) in &v.picks {
                assert!(done.contains(&f.template.replace("{}", code)), "{nn} {}", f.hole);
            }
            // The book's trace of the step holds each field where the transform looks.
            let dir = root.join("book/src/output");
            let trace = ["", "-server", "-client"]
                .iter()
                .find_map(|s| std::fs::read_to_string(dir.join(format!("steps__{}{s}.txt", step.bin))).ok())
                .unwrap();
            let (expected, notes) = v.expected(&trace);
            assert_eq!(notes.len(), fields.len(), "{nn}: one line changed per field");
            for (f, value, _) in &v.picks {
                assert!(expected.contains(&format!("{}={value}", f.key)), "{nn}: {}", f.key);
            }
            assert_eq!(expected.lines().count(), trace.lines().count());
        }
    }

    /// A flags value's trace names are what the program prints for the flags its code sets
    /// (names::access_names, in bit order), with the caller's (03: LOCAL_WRITE; 04: none).
    #[test]
    fn flags_are_named_as_the_trace_names_them() {
        use rdma_dissect::verbs::{self, names::access_names};
        let bit = |name: &str| match name {
            "IBV_ACCESS_REMOTE_WRITE" => verbs::IBV_ACCESS_REMOTE_WRITE.0,
            "IBV_ACCESS_REMOTE_READ" => verbs::IBV_ACCESS_REMOTE_READ.0,
            other => panic!("{other}: not a flag a variant grants"),
        };
        for (nn, fields) in FIELDS {
            for f in fields.iter() {
                let Values::Flags(values) = &f.values else { continue };
                let caller = if nn == "03" { verbs::IBV_ACCESS_LOCAL_WRITE.0 } else { 0 };
                for (trace, code) in values.iter() {
                    let bits = code.split(" | ").fold(caller, |b, c| {
                        b | bit(c.strip_prefix("crate::verbs::").and_then(|c| c.strip_suffix(".0")).unwrap())
                    });
                    assert_eq!(access_names(bits), *trace, "{nn} {}", f.key);
                }
            }
        }
    }

    #[test]
    fn the_transform_changes_only_the_fields_lines() {
        let trace = "ibv_modify_qp                qp_num=[QPN:client] INIT→RTR\n\
                     \x20 IBV_QP_MIN_RNR_TIMER       min_rnr_timer=12\n\
                     \x20 IBV_QP_MAX_DEST_RD_ATOMIC  max_dest_rd_atomic=1\n\
                     ibv_modify_qp                qp_num=[QPN:client] RTR→RTS\n\
                     \x20 IBV_QP_MAX_QP_RD_ATOMIC    max_rd_atomic=1\n";
        let v = Variant::of("ada", "05").unwrap();
        let (expected, notes) = v.expected(trace);
        let lines: Vec<&str> = expected.lines().collect();
        assert_eq!(lines[1], "  IBV_QP_MIN_RNR_TIMER       min_rnr_timer=10");
        assert_eq!(lines[2], "  IBV_QP_MAX_DEST_RD_ATOMIC  max_dest_rd_atomic=2");
        assert_eq!(lines[4], "  IBV_QP_MAX_QP_RD_ATOMIC    max_rd_atomic=1", "another event's line stays");
        assert_eq!((notes[0].line, notes[0].key, notes[1].line), (1, "min_rnr_timer", 2));
        assert!(notes[0].text.contains("your variant (ada, step 05) asks for min_rnr_timer=10"));
        assert!(expected.ends_with('\n'));
    }

    /// A copy of the stage prints rc_pingpong's values: its first difference from the
    /// student's expected trace is the variant's first field, and says what the variant
    /// asks for. A classmate's answer fails too.
    #[test]
    fn a_copy_of_the_stage_differs_at_the_variants_field() {
        let root = testkit::find_root().unwrap();
        let trace = std::fs::read_to_string(root.join("book/src/output/steps__05_modify_qp_rtr-server.txt")).unwrap();
        let step = super::super::step("05").unwrap();
        let ada = Variant::of("ada", "05").unwrap();
        let (expected, notes) = ada.expected(&trace);
        let diff = super::super::compare::first_difference(&step, &expected, &trace, &notes).unwrap();
        assert!(
            diff.contains("attribute IBV_QP_MIN_RNR_TIMER: min_rnr_timer: expected 10 (your variant's value), got 12"),
            "{diff}"
        );
        assert!(
            diff.contains("your variant (ada, step 05) asks for min_rnr_timer=10 here, where rc_pingpong has 12"),
            "{diff}"
        );
        assert!(super::super::compare::first_difference(&step, &expected, &expected, &notes).is_none());
        let other = names(30).into_iter().find(|n| Variant::of(n, "05").unwrap().id() != ada.id()).unwrap();
        let (theirs, _) = Variant::of(&other, "05").unwrap().expected(&trace);
        let diff = super::super::compare::first_difference(&step, &expected, &theirs, &notes).unwrap();
        assert!(diff.contains("(your variant's value)"), "{diff}");
    }

    #[test]
    fn the_header_says_the_values_and_rc_pingpongs() {
        let header = Variant::of("ada", "05").unwrap().header().join("\n");
        assert!(header.contains("for `ada`"), "{header}");
        assert!(
            header.contains("min_rnr_timer      = 10   (rc_pingpong: 12)\n//                        the RNR NAK"),
            "{header}"
        );
        assert!(header.lines().all(|l| l.starts_with("//")));
    }
}
