//! Errors that explain themselves.
//!
//! A verbs call that fails hands back a bare errno, and `ibv_rc_pingpong` prints
//! `Failed to modify QP to RTR` without even that. Newcomers then search the web for an
//! `EINVAL` that could mean a dozen things. Every error in rdma-dissect instead carries four
//! parts, printed on stderr by [`report`]:
//!
//! ```text
//! error: ibv_modify_qp INIT→RTR failed: EINVAL (Invalid argument)
//!   cause: the port's link layer is Ethernet (RoCE) and the address vector has no GRH ...
//!   fix:   pass a GID index on both sides, e.g. `-g 1` in the lab VM
//! ```
//!
//! * **what** failed — the verb (or other operation) and its arguments that matter;
//! * the **errno**, by name and text (`EINVAL (Invalid argument)`), when there is one;
//! * the likely **cause**, in terms of the verbs rules;
//! * the **fix**, something the reader can type.
//!
//! Stage code builds errors with [`Error::verb`] (a verb returned an errno) or
//! [`Error::new`] (anything else) and adds [`Error::cause`] / [`Error::fix`]. The break-it
//! cases reuse the same type: they make a mistake on purpose, let the device fail, and match
//! on [`Error::errno`] to attach the explanation of that particular mistake.
//!
//! **Why one error type, and where `anyhow` comes in.** Inside the library every fallible
//! function returns this [`Error`], not `anyhow::Error`: callers (the break-it cases,
//! `explain_rtr`) inspect it — its errno, whether it is explained yet — and add the cause
//! and fix that only they know, which a type-erased error would make a downcast at every
//! step. `anyhow` serves at the top, where nothing inspects the error any more: a step's
//! body returns `anyhow::Result` to [`main`], so it can also `?` errors that are not ours
//! (I/O, parsing) and [`report`] prints those with their chain of causes.

use std::fmt;
use std::io;

/// The result type of every fallible function in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error with its explanation: what failed, errno, likely cause, fix.
#[derive(Debug)]
pub struct Error {
    what: String,
    errno: Option<i32>,
    cause: Option<String>,
    fix: Option<String>,
}

impl Error {
    /// An error that is not a verb's errno (bad input, a protocol violation, ...).
    pub fn new(what: impl Into<String>) -> Self {
        Error { what: what.into(), errno: None, cause: None, fix: None }
    }

    /// `verb` failed with the OS error `err` (an errno, as every verb reports failures).
    ///
    /// Verbs report errors in two ways: those that return a pointer return NULL and set
    /// `errno`; those that return `int` return the errno value itself (`ibv_modify_qp`,
    /// `ibv_post_send`, ...). The FFI layer turns both into an [`io::Error`].
    pub fn verb(what: impl Into<String>, err: io::Error) -> Self {
        Error { what: what.into(), errno: err.raw_os_error(), cause: None, fix: None }
    }

    /// Adds the likely cause, in terms of the verbs rules.
    pub fn cause(mut self, cause: impl Into<String>) -> Self {
        self.cause = Some(cause.into());
        self
    }

    /// Adds the fix: what the reader should do or type.
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    /// Adds a cause and fix only if none was attached yet: lets an outer layer explain an
    /// error that the inner layer could not interpret.
    pub fn or_explain(self, cause: impl Into<String>, fix: impl Into<String>) -> Self {
        if self.cause.is_some() {
            self
        } else {
            self.cause(cause).fix(fix)
        }
    }

    /// The errno the failing call reported, if any.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }

    /// What failed (the first line of the report, without the errno).
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The explanation attached so far, if any.
    pub fn explanation(&self) -> Option<&str> {
        self.cause.as_deref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed", self.what)?;
        if let Some(errno) = self.errno {
            write!(f, ": {}", describe_errno(errno))?;
        }
        if let Some(cause) = &self.cause {
            write!(f, "\n  cause: {}", indent(cause))?;
        }
        if let Some(fix) = &self.fix {
            write!(f, "\n  fix:   {}", indent(fix))?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Continuation lines of a cause or fix line up under its first line.
fn indent(text: &str) -> String {
    text.replace('\n', "\n         ")
}

/// `EINVAL (Invalid argument)`: the errno's symbolic name, then the C library's text.
///
/// The name is what the man pages list under ERRORS, so it is the thing to search for.
pub fn describe_errno(errno: i32) -> String {
    let text = io::Error::from_raw_os_error(errno).to_string();
    // std renders "Invalid argument (os error 22)"; the number is noise next to the name.
    let text = text.split(" (os error").next().unwrap_or(&text).to_owned();
    match errno_name(errno) {
        Some(name) => format!("{name} ({text})"),
        None => format!("errno {errno} ({text})"),
    }
}

/// The symbolic name of the errno values the verbs and the TCP exchange can return.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::EPIPE => "EPIPE",
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::ENODATA => "ENODATA",
        libc::EPROTO => "EPROTO",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNRESET => "ECONNRESET",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        _ => return None,
    })
}

/// Prints `err` on stderr as `error: ...` with its explanation.
///
/// Errors that did not come from this crate (from `clap`, or an [`anyhow::Error`] built
/// elsewhere) are printed with their chain of causes.
pub fn report(err: &anyhow::Error) {
    match err.downcast_ref::<Error>() {
        Some(explained) => eprintln!("error: {explained}"),
        None => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  because: {cause}");
            }
        }
    }
}

/// Runs a step's body and turns its outcome into the process exit status.
///
/// Every step's `main` is `error::main(run)`: an error is reported on stderr by [`report`]
/// and the process exits with status 1 — never a panic, never a silent failure. Values
/// held by `run` have been dropped (and their verbs objects destroyed) by the time the
/// error is printed, exactly as `pp_close_ctx` runs before `ibv_rc_pingpong` returns.
pub fn main(run: impl FnOnce() -> anyhow::Result<()>) -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            report(&err);
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_is_named_and_explained() {
        let err = Error::verb("ibv_alloc_pd", io::Error::from_raw_os_error(libc::ENOMEM))
            .cause("too many PDs")
            .fix("free some");
        assert_eq!(
            err.to_string(),
            "ibv_alloc_pd failed: ENOMEM (Cannot allocate memory)\n  cause: too many PDs\n  fix:   free some"
        );
    }

    #[test]
    fn multi_line_causes_stay_aligned() {
        let err = Error::new("x").cause("a\nb");
        assert_eq!(err.to_string(), "x failed\n  cause: a\n         b");
    }

    #[test]
    fn or_explain_keeps_the_first_explanation() {
        let err = Error::new("x").cause("inner").or_explain("outer", "f");
        assert_eq!(err.explanation(), Some("inner"));
        let err = Error::new("x").or_explain("outer", "f");
        assert_eq!(err.explanation(), Some("outer"));
    }
}
