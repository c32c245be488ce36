//! One worker: a thread that owns a replica of the model and its optimizer on one device and
//! answers the coordinator's commands, one report per command.
//!
//! Every command runs under `catch_unwind`, so a panic in the user's loss function, the model or
//! the optimizer comes back as a report instead of killing the thread. The one collective
//! exchange (`Commit`) is only ever sent once every worker has reported its gradients ready, so
//! either every worker enters burn-collective's all-reduce or none does: a peer never waits
//! for one that is gone. burn-collective's calls block without a limit, so a worker makes them
//! on a thread of its own and stops waiting after the configured time, or as soon as the
//! rendezvous says that a node is gone ([`Caller`]).

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use burn::collective::{
    CollectiveConfig, CollectiveError, PeerId, ReduceOperation, all_reduce, finish_collective,
    register,
};
use burn::module::AutodiffModule;
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Device, ElementConversion, Tensor, TensorPrimitive};
use burn_checkpoint_core::memory::panic_message;

use super::bucket::Layout;
use super::error::BoxError;
use super::owned;
use super::rendezvous::{Broken, Watch};
use super::visit;

/// The backend the collective works on: Autodiff's inner backend, whose tensors carry no graph.
pub(crate) type Inner<B> = <B as AutodiffBackend>::InnerBackend;

/// A worker's part of a step: its shard, already captured, and the loss function.
pub(crate) type Job<B, M> =
    Box<dyn FnOnce(&M, &Device<B>) -> Result<Tensor<B, 1>, BoxError> + Send + 'static>;

/// A worker's part of an evaluation, run on the replica's `valid()` copy.
pub(crate) type EvalJob<B, M> = Box<
    dyn FnOnce(&<M as AutodiffModule<B>>::InnerModule, &Device<B>) -> Box<dyn Any + Send>
        + Send
        + 'static,
>;

/// What the coordinator asks of a worker.
pub(crate) enum Command<B: AutodiffBackend, M: AutodiffModule<B>> {
    /// Join the collective (blocks until every worker has joined).
    Register(CollectiveConfig),
    /// Forward and backward on this worker's shard, then pack the gradients; no collective.
    Compute(Job<B, M>),
    /// Several nodes: one burn-collective session (register, sum bucket `bucket` over every
    /// device of every node, leave) with these settings.
    Exchange {
        bucket: usize,
        config: CollectiveConfig,
    },
    /// Every worker computed (and, on several nodes, exchanged): all-reduce the buckets on this
    /// machine (unless exchanged) and apply the optimizer step.
    Commit {
        lr: f64,
        /// Which trainable entries had a gradient on some worker.
        present: Vec<bool>,
    },
    /// Some worker failed to compute: drop this step's gradients, undo buffer updates.
    Abort,
    /// Run an evaluation closure on the replica.
    Evaluate(EvalJob<B, M>),
    /// Send back an independent copy of the replica.
    Snapshot,
}

/// Why a worker could not do what it was asked.
#[derive(Debug)]
pub(crate) enum Failure {
    Panicked(String),
    Failed(BoxError),
    LossNotScalar(Vec<usize>),
    Collective(CollectiveError),
    /// A collective call did not return within the time limit.
    Timeout {
        during: &'static str,
        waited: Duration,
    },
    /// The rendezvous says a node is gone while a collective call waited.
    NodeLost {
        broken: Broken,
    },
    /// The replica was lost to an earlier failure (a panic inside the optimizer step).
    NoModel,
}

/// A worker's gradients are ready.
pub(crate) struct Computed {
    pub loss: f32,
    pub present: Vec<bool>,
    pub time: Duration,
}

/// A worker applied the averaged gradients.
pub(crate) struct Applied {
    pub calls: usize,
    pub all_reduce: Duration,
    pub update: Duration,
}

/// A worker's answer, one per command, plus `Exited` when its thread ends.
pub(crate) enum Report<M, O> {
    Ready(Result<Layout, Failure>),
    Registered(Result<(), Failure>),
    Computed(Result<Computed, Failure>),
    Exchanged(Result<Duration, Failure>),
    Applied(Result<Applied, Failure>),
    Aborted(Result<(), Failure>),
    Evaluated(Result<Box<dyn Any + Send>, Failure>),
    Snapshot(Result<(M, O), Failure>),
    Exited,
}

/// The kinds of [`Report`] the coordinator waits for, one marker type each, so that
/// `Workers::gather::<replies::Computed>` takes the expected variant and its value is typed.
pub(crate) mod replies {
    use std::any::Any;

    use super::{Failure, Layout, Report};

    /// A kind of report and the value it carries.
    pub(crate) trait Reply<M, O> {
        type Value;
        /// The report's value if it is of this kind.
        fn take(report: Report<M, O>) -> Option<Result<Self::Value, Failure>>;
    }

    macro_rules! replies {
        ($($(#[$doc:meta])* $kind:ident => $value:ty,)*) => {$(
            $(#[$doc])*
            pub(crate) struct $kind;

            impl<M, O> Reply<M, O> for $kind {
                type Value = $value;
                fn take(report: Report<M, O>) -> Option<Result<$value, Failure>> {
                    match report {
                        Report::$kind(value) => Some(value),
                        _ => None,
                    }
                }
            }
        )*};
    }

    replies! {
        /// The worker has its replica: its gradient layout.
        Ready => Layout,
        /// The worker joined the collective.
        Registered => (),
        /// Forward, backward and packing done.
        Computed => super::Computed,
        /// One bucket summed over the nodes: the time it took.
        Exchanged => std::time::Duration,
        /// Gradients exchanged and the optimizer step applied.
        Applied => super::Applied,
        /// The step dropped.
        Aborted => (),
        /// An evaluation's output.
        Evaluated => Box<dyn Any + Send>,
        /// A copy of the replica and optimizer.
        Snapshot => (M, O),
    }
}

/// What a worker thread starts from.
pub(crate) struct Setup<B: AutodiffBackend, M: AutodiffModule<B>, O> {
    pub peer: PeerId,
    pub device: B::Device,
    pub inner: M::InnerModule,
    pub optimizer: O,
    pub bucket_bytes: usize,
    /// Buckets are padded to a multiple of this (the devices of a session).
    pub padding: usize,
    /// The time limit of each collective call.
    pub timeout: Duration,
    /// Several nodes: the rendezvous's news, and the devices over every node.
    pub nodes: Option<(Arc<Watch>, usize)>,
    /// Held by the worker copying its replica (one of a `DataParallel`'s workers at a time).
    pub copying: Arc<Mutex<()>>,
}

/// Starts worker `index`; it reports `Ready` (or why not), then serves commands until its
/// command channel closes, and returns its replica and optimizer.
pub(crate) fn spawn<B, M, O>(
    index: usize,
    setup: Setup<B, M, O>,
    commands: Receiver<Command<B, M>>,
    replies: Sender<(usize, Report<M, O>)>,
) -> std::io::Result<JoinHandle<Option<(M, O)>>>
where
    B: AutodiffBackend,
    M: AutodiffModule<B> + 'static,
    M::InnerModule: 'static,
    O: Optimizer<M, B> + 'static,
{
    std::thread::Builder::new()
        .name(format!("data-parallel-{index}"))
        .spawn(move || {
            // Sent however the thread ends, so the coordinator never waits for a dead worker.
            let _notice = ExitNotice {
                index,
                replies: replies.clone(),
            };
            let mut worker = match catch(|| Ok(Worker::new(setup))) {
                Ok(worker) => {
                    let _ = replies.send((index, Report::Ready(Ok(worker.layout.clone()))));
                    worker
                }
                Err(failure) => {
                    let _ = replies.send((index, Report::Ready(Err(failure))));
                    return None;
                }
            };
            while let Ok(command) = commands.recv() {
                let report = worker.handle(command);
                if replies.send((index, report)).is_err() {
                    break;
                }
            }
            worker.finish()
        })
}

/// Tells the coordinator that this worker's thread has ended, when dropped.
struct ExitNotice<M, O> {
    index: usize,
    replies: Sender<(usize, Report<M, O>)>,
}

impl<M, O> Drop for ExitNotice<M, O> {
    fn drop(&mut self) {
        let _ = self.replies.send((self.index, Report::Exited));
    }
}

/// Runs `f`, turning a panic into a [`Failure`].
fn catch<T>(f: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let message = match panic_message(&*payload) {
            message if message.is_empty() => "a panic without a message".into(),
            message => message,
        };
        Err(Failure::Panicked(message))
    })
}

fn sync<B: Backend>(device: &B::Device) -> Result<(), Failure> {
    B::sync(device).map_err(|e| Failure::Failed(format!("the device failed: {e:?}").into()))
}

struct Worker<B: AutodiffBackend, M, O> {
    peer: PeerId,
    device: B::Device,
    /// `None` only after a panic inside the optimizer step took it.
    model: Option<M>,
    optimizer: O,
    layout: Layout,
    /// Each buffer's value at the start of the step (the same on every worker); `None` for
    /// trainable entries.
    starts: Vec<Option<Tensor<Inner<B>, 1>>>,
    /// This step's packed buckets, between `Compute` and `Commit`.
    pending: Option<Vec<Tensor<Inner<B>, 1>>>,
    /// Several nodes: the buckets summed so far this step, in order.
    exchanged: Vec<Tensor<Inner<B>, 1>>,
    /// Devices over every node, on several nodes.
    total_devices: Option<usize>,
    caller: Caller,
    registered: bool,
}

impl<B, M, O> Worker<B, M, O>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: Optimizer<M, B>,
{
    fn new(setup: Setup<B, M, O>) -> Self {
        // `from_inner` gives the replica its own running statistics (a clone would share
        // BatchNorm's `RunningState` with the other replicas) with the same `ParamId`s.
        // Buffers of its own (owned.rs): the clones the workers start from share every buffer.
        //
        // One worker at a time: every worker reads the tensors all of them share, and burn-fusion
        // (0.21) lets go of a tensor before its read is queued (`FusionTensor::into_data`): a
        // second thread's read then finds itself the last holder, reads with the right to free
        // the buffer, and the first thread's read panics ("Should have handle for tensor").
        let (model, optimizer) = {
            let _turn = setup.copying.lock().unwrap_or_else(PoisonError::into_inner);
            let model = M::from_inner(setup.inner).fork(&setup.device);
            (
                owned::module(model, &setup.device),
                owned::optimizer::<B, M, O>(setup.optimizer, &setup.device),
            )
        };
        let layout = Layout::new(visit::entries(&model), setup.bucket_bytes, setup.padding);
        let starts = visit::buffers(&layout, &model.valid());
        let (watch, total_devices) = match setup.nodes {
            Some((watch, total)) => (Some(watch), Some(total)),
            None => (None, None),
        };
        Worker {
            peer: setup.peer,
            device: setup.device,
            model: Some(model),
            optimizer,
            layout,
            starts,
            pending: None,
            exchanged: Vec::new(),
            total_devices,
            caller: Caller::new(setup.timeout, watch),
            registered: false,
        }
    }

    fn handle(&mut self, command: Command<B, M>) -> Report<M, O> {
        match command {
            Command::Register(config) => Report::Registered(catch(|| self.register(config))),
            Command::Compute(job) => Report::Computed(catch(|| self.compute(job))),
            Command::Exchange { bucket, config } => {
                Report::Exchanged(catch(|| self.exchange(bucket, config)))
            }
            Command::Commit { lr, present } => Report::Applied(catch(|| self.apply(lr, &present))),
            Command::Abort => Report::Aborted(catch(|| self.abort())),
            Command::Evaluate(job) => Report::Evaluated(catch(|| self.evaluate(job))),
            Command::Snapshot => Report::Snapshot(catch(|| self.snapshot())),
        }
    }

    fn register(&mut self, config: CollectiveConfig) -> Result<(), Failure> {
        let (peer, device) = (self.peer, self.device.clone());
        self.caller.call("registration", move || {
            register::<Inner<B>>(peer, device, config)
        })?;
        self.registered = true;
        Ok(())
    }

    /// One session: register, sum bucket `index` over every device of every node, leave.
    fn exchange(&mut self, index: usize, config: CollectiveConfig) -> Result<Duration, Failure> {
        let start = Instant::now();
        let bucket = self
            .pending
            .as_ref()
            .and_then(|buckets| buckets.get(index))
            .expect("the coordinator exchanges only computed buckets")
            .clone();
        if index == 0 {
            self.exchanged.clear();
        }
        self.register(config)?;
        let peer = self.peer;
        let tensor = bucket.into_primitive().tensor();
        let sum = self.caller.call("all-reduce", move || {
            all_reduce::<Inner<B>>(peer, tensor, ReduceOperation::Sum)
        })?;
        self.leave()?;
        self.exchanged
            .push(Tensor::from_primitive(TensorPrimitive::Float(sum)));
        sync::<Inner<B>>(&self.device)?;
        Ok(start.elapsed())
    }

    fn leave(&mut self) -> Result<(), Failure> {
        let peer = self.peer;
        self.caller.call("leaving the session", move || {
            finish_collective::<Inner<B>>(peer)
        })?;
        self.registered = false;
        Ok(())
    }

    fn compute(&mut self, job: Job<B, M>) -> Result<Computed, Failure> {
        let start = Instant::now();
        self.pending = None;
        let model = self.model.as_ref().ok_or(Failure::NoModel)?;
        let loss = job(model, &self.device).map_err(Failure::Failed)?;
        let shape = loss.dims();
        if shape != [1] {
            return Err(Failure::LossNotScalar(shape.to_vec()));
        }
        let loss_value = loss.clone().into_scalar().elem::<f32>();
        let mut grads = GradientsParams::from_grads(loss.backward(), model);
        // `valid()` merges the running statistics this forward updated (Burn applies a
        // `RunningState` update lazily), so the buffers read next are current.
        let inner = model.valid();
        let (flat, present) =
            visit::flatten(&self.layout, &inner, &mut grads, &self.starts, &self.device);
        let buckets = self.layout.fill(flat, &self.device);
        // On a lazy backend the work above is only queued: finish it here so that `time` is
        // the compute and the exchange's time is the exchange.
        sync::<Inner<B>>(&self.device)?;
        self.pending = Some(buckets);
        Ok(Computed {
            loss: loss_value,
            present,
            time: start.elapsed(),
        })
    }

    fn apply(&mut self, lr: f64, present: &[bool]) -> Result<Applied, Failure> {
        let buckets = self
            .pending
            .take()
            .expect("the coordinator commits only after every worker computed");
        let start = Instant::now();
        let calls = buckets.len();
        // Several nodes: burn-collective hands the peers on one device one buffer for a sum.
        // Held until the device is synchronised below, it is never unshared, so no worker
        // divides it in place while another's read of it is queued (owned.rs).
        let sums = std::mem::take(&mut self.exchanged);
        let reduced = match self.total_devices {
            Some(total) => {
                assert_eq!(
                    sums.len(),
                    calls,
                    "every bucket exchanged before the commit"
                );
                sums.iter()
                    .map(|sum| sum.clone().div_scalar(total as f64))
                    .collect()
            }
            None => {
                let mut reduced = Vec::with_capacity(calls);
                for bucket in buckets {
                    let peer = self.peer;
                    let tensor = bucket.into_primitive().tensor();
                    let mean = self.caller.call("all-reduce", move || {
                        all_reduce::<Inner<B>>(peer, tensor, ReduceOperation::Mean)
                    })?;
                    reduced.push(Tensor::from_primitive(TensorPrimitive::Float(mean)));
                }
                reduced
            }
        };
        sync::<Inner<B>>(&self.device)?;
        drop(sums);
        let all_reduce = start.elapsed();

        let start = Instant::now();
        let flat = self.layout.split(reduced);
        let model = self.model.take().ok_or(Failure::NoModel)?;
        let grads = visit::gradients(&self.layout, &model, &flat, present);
        let mut model = self.optimizer.step(lr, model, grads);
        if self.layout.has_buffers() {
            // Every worker adds the same averaged change to the same start, so buffers stay
            // bitwise equal; a buffer nobody changed (a frozen parameter) gets + 0 exactly.
            let values: Vec<_> = self
                .starts
                .iter()
                .zip(&flat)
                .map(|(start, change)| start.clone().map(|s| s + change.clone()))
                .collect();
            model = visit::write_buffers(&self.layout, model, &values);
            self.starts = values;
        }
        sync::<Inner<B>>(&self.device)?;
        self.model = Some(model);
        Ok(Applied {
            calls,
            all_reduce,
            update: start.elapsed(),
        })
    }

    fn abort(&mut self) -> Result<(), Failure> {
        self.pending = None;
        self.exchanged.clear();
        if self.layout.has_buffers()
            && let Some(model) = self.model.take()
        {
            // The forward may have updated running statistics: merge those updates, then put
            // the step's starting values back so that every replica is as before the step.
            let _ = model.valid();
            self.model = Some(visit::write_buffers(&self.layout, model, &self.starts));
        }
        Ok(())
    }

    fn evaluate(&mut self, job: EvalJob<B, M>) -> Result<Box<dyn Any + Send>, Failure> {
        let model = self.model.as_ref().ok_or(Failure::NoModel)?;
        Ok(job(&model.valid(), &self.device))
    }

    fn snapshot(&mut self) -> Result<(M, O), Failure> {
        let model = self.model.as_ref().ok_or(Failure::NoModel)?;
        // Through `valid()` and back: a copy whose running statistics are not shared with
        // this replica, so the caller's forward passes cannot change the worker's state.
        // The optimizer's state is immutable tensors: a clone is an independent copy.
        Ok((M::from_inner(model.valid()), self.optimizer.clone()))
    }

    /// Leaves the collective and gives back the replica and optimizer.
    fn finish(mut self) -> Option<(M, O)> {
        if self.registered
            && !self.caller.stuck
            && let Err(error) = self.leave()
        {
            // After a failed exchange the coordinator resets the collective, which forgets
            // every peer: leaving it then is expected to fail.
            log::debug!("peer {} leaving the collective: {error:?}", self.peer);
        }
        self.model.map(|model| (model, self.optimizer))
    }
}

/// A call for the caller thread.
type Call = Box<dyn FnOnce() + Send>;

/// Makes burn-collective's blocking calls on a thread of its own and waits for each at most the
/// time limit, or until the rendezvous says a node is gone. A call that does not return leaves
/// that thread blocked for good (burn-collective's server is then stuck too): the worker makes
/// no more calls, and the `DataParallel` is poisoned.
struct Caller {
    calls: Option<Sender<Call>>,
    timeout: Duration,
    watch: Option<Arc<Watch>>,
    /// A call did not return.
    stuck: bool,
}

impl Caller {
    fn new(timeout: Duration, watch: Option<Arc<Watch>>) -> Self {
        Caller {
            calls: None,
            timeout,
            watch,
            stuck: false,
        }
    }

    fn call<T: Send + 'static>(
        &mut self,
        during: &'static str,
        f: impl FnOnce() -> Result<T, CollectiveError> + Send + 'static,
    ) -> Result<T, Failure> {
        if self.stuck {
            return Err(Failure::Failed(
                "an earlier collective call never returned; this worker makes no more".into(),
            ));
        }
        let calls = match &self.calls {
            Some(calls) => calls,
            None => {
                let (sender, receiver) = mpsc::channel::<Call>();
                std::thread::Builder::new()
                    .name("collective-call".into())
                    .spawn(move || {
                        while let Ok(call) = receiver.recv() {
                            call();
                        }
                    })
                    .map_err(|e| Failure::Failed(e.into()))?;
                self.calls.insert(sender)
            }
        };
        let (result, answer) = mpsc::channel();
        let call: Call = Box::new(move || {
            let _ = result.send(catch_unwind(AssertUnwindSafe(f)));
        });
        calls
            .send(call)
            .map_err(|_| Failure::Failed("the collective-call thread is gone".into()))?;
        let start = Instant::now();
        // Short slices: a lost node is noticed within one, not at the end of the limit.
        let slice = Duration::from_millis(50);
        loop {
            let left = self.timeout.saturating_sub(start.elapsed());
            match answer.recv_timeout(left.min(slice)) {
                Ok(Ok(result)) => return result.map_err(Failure::Collective),
                Ok(Err(_)) => {
                    return Err(Failure::Failed(
                        format!("burn-collective panicked during the {during}").into(),
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Failure::Failed("the collective-call thread is gone".into()));
                }
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(broken) = self.watch.as_ref().and_then(|w| w.broken()) {
                        self.stuck = true;
                        return Err(Failure::NodeLost { broken });
                    }
                    if left.is_zero() {
                        self.stuck = true;
                        return Err(Failure::Timeout {
                            during,
                            waited: self.timeout,
                        });
                    }
                }
            }
        }
    }
}
