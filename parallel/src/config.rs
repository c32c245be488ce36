//! How gradients are exchanged: all-reduce strategy, bucket size, time limit, several nodes.

use std::time::Duration;

use burn::collective::{AllReduceStrategy, CollectiveConfig};

use super::ParallelError;
use super::nodes::{DEFAULT_TIMEOUT, Nodes};

/// The default bucket size, PyTorch DDP's: 25 MiB.
pub const DEFAULT_BUCKET_BYTES: usize = 25 * 1024 * 1024;

/// Settings of a [`DataParallel`](super::DataParallel).
///
/// ```
/// use burn_checkpoint_parallel::{AllReduceStrategy, DataParallelConfig};
///
/// let config = DataParallelConfig::new()
///     .with_strategy(AllReduceStrategy::Ring)
///     .with_bucket_bytes(4 * 1024 * 1024);
/// assert_eq!(config.bucket_bytes(), 4 * 1024 * 1024);
/// ```
#[derive(Debug, Clone)]
pub struct DataParallelConfig {
    strategy: AllReduceStrategy,
    bucket_bytes: usize,
    nodes: Option<Nodes>,
    timeout: Duration,
}

impl Default for DataParallelConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl DataParallelConfig {
    /// Tree all-reduce of arity 2 (burn-collective's default), 25 MiB buckets, one machine,
    /// a [5-minute](DEFAULT_TIMEOUT) limit on collective operations.
    pub fn new() -> Self {
        DataParallelConfig {
            strategy: AllReduceStrategy::Tree(2),
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            nodes: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The all-reduce algorithm between this machine's devices: centralized, tree or ring. All
    /// give the same sums up to the order of additions.
    pub fn with_strategy(mut self, strategy: AllReduceStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// The most bytes of gradients one all-reduce call carries. Gradients are packed, in the
    /// model's parameter order, into flat buckets of at most this size (a tensor larger than
    /// that gets a bucket of its own). `0` gives one call per parameter tensor.
    pub fn with_bucket_bytes(mut self, bytes: usize) -> Self {
        self.bucket_bytes = bytes;
        self
    }

    /// Trains over several machines: this process is one node of [`Nodes`] (see
    /// `docs/data-parallel.md`, "Several machines"). Gradients are summed on this machine's
    /// devices, then over the nodes by the nodes' strategy, and divided by the number of devices
    /// in all. Each gradient exchange is a burn-collective session of its own, so all gradients
    /// of one dtype go in one all-reduce call here: the bucket size is not used.
    pub fn with_nodes(mut self, nodes: Nodes) -> Self {
        self.nodes = Some(nodes);
        self
    }

    /// The longest a collective operation (or a wait for the other nodes) may take: past it,
    /// every worker stops with [`ParallelError::Timeout`], which names what it waited for,
    /// instead of waiting forever for a peer that is gone.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The local all-reduce strategy.
    pub fn strategy(&self) -> AllReduceStrategy {
        self.strategy
    }

    /// The bucket size in bytes.
    pub fn bucket_bytes(&self) -> usize {
        self.bucket_bytes
    }

    /// The multi-node settings, if any.
    pub fn nodes(&self) -> Option<&Nodes> {
        self.nodes.as_ref()
    }

    /// The time limit of collective operations.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The bucket size the layout uses: every gradient of a dtype in one bucket on several
    /// nodes (one burn-collective session per bucket there).
    pub(crate) fn layout_bucket_bytes(&self) -> usize {
        if self.nodes.is_some() {
            usize::MAX
        } else {
            self.bucket_bytes
        }
    }

    /// Checks the settings; the configuration every worker registers with on one machine.
    pub(crate) fn collective_for(&self, devices: usize) -> Result<CollectiveConfig, ParallelError> {
        if let AllReduceStrategy::Tree(0) = self.strategy {
            // burn-collective's tree of arity 0 never reaches its root: the server would spin.
            return Err(ParallelError::InvalidConfig(
                "a tree all-reduce needs an arity of at least 1".into(),
            ));
        }
        if self.timeout.is_zero() {
            return Err(ParallelError::InvalidConfig(
                "the collective time limit must be above zero".into(),
            ));
        }
        if let Some(nodes) = &self.nodes {
            nodes.check()?;
        }
        Ok(CollectiveConfig::default()
            .with_num_devices(devices)
            .with_local_all_reduce_strategy(self.strategy))
    }
}
