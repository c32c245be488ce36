//! How a run stops before its end without losing what it did: a [`StopRequest`] (SIGINT or
//! SIGTERM, burn-train's dashboard, a caller) stops the method in progress at a step boundary,
//! and the run ends with [`Interrupted`]: the methods that finished keep their rows, the one in
//! progress is reported as stopped (never as a result), and the exit status says so.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use burn::train::Interrupter;

/// A request to stop a run: shared by every method's training (burn-train's [`Interrupter`],
/// which its dashboard's quit also uses) and, in the `train22` binary, by SIGINT and SIGTERM.
/// Clones share one request.
///
/// ```
/// use burn_checkpoint_22_train::stop::StopRequest;
///
/// let stop = StopRequest::new();
/// assert!(stop.reason().is_none());
/// stop.stop("SIGINT", 130);
/// assert!(stop.interrupter().should_stop());
/// assert_eq!(stop.reason().unwrap(), ("SIGINT".to_string(), 130));
/// ```
#[derive(Clone, Default)]
pub struct StopRequest {
    interrupter: Interrupter,
    /// Who asked (a signal's name, the dashboard) and the exit status that says it.
    asked: Arc<Mutex<Option<(String, u8)>>>,
    /// Folders the run removes on every way out: a process a second signal ends removes them
    /// before it exits.
    temporary: Arc<Mutex<Vec<PathBuf>>>,
}

/// A folder [`StopRequest::removes_on_exit`] removes if a second signal ends the process; no
/// longer once this value is dropped (the folder's owner removes it then).
pub struct Removal {
    request: StopRequest,
    path: PathBuf,
}

impl Drop for Removal {
    fn drop(&mut self) {
        self.request.temporary().retain(|path| *path != self.path);
    }
}

/// The exit status of a run stopped by SIGINT (or from burn-train's dashboard), as a shell
/// gives a program SIGINT ended: 128 + 2.
pub const SIGINT_STATUS: u8 = 130;
/// The exit status of a run stopped by SIGTERM: 128 + 15.
pub const SIGTERM_STATUS: u8 = 143;

impl StopRequest {
    /// A request not yet made.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same request, made by SIGINT or SIGTERM: the first stops the run at a step
    /// boundary (what it finished is reported, saved and written); a second one ends the process
    /// at once, its temporary folders removed ([`StopRequest::removes_on_exit`]). For the
    /// binary: a library caller keeps its own signals.
    pub fn on_signals(self) -> anyhow::Result<Self> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
        let request = self.clone();
        std::thread::Builder::new()
            .name("train22-signals".into())
            .spawn(move || {
                for signal in signals.forever() {
                    let (name, status) = match signal {
                        SIGTERM => ("SIGTERM", SIGTERM_STATUS),
                        _ => ("SIGINT", SIGINT_STATUS),
                    };
                    if request.reason().is_some() {
                        eprintln!(
                            "{name} again: stopping now, without saving the step in progress"
                        );
                        for path in request.temporary().iter() {
                            let _ = std::fs::remove_dir_all(path);
                        }
                        std::process::exit(status.into());
                    }
                    eprintln!(
                        "{name}: stopping at the end of the step in progress (again to stop now)"
                    );
                    request.stop(name, status);
                }
            })?;
        Ok(self)
    }

    /// Asks the run to stop, for `reason`, its exit status to be `status`.
    pub fn stop(&self, reason: &str, status: u8) {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert((reason.to_string(), status));
        self.interrupter.stop(Some(reason));
    }

    /// Who asked the run to stop and the exit status that says it: a stop through the
    /// interrupter alone (burn-train's dashboard) is said as such, with SIGINT's status.
    pub fn reason(&self) -> Option<(String, u8)> {
        if let Some(asked) = self.asked.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Some(asked);
        }
        self.interrupter.should_stop().then(|| {
            (
                "stopped from burn-train's dashboard".to_string(),
                SIGINT_STATUS,
            )
        })
    }

    /// Has `path`, a temporary folder, removed if a second signal ends the process, while the
    /// returned value lives.
    pub fn removes_on_exit(&self, path: &Path) -> Removal {
        self.temporary().push(path.to_path_buf());
        Removal {
            request: self.clone(),
            path: path.to_path_buf(),
        }
    }

    fn temporary(&self) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
        self.temporary.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The interrupter every method's training watches.
    pub fn interrupter(&self) -> Interrupter {
        self.interrupter.clone()
    }
}

/// A run stopped before its end by a [`StopRequest`]: the method it stopped (or the one it
/// would have started), how far that method got, and why.
#[derive(Debug, Clone)]
pub struct Interrupted {
    /// The method stopped or not started.
    pub method: String,
    /// Who asked.
    pub reason: String,
    /// The method's epochs complete when it stopped (`None`: it had not started).
    pub epochs_done: Option<usize>,
    /// The run's epochs a method.
    pub epochs: usize,
    /// How to go on, where the run was saved.
    pub resume: Option<String>,
    /// The exit status.
    pub status: u8,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the run stopped ({}) ", self.reason)?;
        match self.epochs_done {
            Some(done) => write!(
                f,
                "during --checkpoint {} after {done} of {} epoch(s): it gave no result",
                self.method, self.epochs
            )?,
            None => write!(f, "before --checkpoint {}", self.method)?,
        }
        if let Some(hint) = &self.resume {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Interrupted {}
