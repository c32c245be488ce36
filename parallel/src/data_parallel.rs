//! `DataParallel`: the caller's handle on the workers, and the two-phase step.

use std::collections::HashSet;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use burn::collective::{AllReduceStrategy, PeerId, reset_collective};
use burn::module::AutodiffModule;
use burn::optim::LearningRate;
use burn::optim::Optimizer;
use burn::tensor::backend::AutodiffBackend;

use super::bucket::Layout;
use super::coordinator::{Asked, Gathered, Handle, Workers};
use super::nodes::Cluster;
use super::session::Session;
use super::worker::replies::{self, Reply};
use super::worker::{self, Command, EvalJob, Inner, Job, Setup};
use super::{DataParallelConfig, IntoLoss, ParallelError, Shard, StepStats};

/// Data-parallel training: one OS thread per device, each with a replica of the model and of
/// the optimizer; every step, each worker runs forward and backward on its shard of the batch,
/// the gradients are averaged with burn-collective's all-reduce (packed into a few flat
/// buckets), and every replica applies the same optimizer step, so the replicas stay equal.
///
/// With equal shards and a loss that is a mean over the shard, a step on N devices moves the
/// parameters as one step on the whole batch would. BatchNorm running statistics (and any float
/// tensor without a gradient) are synchronised too: each replica's change during the step is
/// averaged.
///
/// Works with any `AutodiffBackend`: plain `Autodiff<I>` or
/// [`Checkpointed<Autodiff<I>>`](https://docs.rs/burn-checkpoint) (regions run on each worker's
/// thread), NdArray (several workers on the one CPU device) or CUDA (one worker per GPU).
///
// The examples that build a `DataParallel` run as crates of their own (`standalone_crate`):
// rustdoc runs merged doctests as threads of one process, where a second `DataParallel` on
// NdArray is `ParallelError::Busy` (the paragraph below the example).
/// ```standalone_crate
/// use burn::backend::{Autodiff, NdArray};
/// use burn::nn::loss::{MseLoss, Reduction};
/// use burn::nn::{Linear, LinearConfig};
/// use burn::optim::SgdConfig;
/// use burn::prelude::*;
/// use burn_checkpoint_parallel::{DataParallel, split_batch};
/// use burn_checkpoint::{Checkpointed, checkpoint};
///
/// type B = Checkpointed<Autodiff<NdArray>>;
///
/// let devices = vec![Default::default(); 2]; // two workers on the CPU
/// let model: Linear<B> = LinearConfig::new(4, 1).init(&devices[0]);
/// let optimizer = SgdConfig::new().init();
/// let mut trainer = DataParallel::new(devices.clone(), model, optimizer, 0.1)?;
///
/// let x = Tensor::<B, 2>::ones([8, 4], &devices[0]);
/// let y = Tensor::<B, 2>::zeros([8, 1], &devices[0]);
/// for _ in 0..3 {
///     let shards: Vec<_> = split_batch(x.clone(), &devices)?
///         .into_iter()
///         .zip(split_batch(y.clone(), &devices)?)
///         .collect();
///     let loss = trainer.step(shards, |model: &Linear<B>, (x, y): (Tensor<B, 2>, Tensor<B, 2>)| {
///         let prediction = checkpoint(|| model.forward(x));
///         MseLoss::new().forward(prediction, y, Reduction::Mean).reshape([1])
///     })?;
///     assert!(loss.is_finite());
/// }
/// assert_eq!(trainer.last_stats().unwrap().all_reduce_calls, 1);
/// let model = trainer.into_model()?;
/// # let _ = model;
/// # Ok::<(), burn_checkpoint_parallel::ParallelError>(())
/// ```
///
/// Only one `DataParallel` per inner backend type may live in a process at a time
/// (burn-collective keeps one session per backend type); a second one gets
/// [`ParallelError::Busy`]. Dropping a `DataParallel` ends its threads and its collective
/// session.
pub struct DataParallel<B, M, O>
where
    B: AutodiffBackend,
    M: AutodiffModule<B> + 'static,
    O: Optimizer<M, B> + 'static,
{
    // Declared first so that it drops first: the threads end (and leave the collective) before
    // the session frees the backend type for another `DataParallel`.
    workers: Workers<B, M, O>,
    /// Several nodes: this node's link to the others (dropped after the workers, so that the
    /// others hear that this node left only once its workers have).
    cluster: Option<Cluster>,
    strategy: AllReduceStrategy,
    devices: Vec<B::Device>,
    layout: Layout,
    lr: LearningRate,
    stats: Option<StepStats>,
    poisoned: bool,
    /// Some device is listed twice: its workers share cubecl's autotuner (`run_user_code`).
    repeated_device: bool,
    /// With a repeated device, the shard shapes each phase has met.
    shapes_met: HashSet<(Phase, Vec<Vec<Vec<usize>>>)>,
    _session: Session,
}

/// The phases that run the user's code on every worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Step,
    Evaluate,
}

impl<B, M, O> DataParallel<B, M, O>
where
    B: AutodiffBackend,
    M: AutodiffModule<B> + 'static,
    M::InnerModule: 'static,
    O: Optimizer<M, B> + 'static,
{
    /// One worker per device with the default settings (tree all-reduce, 25 MiB buckets); see
    /// [`with_config`](Self::with_config).
    pub fn new(
        devices: Vec<B::Device>,
        model: M,
        optimizer: O,
        lr: LearningRate,
    ) -> Result<Self, ParallelError> {
        Self::with_config(devices, model, optimizer, lr, DataParallelConfig::new())
    }

    /// One worker per device (a device may repeat: several workers share the CPU). Each gets
    /// a replica of `model` with the same parameter values and `ParamId`s, and a clone of
    /// `optimizer`; `lr` is the learning rate until [`set_learning_rate`](Self::set_learning_rate).
    ///
    /// Returns once every worker has its replica and has joined the collective.
    pub fn with_config(
        devices: Vec<B::Device>,
        model: M,
        optimizer: O,
        lr: LearningRate,
        config: DataParallelConfig,
    ) -> Result<Self, ParallelError> {
        if devices.is_empty() {
            return Err(ParallelError::NoDevices);
        }
        let n = devices.len();
        let collective = config.collective_for(n)?;
        let session = Session::claim::<Inner<B>>()?;
        // Several nodes: meet the others first, to learn the devices over all of them (peer ids
        // follow the ranks: node r's first is the devices of the nodes before it).
        let cluster = match config.nodes() {
            Some(nodes) => Some(Cluster::join(nodes.clone(), n, config.timeout())?),
            None => None,
        };
        let (first_peer, padding, nodes) = match (&cluster, config.nodes()) {
            (Some(cluster), Some(nodes)) => (
                cluster.devices_before(nodes.rank()),
                n * nodes.count(),
                Some((cluster.watch(), cluster.total_devices())),
            ),
            _ => (0, n, None),
        };
        // Burn initialises parameters lazily, and a clone of an uninitialised parameter draws
        // its own values: the first `valid()` materialises every parameter of `model` once, and
        // each replica is rebuilt from a `valid()` copy of the same values. One `valid()` call
        // per replica, not clones of one: cloning an inner `Param` forgets that it requires a
        // gradient (Burn 0.21), and `from_inner` would then make every parameter a constant.
        let mut inners: Vec<Option<M::InnerModule>> = (0..n).map(|_| Some(model.valid())).collect();
        drop(model);

        let (reply_sender, replies) = mpsc::channel();
        let mut workers = Workers::new(replies);
        let copying = Arc::new(Mutex::new(()));
        for (i, device) in devices.iter().enumerate() {
            let (commands, receiver) = mpsc::channel();
            let setup = Setup {
                peer: PeerId((first_peer + i) as u32),
                device: device.clone(),
                inner: inners[i].take().expect("one copy per worker"),
                optimizer: optimizer.clone(),
                bucket_bytes: config.layout_bucket_bytes(),
                padding,
                timeout: config.timeout(),
                nodes: nodes.clone(),
                copying: copying.clone(),
            };
            let thread = worker::spawn(i, setup, receiver, reply_sender.clone())
                .map_err(|source| ParallelError::Spawn { worker: i, source })?;
            workers.push(Handle {
                commands: Some(commands),
                thread: Some(thread),
            });
        }
        drop(reply_sender);

        let all = vec![Asked::Reached; n];
        let layouts = workers
            .gather::<replies::Ready>(&all, || {})
            .into_values()?;
        let layout = layouts[0].clone();
        if let Some(worker) = layouts.iter().position(|l| *l != layout) {
            return Err(ParallelError::Layout { worker });
        }
        // Every worker is ready, so every one reaches `register`, which waits for all of them.
        // On several nodes each exchange is a session of its own (see `nodes`).
        if cluster.is_none() {
            let asked = workers.send(0..n, |_| Command::<B, M>::Register(collective.clone()));
            workers
                .gather::<replies::Registered>(&asked, || {})
                .into_values()?;
        }

        let repeated_device = (0..n).any(|i| devices[..i].contains(&devices[i]));
        Ok(DataParallel {
            workers,
            cluster,
            strategy: config.strategy(),
            devices,
            layout,
            lr,
            stats: None,
            poisoned: false,
            repeated_device,
            shapes_met: HashSet::new(),
            _session: session,
        })
    }

    /// One training step: worker `i` runs `loss(replica, shards[i])` and backward, the
    /// gradients are averaged over the workers, and every replica takes the optimizer step.
    /// Returns the mean of the workers' losses.
    ///
    /// `shards` holds one shard per device, all of the same shapes (see
    /// [`split_batch`](super::split_batch)); each is moved to its worker's device. The loss must
    /// hold one value, typically a mean over the shard.
    ///
    /// If a worker's loss function panics or returns an error, or its loss is not a single
    /// value, no gradient is exchanged or applied anywhere and the error names the worker: the
    /// replicas are as before, and the next step may go on. Shards of the wrong number or
    /// shapes are refused before any worker starts.
    pub fn step<S, F, L>(&mut self, shards: Vec<S>, loss: F) -> Result<f32, ParallelError>
    where
        S: Shard<B>,
        F: Fn(&M, S) -> L + Send + Sync + 'static,
        L: IntoLoss<B>,
    {
        self.check_usable()?;
        self.check_shards(&shards)?;
        let start = Instant::now();
        let n = self.workers.len();
        self.finish_callers_work()?;

        // Phase 1, no collective: forward, backward and packing on every worker.
        let shard_shapes: Vec<_> = shards.iter().map(|s| s.shapes()).collect();
        let loss = Arc::new(loss);
        let mut jobs: Vec<Option<Job<B, M>>> = shards
            .into_iter()
            .map(|shard| {
                let loss = Arc::clone(&loss);
                let job: Job<B, M> =
                    Box::new(move |model, device| loss(model, shard.to_device(device)).into_loss());
                Some(job)
            })
            .collect();
        let computed = self
            .run_user_code::<replies::Computed>(Phase::Step, shard_shapes, |i| {
                Command::Compute(jobs[i].take().expect("one job per worker"))
            })
            .into_values();
        let mut present = vec![false; self.layout.entries.len()];
        if let Ok(computed) = &computed {
            for c in computed {
                for (p, here) in present.iter_mut().zip(&c.present) {
                    *p |= *here;
                }
            }
        }
        // Several nodes: every node votes, so that a failure anywhere drops the step everywhere
        // before any gradient is exchanged.
        let vote = match &mut self.cluster {
            Some(cluster) => {
                let failure = computed.as_ref().err().map(|e| e.to_string());
                cluster
                    .vote(failure, present.clone())
                    .map(|all| present = all)
            }
            None => Ok(()),
        };
        let computed = match computed.and_then(|c| vote.map(|()| c)) {
            Ok(computed) => computed,
            Err(error) => {
                // Nobody has entered the collective: everyone drops this step.
                let asked = self.workers.send(0..n, |_| Command::Abort);
                let aborted = self.workers.gather::<replies::Aborted>(&asked, || {});
                if aborted.first_failure.is_some() {
                    self.poisoned = true;
                }
                return Err(error);
            }
        };

        // Several nodes: one burn-collective session per bucket, each opened only once every
        // node has left the one before.
        let exchange_start = Instant::now();
        for bucket in 0..self.layout.buckets.len() {
            if let Err(error) = self.exchange(bucket) {
                self.poisoned = true;
                if let Some(cluster) = &self.cluster {
                    cluster.abort(error.to_string());
                }
                return Err(error);
            }
        }
        let exchange = exchange_start.elapsed();

        // Phase 2: every worker is ready, so every one enters the all-reduce.
        let lr = self.lr;
        let asked = self.workers.send(0..n, |_| Command::Commit {
            lr,
            present: present.clone(),
        });
        let applied = self.workers.gather::<replies::Applied>(&asked, || {
            // Peers still inside an all-reduce wait for the failed one forever; resetting the
            // collective drops their pending calls, which then return an error.
            reset_collective::<Inner<B>>();
        });
        let applied = match applied.into_values() {
            Ok(applied) => applied,
            Err(error) => {
                self.poisoned = true;
                if let Some(cluster) = &self.cluster {
                    cluster.abort(error.to_string());
                }
                return Err(error);
            }
        };

        let stats = StepStats {
            all_reduce_calls: applied.iter().map(|a| a.calls).max().unwrap_or(0),
            all_reduce_bytes: self.layout.bytes(),
            all_reduce: exchange
                + applied
                    .iter()
                    .map(|a| a.all_reduce)
                    .max()
                    .unwrap_or_default(),
            compute: computed.iter().map(|c| c.time).max().unwrap_or_default(),
            update: applied.iter().map(|a| a.update).max().unwrap_or_default(),
            step: start.elapsed(),
        };
        self.stats = Some(stats);
        let mean = computed.iter().map(|c| f64::from(c.loss)).sum::<f64>() / n as f64;
        Ok(mean as f32)
    }

    /// Runs `f(replica.valid(), shards[i])` on every worker, without gradients, and returns the
    /// results in worker order: evaluation on all devices at once.
    ///
    /// Shards are of the inner backend (as `valid()` models take) and are moved to their
    /// worker's device; they need not be of equal shapes (the last batch of an epoch).
    pub fn evaluate<S, F, R>(&mut self, shards: Vec<S>, f: F) -> Result<Vec<R>, ParallelError>
    where
        S: Shard<B::InnerBackend>,
        F: Fn(&M::InnerModule, S) -> R + Send + Sync + 'static,
        R: Send + 'static,
    {
        self.check_usable()?;
        let n = self.workers.len();
        if shards.len() != n {
            return Err(ParallelError::ShardCount {
                expected: n,
                found: shards.len(),
            });
        }
        let shard_shapes: Vec<_> = shards.iter().map(|s| s.shapes()).collect();
        let f = Arc::new(f);
        let mut jobs: Vec<Option<EvalJob<B, M>>> = shards
            .into_iter()
            .map(|shard| {
                let f = Arc::clone(&f);
                let job: EvalJob<B, M> = Box::new(move |model, device| {
                    Box::new(f(model, shard.to_device(device))) as Box<dyn std::any::Any + Send>
                });
                Some(job)
            })
            .collect();
        let results = self
            .run_user_code::<replies::Evaluated>(Phase::Evaluate, shard_shapes, |i| {
                Command::Evaluate(jobs[i].take().expect("one job per worker"))
            })
            .into_values()?;
        Ok(results
            .into_iter()
            .map(|r| {
                *r.downcast::<R>()
                    .expect("an evaluation returns its closure's type")
            })
            .collect())
    }

    /// A copy of the model as trained so far (worker 0's replica; all are equal), independent
    /// of the workers: for validation, or to save the weights.
    pub fn model(&mut self) -> Result<M, ParallelError> {
        self.snapshot().map(|(model, _)| model)
    }

    /// Copies of the model and of the optimizer (with its state: momentum, Adam's moments) as
    /// trained so far, independent of the workers: what a checkpoint from which training
    /// resumes exactly must hold. Worker 0's; every worker's are equal.
    ///
    /// ```standalone_crate
    /// # use burn::backend::{Autodiff, NdArray};
    /// # use burn::module::Module;
    /// # use burn::optim::{Optimizer, SgdConfig};
    /// # use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
    /// # use burn_checkpoint_parallel::DataParallel;
    /// # type B = Autodiff<NdArray>;
    /// let device = Default::default();
    /// let model = burn::nn::LinearConfig::new(4, 2).init::<B>(&device);
    /// let mut trainer = DataParallel::new(vec![device; 2], model, SgdConfig::new().init(), 0.1)?;
    /// let (model, optimizer) = trainer.snapshot()?;
    /// let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    /// let weights = recorder.record(model.into_record(), ()).unwrap();
    /// let state = recorder.record(optimizer.to_record(), ()).unwrap();
    /// # let _ = (weights, state);
    /// # Ok::<(), burn_checkpoint_parallel::ParallelError>(())
    /// ```
    pub fn snapshot(&mut self) -> Result<(M, O), ParallelError> {
        self.check_usable()?;
        let asked = self.workers.send([0], |_| Command::<B, M>::Snapshot);
        let mut models = self
            .workers
            .gather::<replies::Snapshot>(&asked, || {})
            .into_values()?;
        Ok(models.remove(0))
    }

    /// Ends the workers and returns the trained model (worker 0's replica).
    pub fn into_model(self) -> Result<M, ParallelError> {
        self.into_parts().map(|(model, _)| model)
    }

    /// Ends the workers and returns the trained model and worker 0's optimizer (whose state,
    /// like the model, is the same on every worker).
    pub fn into_parts(mut self) -> Result<(M, O), ParallelError> {
        if self.poisoned {
            return Err(ParallelError::Poisoned);
        }
        let mut parts = self.workers.shutdown();
        parts
            .get_mut(0)
            .and_then(Option::take)
            .ok_or(ParallelError::WorkerLost { worker: 0 })
    }

    /// The learning rate of the next steps.
    pub fn learning_rate(&self) -> LearningRate {
        self.lr
    }

    /// Sets the learning rate of the next steps (for a schedule: call it before each step).
    pub fn set_learning_rate(&mut self, lr: LearningRate) {
        self.lr = lr;
    }

    /// The devices, one per worker.
    pub fn devices(&self) -> &[B::Device] {
        &self.devices
    }

    /// All-reduce calls each step makes: the number of buckets.
    pub fn all_reduce_calls_per_step(&self) -> usize {
        self.layout.buckets.len()
    }

    /// Timings and counts of the last successful step.
    pub fn last_stats(&self) -> Option<StepStats> {
        self.stats
    }

    /// Whether an earlier failure left the replicas possibly unequal (every call then fails
    /// with [`ParallelError::Poisoned`]).
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Several nodes: bucket `bucket`'s session on every worker (nothing on one machine).
    fn exchange(&mut self, bucket: usize) -> Result<(), ParallelError> {
        let n = self.workers.len();
        let Some(cluster) = &mut self.cluster else {
            return Ok(());
        };
        cluster.before_session()?;
        let config = cluster.session_config(n, self.strategy);
        let asked = self.workers.send(0..n, |_| Command::Exchange {
            bucket,
            config: config.clone(),
        });
        let exchanged = self.workers.gather::<replies::Exchanged>(&asked, || {
            reset_collective::<Inner<B>>();
        });
        match exchanged.into_values() {
            Ok(_) => cluster.after_session(),
            Err(ParallelError::Timeout { during, waited, .. }) => Err(ParallelError::Timeout {
                during,
                waited,
                waiting_for: cluster.in_session(),
            }),
            Err(error) => Err(error),
        }
    }

    /// Sends every worker `command(i)` (a phase that runs the user's code) and gathers the
    /// reports: all together, or one at a time when a device is listed twice and `phase` meets
    /// these shard shapes for the first time. cubecl tunes a kernel the first time a device
    /// meets its shapes, with one tuner per device: a worker asking for a kernel that another
    /// worker on its device is tuning is not made to wait, it runs the first candidate instead
    /// of the fastest (cubecl-runtime 0.10, `LocalTuner::execute`, `Pending`). Another kernel
    /// sums in another order, and that run differs from the next.
    fn run_user_code<R: Reply<M, O>>(
        &mut self,
        phase: Phase,
        shard_shapes: Vec<Vec<Vec<usize>>>,
        command: impl FnMut(usize) -> Command<B, M>,
    ) -> Gathered<R::Value> {
        if self.repeated_device && self.shapes_met.insert((phase, shard_shapes)) {
            self.workers.in_turn::<R>(command)
        } else {
            let asked = self.workers.send(0..self.workers.len(), command);
            self.workers.gather::<R>(&asked, || {})
        }
    }

    /// Waits for the work this thread queued on each device: a [`snapshot`](Self::snapshot)'s
    /// or [`model`](Self::model)'s reads of a replica's buffers end before a worker may write
    /// one in place (owned.rs).
    fn finish_callers_work(&self) -> Result<(), ParallelError> {
        for (i, device) in self.devices.iter().enumerate() {
            if !self.devices[..i].contains(device) {
                B::sync(device).map_err(|e| ParallelError::Failed {
                    worker: i,
                    source: format!("the device failed before the step: {e:?}").into(),
                })?;
            }
        }
        Ok(())
    }

    fn check_usable(&self) -> Result<(), ParallelError> {
        if self.poisoned {
            Err(ParallelError::Poisoned)
        } else {
            Ok(())
        }
    }

    fn check_shards<S: Shard<B>>(&self, shards: &[S]) -> Result<(), ParallelError> {
        let n = self.workers.len();
        if shards.len() != n {
            return Err(ParallelError::ShardCount {
                expected: n,
                found: shards.len(),
            });
        }
        let expected = shards[0].shapes();
        for (worker, shard) in shards.iter().enumerate().skip(1) {
            let found = shard.shapes();
            if found != expected {
                return Err(ParallelError::ShardShapes {
                    worker,
                    expected,
                    found,
                });
            }
        }
        Ok(())
    }
}

impl<B, M, O> std::fmt::Debug for DataParallel<B, M, O>
where
    B: AutodiffBackend,
    M: AutodiffModule<B> + 'static,
    O: Optimizer<M, B> + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataParallel")
            .field("workers", &self.workers.len())
            .field("buckets", &self.layout.buckets.len())
            .field("lr", &self.lr)
            .field("poisoned", &self.poisoned)
            .finish()
    }
}
