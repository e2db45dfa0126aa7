//! `grade vm`, in the lab VM: the reference's runs of each step, which set the bound of a
//! student's run, then every pending student's files run against them, two at a time, each
//! run sealed and bounded as an account of its own (see `sandbox`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::{
    build, build_errors, done, file_key, file_sha, graded_steps, io, key_values, sandbox, student_file, students, vet,
};
use crate::exercise::{self, append_result, ReferenceRuns, DEADLINE, PEER_TIMEOUT};

/// A student's program may run this many times as long as the reference's slowest run of
/// its step, measured in the same boot: an infinite loop or a fork bomb ends soon, a slow
/// but working program has room.
const BOUND_FACTOR: f64 = 4.0;
/// … and at least this long (s), for a step with a peer: longer than our programs wait for
/// a peer that never comes ([`PEER_TIMEOUT`]), so such a program still says so itself.
const BOUND_FLOOR: u64 = PEER_TIMEOUT + 3;
/// … or this long, for a step that runs alone (01-04): it waits for nothing, and its
/// reference's runs take well under a second even under emulation, so a program still
/// running after this is stuck in its own code.
const ALONE_FLOOR: u64 = 4;

/// The exit status of `grade vm` when the reference itself failed: the device or the lab
/// is broken, and lab/grade boots again rather than fail a student.
const INFRASTRUCTURE: u8 = 3;

/// `grade vm CLASS [--build-seconds N]` (root, in the lab VM): grades the pending students'
/// files, several at a time (see [`workers`]), each run as an account of its own, the files
/// built by `grade build` on the host meanwhile (or here first, each build bounded by N s,
/// when the host does not: see `build::host_builds`).
pub(super) fn vm_cmd(class: &Path, build: &sandbox::Limits) -> Result<ExitCode, String> {
    testkit::require_device();
    let steps = graded_steps(class)?;
    let pending: Vec<String> = students(class)?.into_iter().filter(|n| !done(class, n)).collect();
    if pending.is_empty() {
        build::say_references_made(class)?;
        return Ok(ExitCode::SUCCESS);
    }
    sandbox::cgroups()?;
    sandbox::sealed_runs()?;
    let start = Instant::now();
    if !build::host_builds(class) {
        build::build_files(class, build, build::Place::Vm)?;
    }
    let code = grade_students(class, &steps, &pending)?;
    eprintln!("grade: {} students graded in {:.0} s", pending.len(), start.elapsed().as_secs_f64());
    Ok(code)
}

/// How many files are graded at once: one per CPU of the VM (lab/run gives it 2). Under
/// emulation a run is mostly processes starting, or waiting (a C peer's retries, a
/// program run to its bound), so two at a time overlap what one at a time would wait for.
/// A run slowed by its neighbour has room: each is bounded by 4 times the reference's
/// slowest run measured alone, and at least [`BOUND_FLOOR`] (or [`ALONE_FLOOR`]), where a
/// run takes 1-3 s.
fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Where the programs run from, in the VM's memory (its `/run`, a tmpfs): a program
/// started from the project's 9p share pages itself in across it at every start (≈ 0.25 s
/// more, under emulation, than from memory).
const PROGRAMS: &str = "/run/grade/programs";

/// A file's verdict, and whose file it was first.
type Graded = (Result<String, String>, String);
/// A file run once, whoever asks first; the others wait for its verdict.
type RunOnce = Arc<OnceLock<Result<Graded, String>>>;
/// A step's verdict and how long it took.
type Timed = (Result<String, String>, f64);

/// What the workers share while they grade (see [`grade_students`]).
struct Grading<'a> {
    class: &'a Path,
    steps: &'a [testkit::Step],
    pending: &'a [String],
    handins: Vec<Vec<(String, String)>>,
    /// The grader itself in memory: each run of a student's program starts it (`grade bounded`).
    tool: PathBuf,
    reference_dir: PathBuf,
    /// The reference's runs of each step (by index) and how long a student's program may run.
    references: Vec<OnceLock<Result<(ReferenceRuns, u64), String>>>,
    /// The verdict of each file run, by key and variant: a file handed in by several
    /// students is one program (built once), run once per variant.
    graded: Mutex<HashMap<String, RunOnce>>,
    /// Each student's verdicts and times, by step: written once all are in.
    verdicts: Mutex<Vec<Vec<Option<Timed>>>>,
    /// The next file to grade: student `next / steps`, step `next % steps`.
    next: AtomicUsize,
    /// Why the lab failed (the reference did): the workers stop.
    broken: Mutex<Option<String>>,
}

/// Grades the `pending` students' files, [`workers`] at a time: each file's runs as an
/// account of their own (`FIRST_RUN_UID` and up, one a file, so that no two runs at once
/// share one and nothing a run leaves under its account meets another student's), each
/// student's verdicts written in step order once all are in.
fn grade_students(class: &Path, steps: &[testkit::Step], pending: &[String]) -> Result<ExitCode, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let reference_dir = Path::new(PROGRAMS).join("reference");
    for dir in [class.join("results"), reference_dir.clone()] {
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    }
    let tool = Path::new(PROGRAMS).join("xtask");
    std::fs::copy(&exe, &tool).map_err(io(&tool))?;
    // The reference's programs too: each is run for its step, and 09's is every student's
    // peer.
    let built_dir = exercise::reference_dir()?;
    for step in steps {
        let built = built_dir.join(&step.bin);
        std::fs::copy(&built, reference_dir.join(&step.bin)).map_err(io(&built))?;
    }
    for name in pending {
        let _ = std::fs::remove_file(class.join("results").join(format!("{name}.tsv.partial")));
    }
    let grading = Grading {
        class,
        steps,
        pending,
        handins: pending.iter().map(|n| key_values(&class.join("students").join(n).join("handin.tsv"))).collect(),
        tool,
        reference_dir,
        references: steps.iter().map(|_| OnceLock::new()).collect(),
        graded: Mutex::default(),
        verdicts: Mutex::new(vec![vec![None; steps.len()]; pending.len()]),
        next: AtomicUsize::new(0),
        broken: Mutex::new(None),
    };
    // The reference's runs of every step a file was handed in for, first and one after the
    // other, before the host builds anything: the bounds are measured without a neighbour.
    for (k, step) in steps.iter().enumerate() {
        if grading.handins.iter().any(|h| file_sha(h, &step.bin).is_some()) {
            grading.reference(k)?;
        }
    }
    build::say_references_made(class)?;
    if steps.is_empty() {
        for name in pending {
            grading.write(name, &[])?;
        }
    }
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..workers()).map(|_| scope.spawn(|| grading.work())).collect();
        workers.into_iter().try_for_each(|w| w.join().expect("a grading worker panicked"))
    })?;
    match grading.broken.into_inner().unwrap() {
        Some(report) => {
            eprintln!("grade: {report}");
            Ok(ExitCode::from(INFRASTRUCTURE))
        }
        None => Ok(ExitCode::SUCCESS),
    }
}

impl Grading<'_> {
    /// The reference's runs of step `k`, made the first time they are asked for.
    fn reference(&self, k: usize) -> Result<&(ReferenceRuns, u64), String> {
        let step = &self.steps[k];
        let made = self.references[k].get_or_init(|| {
            let reference = self.reference_dir.join(&step.bin);
            let runs = ReferenceRuns::new(step.nn(), &reference.to_string_lossy())?;
            let slowest = runs.run_all();
            let floor = if step.pair { BOUND_FLOOR } else { ALONE_FLOOR };
            let bound = ((slowest.as_secs_f64() * BOUND_FACTOR).ceil() as u64).clamp(floor, DEADLINE.as_secs() - 5);
            eprintln!(
                "grade: the reference's slowest run of {} took {:.1} s: a student's program may run {bound} s",
                step.bin,
                slowest.as_secs_f64()
            );
            Ok((runs, bound))
        });
        made.as_ref().map_err(Clone::clone)
    }

    /// Takes the next file, grades it, until there is none or the lab failed.
    fn work(&self) -> Result<(), String> {
        loop {
            let j = self.next.fetch_add(1, Ordering::SeqCst);
            if j >= self.pending.len() * self.steps.len() || self.broken.lock().unwrap().is_some() {
                return Ok(());
            }
            let (i, k) = (j / self.steps.len(), j % self.steps.len());
            let (name, step) = (&self.pending[i], &self.steps[k]);
            let t = Instant::now();
            let (verdict, same_as) = self.grade(i, k, sandbox::FIRST_RUN_UID + j as u32)?;
            if let Err(report) = &verdict {
                if report.starts_with("the REFERENCE failed") {
                    self.broken.lock().unwrap().get_or_insert_with(|| report.clone());
                    return Ok(());
                }
            }
            let seconds = t.elapsed().as_secs_f64();
            let word = if verdict.is_ok() { "pass" } else { "FAIL" };
            let same = same_as.map_or(String::new(), |first| format!(", the same file as {first}'s: not run again"));
            eprintln!("grade: [{}/{}] {name} {} {word} ({seconds:.1} s{same})", i + 1, self.pending.len(), step.nn());
            let mut verdicts = self.verdicts.lock().unwrap();
            verdicts[i][k] = Some((verdict, seconds));
            if verdicts[i].iter().all(Option::is_some) {
                self.write(name, &verdicts[i])?;
            }
        }
    }

    /// Student `i`'s file of step `k`: its verdict, and whose same file was run instead.
    fn grade(&self, i: usize, k: usize, uid: u32) -> Result<(Result<String, String>, Option<String>), String> {
        let (name, step, handin) = (&self.pending[i], &self.steps[k], &self.handins[i]);
        let sha = file_sha(handin, &step.bin);
        let key = file_key(sha.as_deref().unwrap_or_default(), &step.bin);
        let compiled = if sha.is_some() { self.built(&key)? } else { None };
        let build_dir = self.class.join("build");
        let verdict = if let Some((_, e)) = handin.iter().find(|(k, _)| k == "handin_error") {
            Err(format!("the hand-in could not be taken: {e}"))
        } else if let Some(why) = vet::refused(handin, &step.bin) {
            Err(format!("refused, not built or run: {why}"))
        } else if sha.is_none() {
            Err(format!("not handed in: there is no exercises/{}.rs", step.bin))
        } else if let Some(stopped) = compiled.as_ref().filter(|m| m.starts_with("the build was stopped")) {
            let messages = build_errors(stopped, &build_dir, &student_file(self.class, step), &step.bin);
            Err(format!("exercises/{}.rs: {messages}", step.bin))
        } else if let Some(messages) = &compiled {
            Err(format!(
                "exercises/{}.rs does not compile:\n{}",
                step.bin,
                build_errors(messages, &build_dir, &student_file(self.class, step), &step.bin)
            ))
        } else {
            // A file is run once per variant: the same file handed in by two students
            // whose variants differ is a pass for one at most.
            let variant = exercise::Variant::of(name, step.nn()).map_or(String::new(), |v| v.id());
            let cell = self.graded.lock().unwrap().entry(format!("{key} {variant}")).or_default().clone();
            let mut here = false;
            let made = cell.get_or_init(|| {
                here = true;
                self.run(name, k, &key, uid).map(|verdict| (verdict, name.clone()))
            });
            let (verdict, first) = made.clone()?;
            return Ok((verdict, (!here).then_some(first)));
        };
        Ok((verdict, None))
    }

    /// What the build of file `key` said ([`build::built`]), once it is built: when the host
    /// builds the files while the VM runs them, in the order the VM takes them, a file may
    /// not be built yet.
    fn built(&self, key: &str) -> Result<Option<String>, String> {
        let beside = build::host_builds(self.class);
        loop {
            let ended = !beside || build::host_ended(self.class);
            match build::built(self.class, key) {
                Err(_) if !ended => std::thread::sleep(std::time::Duration::from_millis(100)),
                said => return said,
            }
        }
    }

    /// Runs student `name`'s program of step `k` (CLASS/bins/KEY), from the VM's memory,
    /// sealed and bounded as `uid`, in every run of the step: its verdict.
    fn run(&self, name: &str, k: usize, key: &str, uid: u32) -> Result<Result<String, String>, String> {
        let step = &self.steps[k];
        let (refs, bound) = self.reference(k)?;
        let (built, program) = (self.class.join("bins").join(key), Path::new(PROGRAMS).join(format!("{uid}-{key}")));
        std::fs::copy(&built, &program).map_err(io(&built))?;
        let tool = self.tool.to_string_lossy().into_owned();
        let under = [tool, "grade".into(), "bounded".into(), uid.to_string(), bound.to_string()];
        let source = format!("exercises/{}.rs", step.bin);
        let verdict = exercise::grade(refs, &program.to_string_lossy(), &under, &source, Some(name));
        sandbox::kill_all(uid);
        let _ = std::fs::remove_file(&program);
        Ok(verdict)
    }

    /// Student `name`'s verdicts, in step order, to CLASS/results/NAME.tsv: written whole,
    /// then named so (a student with results is not graded again).
    fn write(&self, name: &str, verdicts: &[Option<Timed>]) -> Result<(), String> {
        let results = self.class.join("results");
        let partial = results.join(format!("{name}.tsv.partial"));
        std::fs::write(&partial, "").map_err(io(&partial))?;
        for (step, (verdict, seconds)) in self.steps.iter().zip(verdicts.iter().flatten()) {
            append_result(&partial, step.nn(), verdict, *seconds).map_err(io(&partial))?;
        }
        let path = results.join(format!("{name}.tsv"));
        std::fs::rename(&partial, &path).map_err(io(&path))
    }
}
