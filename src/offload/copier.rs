//! The copy thread: offloaded operands are read back on a thread of their own, so that forward
//! never waits on a copy.
//!
//! Burn 0.21 has no read that starts a copy and returns: `float_into_data` is a future, but on
//! CUDA its first poll both enqueues the copy and waits on its fence (cubecl's `read_async`
//! blocks inside the future), so polling it once would stall the training thread as
//! `into_data` does. What Burn does allow is reading from another thread: a cubecl runtime gives
//! each thread a stream of its own, so a read issued there waits for the tensor's producer
//! through an event (not for the whole training stream) and runs beside the training thread's
//! kernels. Each training thread gets one copy thread, made when it first offloads and joined
//! when it ends; the copies it runs are in the order forward made them.
//!
//! A copy thread must not drop the last handle of a tensor: Burn's fusion decides whether an op
//! consumes a tensor by reading its handle count, then drops the handle, in two steps, so a
//! handle dropped on another thread between them frees a tensor an op still reads ("Should have
//! handle for tensor", burn-fusion 0.21). Each copy therefore hands a handle back
//! ([`submit`]'s return value), which the training thread drops at its next copy or read of a
//! copy ([`drop_finished`]).
//!
//! Copies in flight hold their device tensor (and, on CUDA, a pinned staging buffer) until they
//! finish, so their bytes are bounded ([`Settings::offload_in_flight_limit`](crate::Settings)):
//! past the bound, forward waits for the oldest copies to finish, and says so in
//! [`Counters::offload`](crate::counters::Counters::offload).

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::counters;

/// 1 GiB by default: at PCIe speeds about 40 ms of copies behind forward.
static IN_FLIGHT_LIMIT: AtomicUsize = AtomicUsize::new(1 << 30);

/// The most bytes of offload copies that may be in flight per training thread before forward
/// waits for the oldest (`Settings::offload_in_flight_limit`).
pub(crate) fn in_flight_limit() -> usize {
    IN_FLIGHT_LIMIT.load(Ordering::Relaxed)
}

/// Sets the bound of [`in_flight_limit`], for every thread.
pub(crate) fn set_in_flight_limit(bytes: usize) {
    IN_FLIGHT_LIMIT.store(bytes, Ordering::Relaxed);
}

type Job = Box<dyn FnOnce() + Send>;
/// What a copy hands back to its training thread, to be dropped there.
pub(crate) type Leftover = Box<dyn Send>;

/// The copies a training thread has in flight, and what finished ones handed back.
#[derive(Default)]
struct InFlight {
    state: Mutex<Copies>,
    finished: Condvar,
}

#[derive(Default)]
struct Copies {
    /// Bytes of the copies in flight.
    bytes: usize,
    /// What finished copies handed back.
    leftovers: Vec<Leftover>,
}

impl InFlight {
    fn lock(&self) -> MutexGuard<'_, Copies> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits on `copies` until `done` holds, and says how long that took in forward (if it
    /// waited, or if `always_counted`: a synchronous copy is a wait however soon it finished).
    fn wait_until<'a>(
        &'a self,
        mut copies: MutexGuard<'a, Copies>,
        always_counted: bool,
        done: impl Fn(&Copies) -> bool,
    ) -> MutexGuard<'a, Copies> {
        if always_counted || !done(&copies) {
            let waiting = Instant::now();
            while !done(&copies) {
                copies = self
                    .finished
                    .wait(copies)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            counters::note_offload_wait(counters::Pass::Forward, waiting.elapsed());
        }
        copies
    }
}

/// A training thread's copy thread.
struct Copier {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    in_flight: Arc<InFlight>,
}

impl Copier {
    fn start() -> Copier {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("burn-checkpoint offload".into())
            .spawn(move || {
                for job in queue {
                    job();
                }
            })
            .expect("burn-checkpoint: starting the offload copy thread failed");
        Copier {
            jobs: Some(jobs),
            thread: Some(thread),
            in_flight: Arc::default(),
        }
    }
}

impl Drop for Copier {
    // The training thread ends: its copy thread finishes what it was given, then ends too.
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

thread_local! {
    static COPIER: RefCell<Option<Copier>> = const { RefCell::new(None) };
}

/// Runs `copy` (`bytes` of it) on this thread's copy thread, after the copies given before it;
/// what it returns is dropped on this thread later ([`drop_finished`]). Waits first only while
/// more than the in-flight bound would be in flight. `copy` should not panic (a copy that fails
/// says so in what it fills).
pub(crate) fn submit(bytes: usize, copy: impl FnOnce() -> Leftover + Send + 'static) {
    drop_finished();
    COPIER.with(|copier| {
        let mut copier = copier.borrow_mut();
        let copier = copier.get_or_insert_with(Copier::start);
        let in_flight = Arc::clone(&copier.in_flight);
        let limit = in_flight_limit();
        {
            let mut copies = in_flight.wait_until(in_flight.lock(), false, |copies| {
                copies.bytes == 0 || copies.bytes + bytes <= limit
            });
            copies.bytes += bytes;
            counters::note_offload_copy(bytes, copies.bytes);
        }
        let job: Job = Box::new(move || {
            // A panic would leave the bytes counted and forward waiting on them for ever.
            let leftover = catch_unwind(AssertUnwindSafe(copy));
            let mut copies = in_flight.lock();
            copies.bytes -= bytes;
            copies.leftovers.extend(leftover.ok());
            drop(copies);
            in_flight.finished.notify_all();
        });
        copier
            .jobs
            .as_ref()
            .expect("the copy thread runs while its training thread does")
            .send(job)
            .expect("burn-checkpoint: the offload copy thread is gone");
        if limit == 0 {
            let in_flight = &copier.in_flight;
            drop(in_flight.wait_until(in_flight.lock(), true, |copies| copies.bytes == 0));
        }
    });
}

/// Drops, on this (training) thread, what the copies finished so far handed back.
pub(crate) fn drop_finished() {
    let leftovers = COPIER.with(|copier| {
        copier
            .borrow()
            .as_ref()
            .map(|copier| std::mem::take(&mut copier.in_flight.lock().leftovers))
    });
    // Outside every lock: a dropped handle may run backend code.
    drop(leftovers);
}
