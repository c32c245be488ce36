//! Several machines: where this process stands among the nodes, the orchestrator they meet at,
//! and the per-step order of burn-collective sessions that makes its global all-reduce work.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use burn::collective::{AllReduceStrategy, CollectiveConfig};

use super::ParallelError;
use super::rendezvous::{self, Link};

/// How long a collective operation, or a wait for the other nodes, may take before every
/// worker stops with [`ParallelError::Timeout`]: 5 minutes (PyTorch's NCCL default is 10).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// This process's place in a run over several machines (nodes): give it to
/// [`DataParallelConfig::with_nodes`](super::DataParallelConfig::with_nodes).
///
/// Every node runs one process with a [`DataParallel`](super::DataParallel) over its own
/// devices; one process runs [`run_orchestrator`] (burn-collective's orchestrator and this
/// crate's rendezvous, on two consecutive ports). Gradients are summed over every device of
/// every node and divided by their number.
///
/// ```
/// use burn_checkpoint_parallel::{DataParallelConfig, Nodes};
///
/// // Node 1 of 2; the orchestrator runs on 10.0.0.1 (ports 3000 and 3001).
/// let nodes = Nodes::new(1, 2, "10.0.0.1:3000", "10.0.0.2", 3002);
/// assert_eq!(nodes.node_address(), "ws://10.0.0.2:3002");
/// assert_eq!(nodes.rendezvous(), "10.0.0.1:3001");
/// let config = DataParallelConfig::new().with_nodes(nodes);
/// # let _ = config;
/// ```
#[derive(Debug, Clone)]
pub struct Nodes {
    rank: usize,
    count: usize,
    orchestrator_host: String,
    orchestrator_port: u16,
    host: String,
    data_port: u16,
    strategy: AllReduceStrategy,
}

impl Nodes {
    /// Node `rank` of `count` (ranks 0 to `count - 1`, each given to exactly one node).
    /// `orchestrator` is `host:port` of [`run_orchestrator`]; `host` is how the other nodes
    /// reach this one, and `data_port` the port this node's tensor data service listens on
    /// (on every interface, without authentication: keep the nodes on a private network).
    pub fn new(rank: usize, count: usize, orchestrator: &str, host: &str, data_port: u16) -> Nodes {
        let (orchestrator_host, orchestrator_port) = match orchestrator.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), port.parse().unwrap_or(0)),
            None => (orchestrator.to_string(), 0),
        };
        Nodes {
            rank,
            count,
            orchestrator_host,
            orchestrator_port,
            host: host.to_string(),
            data_port,
            strategy: AllReduceStrategy::Tree(2),
        }
    }

    /// How the nodes' sums are combined: centralized, tree or ring (burn-collective's global
    /// strategies); tree of arity 2 by default.
    pub fn with_strategy(mut self, strategy: AllReduceStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// This node's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of nodes.
    pub fn count(&self) -> usize {
        self.count
    }

    /// burn-collective's orchestrator, as it is addressed: `ws://host:port`.
    pub fn orchestrator(&self) -> String {
        format!("ws://{}:{}", self.orchestrator_host, self.orchestrator_port)
    }

    /// The rendezvous: the orchestrator's host, its port + 1.
    pub fn rendezvous(&self) -> String {
        format!(
            "{}:{}",
            self.orchestrator_host,
            self.orchestrator_port.wrapping_add(1)
        )
    }

    /// This node's data service as the others reach it: `ws://host:data_port`.
    pub fn node_address(&self) -> String {
        format!("ws://{}:{}", self.host, self.data_port)
    }

    pub(crate) fn check(&self) -> Result<(), ParallelError> {
        let invalid = |why: String| Err(ParallelError::InvalidConfig(why));
        if self.count == 0 || self.rank >= self.count {
            return invalid(format!(
                "node rank {} is not below the node count {}",
                self.rank, self.count
            ));
        }
        if self.orchestrator_port == 0 || self.orchestrator_port == u16::MAX {
            return invalid(format!(
                "the orchestrator address `{}:{}` needs a port from 1 to 65534, as in \
                 10.0.0.1:3000 (the rendezvous takes the next one)",
                self.orchestrator_host, self.orchestrator_port
            ));
        }
        if self.data_port == 0 {
            return invalid("the data port must not be 0".into());
        }
        if let AllReduceStrategy::Tree(0) = self.strategy {
            return invalid("a tree all-reduce needs an arity of at least 1".into());
        }
        Ok(())
    }
}

/// Runs burn-collective's global orchestrator on `port` and this crate's rendezvous on
/// `port + 1`, on every interface, until the process is interrupted (Ctrl-C or SIGTERM) or
/// cannot listen. One orchestrator serves one run at a time.
///
/// ```no_run
/// // The process every node's `Nodes` names ("10.0.0.1:3000").
/// burn_checkpoint_parallel::run_orchestrator(3000)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn run_orchestrator(port: u16) -> std::io::Result<()> {
    let rendezvous_port = port.checked_add(1).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the orchestrator's port must be below 65535 (the rendezvous takes the next one)",
        )
    })?;
    // Bound before burn-collective's orchestrator starts, so that a port in use is an error
    // here rather than a log line.
    let listener = TcpListener::bind(("0.0.0.0", rendezvous_port))?;
    drop(TcpListener::bind(("0.0.0.0", port))?);
    std::thread::Builder::new()
        .name("rendezvous".into())
        .spawn(move || rendezvous::serve(listener))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(burn_collective::start_global_orchestrator(port));
    Ok(())
}

/// A node's part in the run, as the coordinator uses it each step.
pub(crate) struct Cluster {
    nodes: Nodes,
    link: Link,
    timeout: Duration,
    /// Rounds are numbered alike on every node: a vote per step, then one per exchange.
    round: u64,
    /// The round every node arrives at when it has left the last session: waited for before
    /// the next registration.
    pending: Option<u64>,
}

impl Cluster {
    /// Joins the rendezvous and waits for every node.
    pub(crate) fn join(
        nodes: Nodes,
        devices: usize,
        timeout: Duration,
    ) -> Result<Cluster, ParallelError> {
        let link = Link::join(
            &nodes.rendezvous(),
            nodes.rank,
            nodes.count,
            &nodes.node_address(),
            devices,
            timeout,
        )
        .map_err(|b| b.into_error("joining the other nodes"))?;
        Ok(Cluster {
            nodes,
            link,
            timeout,
            round: 0,
            pending: None,
        })
    }

    /// Devices of the nodes ranked below `rank`: its first peer id.
    pub(crate) fn devices_before(&self, rank: usize) -> usize {
        self.link.devices()[..rank].iter().sum()
    }

    /// Devices over every node: what the summed gradients are divided by.
    pub(crate) fn total_devices(&self) -> usize {
        self.link.devices().iter().sum()
    }

    pub(crate) fn watch(&self) -> std::sync::Arc<rendezvous::Watch> {
        self.link.watch()
    }

    /// burn-collective's settings for one session of `devices` local workers.
    pub(crate) fn session_config(
        &self,
        devices: usize,
        local: AllReduceStrategy,
    ) -> CollectiveConfig {
        CollectiveConfig::default()
            .with_num_devices(devices)
            .with_local_all_reduce_strategy(local)
            .with_num_nodes(self.nodes.count as u32)
            .with_global_address(
                self.nodes
                    .orchestrator()
                    .parse()
                    .expect("any string parses"),
            )
            .with_node_address(
                self.nodes
                    .node_address()
                    .parse()
                    .expect("any string parses"),
            )
            .with_data_service_port(self.nodes.data_port)
            .with_global_all_reduce_strategy(self.nodes.strategy)
    }

    /// Every node's verdict on this step's compute: this node's `failure` (if any) and which
    /// gradient entries it has go in; out come the entries some node has, or the first failure
    /// of another node (every node then drops the step).
    pub(crate) fn vote(
        &mut self,
        failure: Option<String>,
        present: Vec<bool>,
    ) -> Result<Vec<bool>, ParallelError> {
        let round = self.next_round();
        let failed = failure.is_some();
        self.link
            .arrive(round, failure, present)
            .map_err(|b| b.into_error("the vote on this step"))?;
        let verdict = self
            .link
            .wait(round, self.timeout)
            .map_err(|b| b.into_error("the vote on this step"))?;
        // The vote is a barrier: every node has left the previous step's sessions.
        self.pending = None;
        if !failed && let Some((node, message)) = verdict.failures.into_iter().next() {
            return Err(ParallelError::NodeFailed { node, message });
        }
        Ok(verdict.present)
    }

    /// Waits until every node has left the last session and this node's data port is free
    /// again: burn-collective's orchestrator must see every node finish before any registers.
    pub(crate) fn before_session(&mut self) -> Result<(), ParallelError> {
        if let Some(round) = self.pending.take() {
            self.link
                .wait(round, self.timeout)
                .map_err(|b| b.into_error("waiting for the nodes between exchanges"))?;
        }
        // burn-collective stops the last session's server asynchronously; registering before it
        // has released the port would start the next session without one.
        let deadline = Instant::now() + self.timeout;
        while TcpListener::bind(("0.0.0.0", self.nodes.data_port)).is_err() {
            if Instant::now() >= deadline {
                return Err(ParallelError::Timeout {
                    during: format!("waiting for data port {} to be free", self.nodes.data_port),
                    waited: self.timeout,
                    waiting_for: "the last session's data service to close".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// This node has left a session (its workers finished it): says so, without waiting.
    pub(crate) fn after_session(&mut self) -> Result<(), ParallelError> {
        let round = self.next_round();
        self.link
            .arrive(round, None, Vec::new())
            .map_err(|b| b.into_error("leaving an exchange"))?;
        self.pending = Some(round);
        Ok(())
    }

    /// The nodes that have not left the session now running: who a timed-out exchange waited
    /// for.
    pub(crate) fn in_session(&self) -> String {
        self.link.missing_at(self.round + 1)
    }

    /// Tells every node that this one stopped.
    pub(crate) fn abort(&self, why: String) {
        self.link.abort(why);
    }

    fn next_round(&mut self) -> u64 {
        self.round += 1;
        self.round
    }
}
