//! A step that runs out of memory ([`StepReport::try_measure`](super::StepReport::try_measure)):
//! instead of the backend's bare panic, the report of the step so far and what the backend said.
//!
//! How Burn's backends fail an allocation decides how it is caught (docs/gpu.md, "When an
//! allocation fails"): cubecl's runtimes panic on their **device thread** with "can't allocate
//! buffer of size: N", and the step's own thread fails later, at its next read, with a message
//! that does not say memory. So while a step runs under `try_measure`, a panic hook watches the
//! panics of every thread: chained to the hook it replaced (which still prints every panic), and
//! put back when the last watched step ends, so that nothing is left behind in the process. A
//! step's panic is an out-of-memory failure when an allocation failure was seen while it ran;
//! any other panic is resumed as it was.

use std::fmt;
use std::panic::{self, AssertUnwindSafe, PanicHookInfo, catch_unwind, resume_unwind};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::host::mib;
use super::meter::MemoryMeter;
use super::report::StepReport;
use super::timeline::Timeline;

/// A training step that failed to allocate, with the report of the step up to the failure
/// (what [`StepReport::try_measure`] returns, boxed, instead of the backend's panic).
///
/// ```
/// use burn_checkpoint_core::memory::{HostMeter, OutOfMemory, StepReport};
///
/// // A step that finishes gives its result and report, as `StepReport::measure` does.
/// let (sum, _) = StepReport::try_measure(HostMeter, || (0..10).sum::<u32>()).unwrap();
/// assert_eq!(sum, 45);
/// ```
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct OutOfMemory {
    /// The step up to the failure: every top-level region that closed, the one open then (what
    /// it held when the failure was seen), what was made outside regions, the peak so far.
    pub report: StepReport,
    /// Where the step was when the failure was seen (`forward, in name#3`, `backward,
    /// recomputing name#3`, ...): the last region event before it.
    pub at: String,
    /// The bytes the failed allocation asked for, where the backend's message says them.
    pub requested_bytes: Option<u64>,
    /// The bytes in use when the failure was seen, absolute (the meter's reading, not above the
    /// step's start); `None` where the meter could not be read.
    pub in_use_bytes: Option<u64>,
    /// On a device, the bytes its memory manager reserved then (its pools' pages).
    pub reserved_bytes: Option<u64>,
    /// The device's memory, where its backend says it ([`MemoryMeter::capacity`], read with the
    /// bytes in use after the failure): CUDA's; `None` on wgpu (which exposes no size) and on the
    /// host. Absent in reports written before it was kept.
    #[serde(default)]
    pub capacity_bytes: Option<u64>,
    /// The thread that raised the allocation failure (cubecl's device thread, by its name), and
    /// its message.
    pub thread: String,
    /// The backend's message for the allocation: the line of the panic's message that says it.
    pub message: String,
    /// The message the step's own panic carried (its first line): the original error.
    pub step_message: String,
    /// The step's timeline up to the failure, where it was recorded with one
    /// ([`Timeline::try_measure`]); not in the failure's JSON (write it on its own).
    #[serde(skip)]
    pub timeline: Option<Box<Timeline>>,
}

impl OutOfMemory {
    /// The failure `seen` while the step ran, with the step's report up to it, where it was
    /// (`at`), what the meter read after it and the step's own message: the one constructor,
    /// for [`OutOfMemory::catch`] and the recording's `StepReport::try_measure`.
    pub(crate) fn of(
        report: StepReport,
        at: String,
        seen: Seen,
        read: AfterFailure,
        step_message: String,
    ) -> Box<OutOfMemory> {
        Box::new(OutOfMemory {
            report,
            at,
            requested_bytes: seen.requested_bytes,
            in_use_bytes: read.in_use,
            reserved_bytes: read.reserved,
            capacity_bytes: read.capacity,
            thread: seen.thread,
            message: seen.message,
            step_message,
            timeline: None,
        })
    }
}

/// What a panic's message says of an allocation that failed: that it failed, the bytes it
/// asked for where it says them, and the line that says so.
#[derive(Clone, Debug, PartialEq, Eq)]
struct AllocationFailed {
    requested_bytes: Option<u64>,
    /// The message's line that reports the failure, trimmed: its first line where the backend
    /// says it there (cubecl's device thread on Burn 0.21), a cause further down where the
    /// failure reaches the step as the cause of a failed read (cubecl 0.11, Burn 0.22: "Error
    /// while reading data … Caused by: … can't allocate buffer of size: N").
    line: String,
}

impl AllocationFailed {
    /// The failure `message` reports, if it reports one: cubecl's "can't allocate buffer of
    /// size: N" (wgpu and CUDA on Burn 0.21, a buffer no pool takes on 0.22) and "out of device
    /// memory allocating N bytes" (Burn 0.22's, after its one retry), sized; an "out of memory"
    /// of any backend, unsized.
    fn in_message(message: &str) -> Option<AllocationFailed> {
        const SIZED: [&str; 2] = [
            "can't allocate buffer of size: ",
            "out of device memory allocating ",
        ];
        for sign in SIZED {
            if let Some(line) = message.lines().find(|line| line.contains(sign)) {
                let at = line.find(sign).expect("the line has it") + sign.len();
                let digits: String = line[at..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                return Some(AllocationFailed {
                    requested_bytes: digits.parse().ok(),
                    line: line.trim().to_string(),
                });
            }
        }
        let unsized_line = message.lines().find(|line| {
            let lower = line.to_lowercase();
            lower.contains("out of memory") || lower.contains("out_of_memory")
        })?;
        Some(AllocationFailed {
            requested_bytes: None,
            line: unsized_line.trim().to_string(),
        })
    }
}

/// [`OutOfMemory::at`] of a step run under [`OutOfMemory::catch`], which records nothing.
const UNRECORDED: &str = "not recorded";

impl OutOfMemory {
    /// Runs `step` watching for an allocation failure, as [`StepReport::try_measure`] does, but
    /// without recording it: nothing is read while the step runs (no device sync at a region's
    /// events), so a training loop can run every step under it. When an allocation failed while
    /// the step ran — the step panicked, or returned results computed without the buffer — the
    /// result tells the failed allocation, what `meter` reads then, and the messages; its report
    /// has no regions and [`at`](Self::at) is `not recorded` (`try_measure` a step again to see
    /// what each region held). Any other panic is resumed.
    ///
    /// ```
    /// use burn_checkpoint_core::memory::{HostMeter, OutOfMemory};
    ///
    /// assert_eq!(OutOfMemory::catch(HostMeter, || 6 * 7).unwrap(), 42);
    /// // A panic that is no allocation failure is the caller's, as it was.
    /// let caught = std::panic::catch_unwind(|| OutOfMemory::catch(HostMeter, || panic!("a bug")));
    /// assert!(caught.is_err());
    /// ```
    pub fn catch<R>(
        meter: impl MemoryMeter,
        step: impl FnOnce() -> R,
    ) -> Result<R, Box<OutOfMemory>> {
        let watch = Watch::start();
        let outcome = catch_unwind(AssertUnwindSafe(step));
        let Some(seen) = watch.first_seen() else {
            drop(watch);
            return Ok(outcome.unwrap_or_else(|payload| resume_unwind(payload)));
        };
        let read = read_after_failure(&meter);
        let report = StepReport {
            meter: meter.describe(),
            ..StepReport::default()
        };
        let at = UNRECORDED.to_string();
        Err(OutOfMemory::of(
            report,
            at,
            seen,
            read,
            outcome_message(&outcome),
        ))
    }
}

/// What a meter reads after a failure, each `None` where its read panics (a device's sync could
/// fail again).
pub(crate) struct AfterFailure {
    pub in_use: Option<u64>,
    pub reserved: Option<u64>,
    /// Only read on a failure: nothing is asked of the device on a step that goes well.
    pub capacity: Option<u64>,
}

/// What `meter` reads after a failure, as it is.
pub(crate) fn read_after_failure(meter: &dyn MemoryMeter) -> AfterFailure {
    fn unless_it_panics(read: impl FnOnce() -> Option<u64>) -> Option<u64> {
        catch_unwind(AssertUnwindSafe(read)).ok().flatten()
    }
    AfterFailure {
        in_use: unless_it_panics(|| Some(meter.in_use())),
        reserved: unless_it_panics(|| meter.reserved()),
        capacity: unless_it_panics(|| meter.capacity()),
    }
}

/// [`OutOfMemory::step_message`] of a watched step's outcome: its panic's first line, or
/// [`RETURNED`] where it returned.
pub(crate) fn outcome_message<R>(outcome: &std::thread::Result<R>) -> String {
    match outcome {
        Ok(_) => RETURNED.to_string(),
        Err(payload) => step_message(&**payload),
    }
}

/// [`OutOfMemory::step_message`] of a step that returned although an allocation failed while it
/// ran: on wgpu with fusion, cubecl's device thread can go on after a failed allocation, and the
/// step's reads return values computed without the buffer (the trainer's out-of-memory test saw a
/// validation loss of 10.3 where the run had 2.3).
pub(crate) const RETURNED: &str = "nothing: the step returned, but an allocation failed while it ran, so its results cannot be trusted";

impl fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes =
            |b: Option<u64>| b.map_or("?".to_string(), |b| format!("{:.1} MiB", mib(b as usize)));
        writeln!(
            f,
            "out of memory: an allocation of {} failed ({}: {})",
            bytes(self.requested_bytes),
            self.thread,
            self.message
        )?;
        let capacity = match self.capacity_bytes {
            Some(capacity) => format!("of the device's {}", bytes(Some(capacity))),
            None => "(the backend does not say the device's size)".to_string(),
        };
        writeln!(
            f,
            "the step was {}: {} in use, {} reserved {capacity}; the step itself failed with: {}",
            self.at,
            bytes(self.in_use_bytes),
            bytes(self.reserved_bytes),
            self.step_message
        )?;
        if self.at == UNRECORDED {
            return Ok(());
        }
        write!(f, "{}", self.report)
    }
}

impl std::error::Error for OutOfMemory {}

/// An allocation failure a watched step saw: the thread that raised it and its message.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub thread: String,
    pub message: String,
    pub requested_bytes: Option<u64>,
}

type Hook = Arc<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;

/// The hook replaced while steps are watched, and how many are.
struct Installed {
    steps: usize,
    previous: Option<Hook>,
}

static INSTALLED: Mutex<Installed> = Mutex::new(Installed {
    steps: 0,
    previous: None,
});
/// Allocation failures seen while any step is watched (emptied when the last one ends). Its own
/// lock: the hook takes only this one, so a panic raised while `INSTALLED` is held cannot
/// deadlock it.
static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());

fn lock<T>(mutex: &'static Mutex<T>) -> MutexGuard<'static, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A panic's message, where its payload is a string (`panic!` with a message gives one); empty
/// otherwise: what a caught panic said, for a report or an error.
///
/// ```
/// use burn_checkpoint_core::memory::panic_message;
///
/// let caught = std::panic::catch_unwind(|| panic!("out of {} memory", "device")).unwrap_err();
/// assert_eq!(panic_message(&*caught), "out of device memory");
/// let caught = std::panic::catch_unwind(|| std::panic::panic_any(7)).unwrap_err();
/// assert_eq!(panic_message(&*caught), "");
/// ```
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or("").to_string()
}

/// One watched step: every thread's allocation failures from its start are kept until it ends.
pub(crate) struct Watch {
    from: usize,
}

impl Watch {
    pub fn start() -> Watch {
        let mut installed = lock(&INSTALLED);
        if installed.steps == 0 {
            let previous: Hook = Arc::from(panic::take_hook());
            let chained = previous.clone();
            panic::set_hook(Box::new(move |info| {
                let message = panic_message(info.payload());
                if let Some(failed) = AllocationFailed::in_message(&message) {
                    let thread = std::thread::current();
                    lock(&SEEN).push(Seen {
                        thread: thread.name().unwrap_or("(an unnamed thread)").to_string(),
                        message: failed.line,
                        requested_bytes: failed.requested_bytes,
                    });
                }
                chained(info);
            }));
            installed.previous = Some(previous);
        }
        installed.steps += 1;
        Watch {
            from: lock(&SEEN).len(),
        }
    }

    /// The first allocation failure seen since this step started.
    pub fn first_seen(&self) -> Option<Seen> {
        lock(&SEEN).get(self.from).cloned()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut installed = lock(&INSTALLED);
        installed.steps -= 1;
        if installed.steps == 0 {
            lock(&SEEN).clear();
            if let Some(previous) = installed.previous.take() {
                // Ours (holding the other reference) goes first; then the hook it replaced is
                // put back (wrapped: ours shared it).
                drop(panic::take_hook());
                panic::set_hook(Box::new(move |info| previous(info)));
            }
        }
    }
}

/// What the step's own panic said, first line.
fn step_message(payload: &(dyn std::any::Any + Send)) -> String {
    first_line(&panic_message(payload))
}

/// Tests that raise allocation failures take this first, whatever module they are in: a watch
/// sees every thread's failures, so two such tests at once would read each other's.
#[cfg(test)]
pub(crate) fn one_failing_test_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    lock(&ONE)
}

/// An allocation failure as cubecl raises it: a panic saying `message` on a thread named
/// "device", which the caller outlives.
#[cfg(test)]
pub(crate) fn fail_on_the_device_thread(message: &'static str) {
    let device = std::thread::Builder::new()
        .name("device".into())
        .spawn(move || panic!("{message}"))
        .unwrap();
    assert!(device.join().is_err(), "the device thread panicked");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::device::{DeviceMemory, Usage};
    use crate::memory::{HostMeter, Meter};

    /// A device that says its size, as CUDA's driver does: 1 MiB in use of 2 reserved, 8 there.
    #[derive(Clone, Debug)]
    struct SaysItsSize;

    impl DeviceMemory for SaysItsSize {
        fn usage(&self) -> Option<Usage> {
            Some(Usage {
                in_use: 1 << 20,
                reserved: 2 << 20,
            })
        }
        fn reader(&self) -> impl Fn() -> Usage + Send + 'static {
            || Usage::default()
        }
        fn sync(&self) {}
        fn cleanup(&self) {}
        fn describe(&self) -> String {
            "a sized device".into()
        }
        fn capacity(&self) -> Option<u64> {
            Some(8 << 20)
        }
    }

    #[test]
    fn a_backends_message_says_whether_an_allocation_failed_and_its_size() {
        let failed = |message| AllocationFailed::in_message(message).map(|f| f.requested_bytes);
        // Burn 0.22 (cubecl 0.11): the failure reaches the step as the cause of a read.
        let read = "Error while reading data: use `try_into_data` instead\nCaused by:\n  An IO \
                    error happened\nCaused by:\n  can't allocate buffer of size: 196608\n";
        let seen = AllocationFailed::in_message(read).expect("an allocation failure");
        assert_eq!(seen.requested_bytes, Some(196608));
        assert_eq!(seen.line, "can't allocate buffer of size: 196608");
        assert_eq!(
            failed("can't allocate buffer of size: 4194304"),
            Some(Some(4194304))
        );
        assert_eq!(
            failed("out of device memory allocating 512 bytes"),
            Some(Some(512))
        );
        assert_eq!(failed("CUDA_ERROR_OUT_OF_MEMORY"), Some(None));
        assert_eq!(failed("index out of bounds"), None);
    }

    /// A step that fails as on cubecl: the allocation panics on another thread (the device's),
    /// the step's own thread at its next read with a message that does not say memory.
    fn failing_step() {
        fail_on_the_device_thread("can't allocate buffer of size: 4194304");
        panic!("a read failed");
    }

    #[test]
    fn a_failure_says_the_size_of_a_device_that_says_it() {
        let _alone = one_failing_test_at_a_time();
        let meter = Meter::<SaysItsSize>::device(SaysItsSize).unwrap();
        for failure in [
            OutOfMemory::catch(meter.clone(), failing_step).unwrap_err(),
            StepReport::try_measure(meter, failing_step).unwrap_err(),
        ] {
            assert_eq!(failure.capacity_bytes, Some(8 << 20));
            assert_eq!(failure.requested_bytes, Some(4 << 20));
            assert_eq!(failure.thread, "device");
            assert_eq!(failure.step_message, "a read failed");
            let said = failure.to_string();
            assert!(
                said.contains("1.0 MiB in use, 2.0 MiB reserved of the device's 8.0 MiB"),
                "{said}"
            );
        }
    }

    #[test]
    fn a_failure_on_a_device_that_does_not_say_its_size_says_so() {
        let _alone = one_failing_test_at_a_time();
        // The host's meter: no device, no size.
        let failure = OutOfMemory::catch(HostMeter, failing_step).unwrap_err();
        assert_eq!(failure.capacity_bytes, None);
        assert!(
            failure
                .to_string()
                .contains("(the backend does not say the device's size)"),
            "{failure}"
        );
    }
}
