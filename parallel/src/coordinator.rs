//! The coordinator's side of the worker threads: sending commands, gathering one report from
//! each, and shutting them down.

use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;

use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;

use super::ParallelError;
use super::worker::replies::Reply;
use super::worker::{Command, Failure, Report};

/// A worker thread as the coordinator sees it.
pub(crate) struct Handle<B: AutodiffBackend, M: AutodiffModule<B>, O> {
    /// Dropped to tell the worker to finish.
    pub commands: Option<Sender<Command<B, M>>>,
    pub thread: Option<JoinHandle<Option<(M, O)>>>,
}

/// The worker threads; dropping this joins them.
pub(crate) struct Workers<B: AutodiffBackend, M: AutodiffModule<B>, O> {
    pub handles: Vec<Handle<B, M, O>>,
    pub replies: Receiver<(usize, Report<M, O>)>,
    /// Workers whose thread has ended.
    exited: Vec<bool>,
}

/// Whether a command went to a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Not addressed.
    No,
    /// Sent: a report will come (or `Exited`).
    Reached,
    /// Addressed, but its thread has ended.
    Unreachable,
}

/// One report per worker asked, in worker order, and which failure arrived first.
pub(crate) struct Gathered<T> {
    pub results: Vec<Option<Result<T, ParallelError>>>,
    pub first_failure: Option<usize>,
}

impl<T> Gathered<T> {
    /// Every asked worker's value, or the failure that arrived first (the cause; failures after
    /// it are often its consequences).
    pub fn into_values(mut self) -> Result<Vec<T>, ParallelError> {
        if let Some(worker) = self.first_failure {
            let error = self.results[worker].take().expect("a report");
            return Err(error.err().expect("a failure"));
        }
        Ok(self.results.into_iter().flatten().flatten().collect())
    }
}

impl<B: AutodiffBackend, M: AutodiffModule<B>, O> Workers<B, M, O> {
    pub fn new(replies: Receiver<(usize, Report<M, O>)>) -> Self {
        Workers {
            handles: Vec::new(),
            replies,
            exited: Vec::new(),
        }
    }

    pub fn push(&mut self, handle: Handle<B, M, O>) {
        self.handles.push(handle);
        self.exited.push(false);
    }

    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// Sends `command(i)` to each worker `i` in `to`; says which workers it reached.
    pub fn send(
        &self,
        to: impl IntoIterator<Item = usize>,
        mut command: impl FnMut(usize) -> Command<B, M>,
    ) -> Vec<Asked> {
        let mut asked = vec![Asked::No; self.len()];
        for i in to {
            let handle = &self.handles[i];
            let reached = !self.exited[i]
                && handle
                    .commands
                    .as_ref()
                    .is_some_and(|c| c.send(command(i)).is_ok());
            asked[i] = if reached {
                Asked::Reached
            } else {
                Asked::Unreachable
            };
        }
        asked
    }

    /// Waits for one report of kind `R` from each worker in `asked`; a worker whose thread
    /// ended counts as failed. `on_first_failure` runs as soon as the first failure arrives,
    /// while other workers may still be busy.
    pub fn gather<R: Reply<M, O>>(
        &mut self,
        asked: &[Asked],
        mut on_first_failure: impl FnMut(),
    ) -> Gathered<R::Value> {
        let n = self.len();
        let mut results: Vec<Option<Result<R::Value, ParallelError>>> =
            (0..n).map(|_| None).collect();
        let mut first_failure = None;
        let mut waiting: usize = asked.iter().filter(|a| **a == Asked::Reached).count();
        let mut fail = |results: &mut Vec<Option<Result<R::Value, ParallelError>>>,
                        worker: usize,
                        error: ParallelError| {
            results[worker] = Some(Err(error));
            if first_failure.is_none() {
                first_failure = Some(worker);
                on_first_failure();
            }
        };
        for (worker, asked) in asked.iter().enumerate() {
            if *asked == Asked::Unreachable {
                fail(&mut results, worker, ParallelError::WorkerLost { worker });
            }
        }
        while waiting > 0 {
            let Ok((worker, report)) = self.replies.recv() else {
                // Every thread has ended: whoever has not answered never will.
                for worker in 0..n {
                    if asked[worker] == Asked::Reached && results[worker].is_none() {
                        fail(&mut results, worker, ParallelError::WorkerLost { worker });
                    }
                }
                break;
            };
            if let Report::Exited = report {
                self.exited[worker] = true;
                if asked[worker] == Asked::Reached && results[worker].is_none() {
                    waiting -= 1;
                    fail(&mut results, worker, ParallelError::WorkerLost { worker });
                }
                continue;
            }
            if asked[worker] != Asked::Reached || results[worker].is_some() {
                continue;
            }
            waiting -= 1;
            match R::take(report) {
                Some(Ok(value)) => results[worker] = Some(Ok(value)),
                Some(Err(failure)) => fail(&mut results, worker, error(worker, failure)),
                None => fail(
                    &mut results,
                    worker,
                    ParallelError::Panicked {
                        worker,
                        message: "internal error: a report of the wrong kind".into(),
                    },
                ),
            }
        }
        Gathered {
            results,
            first_failure,
        }
    }

    /// Sends `command(i)` to one worker at a time, each after the one before has reported, and
    /// gathers the reports as [`gather`](Self::gather) does; stops at the first failure (the
    /// workers after it are not asked).
    pub fn in_turn<R: Reply<M, O>>(
        &mut self,
        mut command: impl FnMut(usize) -> Command<B, M>,
    ) -> Gathered<R::Value> {
        let n = self.len();
        let mut results: Vec<Option<Result<R::Value, ParallelError>>> =
            (0..n).map(|_| None).collect();
        let mut first_failure = None;
        for (worker, result) in results.iter_mut().enumerate() {
            let asked = self.send(worker..worker + 1, &mut command);
            let mut one = self.gather::<R>(&asked, || {});
            *result = one.results[worker].take();
            if one.first_failure.is_some() {
                first_failure = Some(worker);
                break;
            }
        }
        Gathered {
            results,
            first_failure,
        }
    }

    /// Closes every command channel and joins every thread; returns each replica and optimizer
    /// a worker still had. Idempotent.
    pub fn shutdown(&mut self) -> Vec<Option<(M, O)>> {
        for handle in &mut self.handles {
            handle.commands = None;
        }
        self.handles
            .iter_mut()
            .map(|handle| {
                handle
                    .thread
                    .take()
                    .and_then(|thread| thread.join().ok().flatten())
            })
            .collect()
    }
}

impl<B: AutodiffBackend, M: AutodiffModule<B>, O> Drop for Workers<B, M, O> {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A worker's failure as the caller's error.
pub(crate) fn error(worker: usize, failure: Failure) -> ParallelError {
    match failure {
        Failure::Panicked(message) => ParallelError::Panicked { worker, message },
        Failure::Failed(source) => ParallelError::Failed { worker, source },
        Failure::LossNotScalar(shape) => ParallelError::LossNotScalar { worker, shape },
        Failure::Collective(error) => ParallelError::Collective { worker, error },
        Failure::Timeout { during, waited } => ParallelError::Timeout {
            during: format!("worker {worker}'s {during}"),
            waited,
            waiting_for: "the other workers of the collective".into(),
        },
        Failure::NodeLost { broken } => broken.into_error(&format!("worker {worker}'s exchange")),
        Failure::NoModel => ParallelError::Poisoned,
    }
}
