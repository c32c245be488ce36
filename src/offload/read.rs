//! Reading a copy back: which thread issues the read, and which waits for it.
//!
//! Burn 0.21's `float_into_data` is a future. On wgpu its first poll does all the issuing
//! (burn-fusion drains the tensor's stream, cubecl flushes it, queues the copy to a staging buffer
//! and asks for it to be mapped) and returns pending; what is left is waiting. On CUDA (cubecl
//! 0.10) the first poll also waits on the copy's fence, and the CPU backends copy in it.
//!
//! Where the read is issued matters. Issued from the copy thread, it lands in the training stream
//! wherever the training thread happens to be: burn-fusion drains the stream there, so its fused
//! blocks are cut at a different op each step and each new cut is a kernel to compile (on
//! lavapipe, LLVM kept compiling through every step), and a cubecl stream is flushed there. So
//! where the first poll returns without waiting, the **training thread issues the read** at the
//! op that stored the tensor, the same point every step, and the copy thread only waits for it.
//! Where the first poll would wait (or copies at once), the **copy thread makes the whole read**
//! under the training thread's stream (`StreamId::executes`), so the training thread never
//! stalls on a GPU.
//!
//! Which kind a backend is, is learned on the copy thread: every read starts there until one of
//! a backend's first polls leaves its read pending, and from then on that backend's reads are
//! issued by the training thread.

use std::any::TypeId;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Mutex, Weak};
use std::task::{Context, Poll, Waker};

use burn_backend::{Backend, ExecutionError, StreamId, TensorData, try_read_sync};

use super::copier;
use crate::counters;
use crate::types::Primitive;

/// Where a read's value goes.
pub(super) trait Arrive: Send + Sync + 'static {
    /// The copy thread's end of a read: its value, or why there is none.
    fn arrive(&self, read: Result<TensorData, String>);
}

/// A read in progress.
type Reading = Pin<Box<dyn Future<Output = Result<TensorData, ExecutionError>> + Send>>;

/// The backends seen to leave a read pending after its first poll.
static ISSUE_WITHOUT_WAITING: Mutex<Vec<TypeId>> = Mutex::new(Vec::new());

fn issues_without_waiting<I: Backend>() -> bool {
    known().contains(&TypeId::of::<I>())
}

fn learn_issues_without_waiting<I: Backend>() {
    let mut known = known();
    if !known.contains(&TypeId::of::<I>()) {
        known.push(TypeId::of::<I>());
    }
}

fn known() -> std::sync::MutexGuard<'static, Vec<TypeId>> {
    ISSUE_WITHOUT_WAITING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts reading `tensor` (`bytes` of it) back to host memory for `target`, and returns without
/// waiting for it (unless the copies in flight are past their bound: see `copier`). The value
/// arrives on the copy thread; a target dropped by then gets nothing. `keeper`, a handle of the
/// same tensor, is dropped back on this thread once the read is done (see `copier`).
pub(super) fn start<I: Backend, T: Arrive>(
    tensor: Primitive<I>,
    keeper: Primitive<I>,
    bytes: usize,
    target: Weak<T>,
) {
    if issues_without_waiting::<I>() {
        counters::note_offload_issued_here();
        let first = poll_once(Box::pin(I::float_into_data(tensor)));
        copier::submit(bytes, move || {
            // A copy nobody reads any more (an abandoned graph) is not waited for.
            if let Some(target) = target.upgrade() {
                target.arrive(match first {
                    Polled::Ready(read) => read,
                    Polled::Pending(reading) => {
                        counters::note_device_read();
                        finish(reading)
                    }
                });
            }
            Box::new(keeper)
        });
    } else {
        // All of the read on the copy thread, in the training thread's stream (a read in the
        // copy thread's own stream raced the kernel that wrote the tensor on wgpu, cubecl 0.10).
        let stream = StreamId::current();
        copier::submit(bytes, move || {
            // A copy nobody reads any more (an abandoned graph) is not read.
            if let Some(target) = target.upgrade() {
                counters::note_device_read();
                let read =
                    stream.executes(|| match poll_once(Box::pin(I::float_into_data(tensor))) {
                        Polled::Ready(read) => read,
                        Polled::Pending(reading) => {
                            learn_issues_without_waiting::<I>();
                            finish(reading)
                        }
                    });
                target.arrive(read);
            }
            Box::new(keeper)
        });
    }
}

/// What a first poll gave: the value, or the read still in progress.
enum Polled {
    Ready(Result<TensorData, String>),
    Pending(Reading),
}

/// Polls a read once, without waiting for what it has not done yet.
fn poll_once(mut reading: Reading) -> Polled {
    let mut context = Context::from_waker(Waker::noop());
    match catch_unwind(AssertUnwindSafe(|| reading.as_mut().poll(&mut context))) {
        Ok(Poll::Ready(read)) => Polled::Ready(read.map_err(|error| format!("{error:?}"))),
        Ok(Poll::Pending) => Polled::Pending(reading),
        Err(panic) => Polled::Ready(Err(panic_reason(panic))),
    }
}

/// Waits for a read to finish.
fn finish(reading: Reading) -> Result<TensorData, String> {
    match catch_unwind(AssertUnwindSafe(|| try_read_sync(reading))) {
        Ok(Some(read)) => read.map_err(|error| format!("{error:?}")),
        Ok(None) => Err("the backend cannot read data back synchronously".into()),
        Err(panic) => Err(panic_reason(panic)),
    }
}

fn panic_reason(panic: Box<dyn std::any::Any + Send>) -> String {
    match burn_checkpoint_core::memory::panic_message(&*panic) {
        message if message.is_empty() => "the read panicked".into(),
        message => message,
    }
}
