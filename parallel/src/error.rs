//! What can go wrong in data-parallel training, as one error type for the caller.

use std::time::Duration;

use burn::collective::CollectiveError;

/// An error a user's loss function or evaluation returned (see [`IntoLoss`](super::IntoLoss)).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a [`DataParallel`](super::DataParallel) call failed.
///
/// Errors about the input ([`ShardCount`](Self::ShardCount), [`ShardShapes`](Self::ShardShapes))
/// are found before any worker starts, so nothing changed. A worker that fails while computing
/// its gradients ([`Panicked`](Self::Panicked), [`Failed`](Self::Failed),
/// [`LossNotScalar`](Self::LossNotScalar)) stops the step on every worker before any gradient is
/// exchanged: the replicas stay as they were and the next step may go on. A failure while
/// gradients are exchanged or applied leaves the replicas possibly different, and every later
/// call answers [`Poisoned`](Self::Poisoned).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParallelError {
    /// `DataParallel` was given no device.
    #[error("data parallelism needs at least one device")]
    NoDevices,

    /// The configuration cannot work (a tree strategy of arity 0, say).
    #[error("invalid data-parallel configuration: {0}")]
    InvalidConfig(String),

    /// Another `DataParallel` on the same inner backend type is alive in this process.
    /// burn-collective runs one collective session per backend type, so two at once would mix
    /// their all-reduces.
    #[error(
        "another DataParallel on backend `{backend}` is alive in this process; burn-collective \
         keeps one session per backend type: drop the other one first"
    )]
    Busy {
        /// The inner backend's type name.
        backend: &'static str,
    },

    /// A worker thread could not be started.
    #[error("cannot start worker thread {worker}: {source}")]
    Spawn {
        /// The worker's index.
        worker: usize,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },

    /// The call gave a number of shards other than the number of devices.
    #[error("expected one shard per device ({expected}), got {found}")]
    ShardCount {
        /// The number of devices.
        expected: usize,
        /// The number of shards given.
        found: usize,
    },

    /// A shard's tensors do not have the shapes of the first shard's. Shards must be equal so
    /// that averaging the workers' mean losses gives the mean over the whole batch.
    #[error("shard {worker} has shapes {found:?}, shard 0 has {expected:?}; shards must be equal")]
    ShardShapes {
        /// The index of the first shard that differs.
        worker: usize,
        /// Shard 0's shapes.
        expected: Vec<Vec<usize>>,
        /// The differing shard's shapes.
        found: Vec<Vec<usize>>,
    },

    /// A batch cannot be split into equal shards.
    #[error("cannot split {len} rows into {parts} equal shards")]
    Split {
        /// The size of dimension 0.
        len: usize,
        /// The number of shards asked for.
        parts: usize,
    },

    /// A worker panicked (in the loss function, the model's forward or backward, or the
    /// optimizer).
    #[error("worker {worker} panicked: {message}")]
    Panicked {
        /// The worker's index.
        worker: usize,
        /// The panic's message.
        message: String,
    },

    /// A worker's loss function returned an error.
    #[error("worker {worker} failed: {source}")]
    Failed {
        /// The worker's index.
        worker: usize,
        /// The error the loss function returned.
        #[source]
        source: BoxError,
    },

    /// A loss function returned a tensor of more than one value.
    #[error("worker {worker}'s loss has shape {shape:?}; a loss must hold exactly one value")]
    LossNotScalar {
        /// The worker's index.
        worker: usize,
        /// The loss tensor's shape.
        shape: Vec<usize>,
    },

    /// burn-collective reported an error.
    #[error("worker {worker}: collective operation failed: {error:?}")]
    Collective {
        /// The worker's index.
        worker: usize,
        /// burn-collective's error.
        error: CollectiveError,
    },

    /// The replicas do not have the same parameters (shapes, ids or kinds): the model's
    /// structure depends on something other than its record.
    #[error("worker {worker}'s replica has other parameters than worker 0's")]
    Layout {
        /// The worker's index.
        worker: usize,
    },

    /// A worker thread ended without answering.
    #[error("worker {worker} ended unexpectedly")]
    WorkerLost {
        /// The worker's index.
        worker: usize,
    },

    /// A collective operation, or a wait for the other nodes, did not complete within the time
    /// limit ([`DataParallelConfig::with_timeout`](super::DataParallelConfig::with_timeout)).
    /// Every worker stops; on several nodes the others are told to stop too.
    #[error("timed out after {waited:?} in {during}, waiting for {waiting_for}")]
    Timeout {
        /// What was under way.
        during: String,
        /// How long it waited.
        waited: Duration,
        /// Who it waited for: the nodes that had not got past that point, by rank and address.
        waiting_for: String,
    },

    /// A node of a multi-node run is gone: its process ended, its connection broke, or it
    /// stopped on an error of its own (given in `why`). Every node stops.
    #[error("{node} is gone: {why}")]
    NodeLost {
        /// The node, by rank and address.
        node: String,
        /// What the rendezvous saw.
        why: String,
    },

    /// Another node's workers could not compute their gradients this step (its loss function
    /// failed or panicked): no gradient was exchanged on any node, every replica is as before
    /// the step, and the next step may go on.
    #[error("{node} failed this step, so every node dropped it: {message}")]
    NodeFailed {
        /// The node, by rank and address.
        node: String,
        /// Its error.
        message: String,
    },

    /// The nodes' rendezvous (beside the orchestrator) could not be reached, or refused this
    /// node (a rank taken twice, node counts that differ).
    #[error("the rendezvous at {address}: {why}")]
    Rendezvous {
        /// Where it was looked for: the orchestrator's host, its port + 1.
        address: String,
        /// What went wrong.
        why: String,
    },

    /// An earlier step failed while gradients were being exchanged or applied, so the replicas
    /// may no longer be equal. Rebuild the `DataParallel` from a saved model.
    #[error(
        "an earlier step failed after gradients started to be exchanged; the replicas may \
         differ, so this DataParallel refuses further work"
    )]
    Poisoned,
}
