//! How gradients are exchanged: all-reduce strategy, bucket size, multi-node settings.

use burn::collective::{AllReduceStrategy, CollectiveConfig};

use super::ParallelError;

/// The default bucket size, PyTorch DDP's: 25 MiB.
pub const DEFAULT_BUCKET_BYTES: usize = 25 * 1024 * 1024;

/// Settings of a [`DataParallel`](super::DataParallel).
///
/// ```
/// use burn_checkpoint::parallel::{AllReduceStrategy, DataParallelConfig};
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
    collective: CollectiveConfig,
    first_peer: u32,
}

impl Default for DataParallelConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl DataParallelConfig {
    /// Tree all-reduce of arity 2 (burn-collective's default), 25 MiB buckets, one machine.
    pub fn new() -> Self {
        DataParallelConfig {
            strategy: AllReduceStrategy::Tree(2),
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            collective: CollectiveConfig::default(),
            first_peer: 0,
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

    /// burn-collective's settings, for training on several machines: the number of nodes, the
    /// orchestrator's and this node's addresses, the data-service port and the global strategy
    /// (see `docs/data-parallel.md`). Its device count and local all-reduce strategy are replaced
    /// by this `DataParallel`'s.
    pub fn with_collective(mut self, collective: CollectiveConfig) -> Self {
        self.collective = collective;
        self
    }

    /// The peer id of this machine's first device; the others follow. Peer ids must be unique
    /// over all machines (like NCCL ranks), so give each machine its own range.
    pub fn with_first_peer_id(mut self, first: u32) -> Self {
        self.first_peer = first;
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

    /// The first peer id.
    pub fn first_peer_id(&self) -> u32 {
        self.first_peer
    }

    /// The collective configuration every worker registers with, for `devices` local devices.
    pub(crate) fn collective_for(&self, devices: usize) -> Result<CollectiveConfig, ParallelError> {
        if let AllReduceStrategy::Tree(0) = self.strategy {
            // burn-collective's tree of arity 0 never reaches its root: the server would spin.
            return Err(ParallelError::InvalidConfig(
                "a tree all-reduce needs an arity of at least 1".into(),
            ));
        }
        let config = self
            .collective
            .clone()
            .with_num_devices(devices)
            .with_local_all_reduce_strategy(self.strategy);
        if !config.is_valid() {
            return Err(ParallelError::InvalidConfig(
                "the collective configuration sets only some of the multi-node settings \
                 (number of nodes, orchestrator address, node address, data-service port)"
                    .into(),
            ));
        }
        Ok(config)
    }
}
