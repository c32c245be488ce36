//! The command-line flags of a trainer that may run over several machines: [`NodeArgs`],
//! flattened into the trainer's own clap parser, checked into [`Nodes`] before anything starts.

use std::time::Duration;

use crate::nodes::Nodes;

/// The multi-node flags of a training binary (`#[command(flatten)]` them into its options):
/// `--nodes`, `--node-rank`, `--orchestrator`, `--node-host`, `--data-port`,
/// `--collective-timeout`.
///
/// ```
/// use burn_checkpoint_parallel::NodeArgs;
/// use clap::Parser;
///
/// #[derive(Parser)]
/// struct Options {
///     #[command(flatten)]
///     nodes: NodeArgs,
/// }
///
/// let one = Options::parse_from(["train"]);
/// assert!(one.nodes.nodes().unwrap().is_none(), "one machine by default");
///
/// let two = Options::parse_from([
///     "train", "--nodes", "2", "--node-rank", "1",
///     "--orchestrator", "10.0.0.1:3000", "--data-port", "3100",
/// ]);
/// assert_eq!(two.nodes.nodes().unwrap().unwrap().rank(), 1);
///
/// let missing = Options::parse_from(["train", "--nodes", "2"]);
/// assert!(missing.nodes.nodes().unwrap_err().contains("--orchestrator"));
/// ```
#[derive(clap::Args, Clone, Debug)]
pub struct NodeArgs {
    /// Train over several machines: the number of nodes, one trainer process per machine, each
    /// with its own --node-rank and the same other flags. One process runs the orchestrator
    /// (`run_orchestrator`); --orchestrator and --data-port are then required. Every node reads
    /// the same batches and trains on its part of each.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub nodes: u64,

    /// This node's rank among --nodes: 0 to nodes - 1, each given to one node.
    #[arg(long, default_value_t = 0)]
    pub node_rank: usize,

    /// Where the orchestrator listens, HOST:PORT (its rendezvous takes PORT + 1).
    #[arg(long, value_name = "HOST:PORT")]
    pub orchestrator: Option<String>,

    /// How the other nodes reach this one (a name or an address on the nodes' network).
    #[arg(long, value_name = "HOST", default_value = "127.0.0.1")]
    pub node_host: String,

    /// The port this node's tensor data service listens on, on every interface and without
    /// authentication: keep the nodes on a private network.
    #[arg(long, value_name = "PORT")]
    pub data_port: Option<u16>,

    /// Seconds a gradient exchange, or a wait for the other nodes, may take before every node
    /// stops with an error naming the node it waited for.
    #[arg(long, value_name = "SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub collective_timeout: u64,
}

impl NodeArgs {
    /// The nodes to train over, when --nodes is above 1: checked here, so that a missing or
    /// wrong flag is an error before anything starts.
    pub fn nodes(&self) -> Result<Option<Nodes>, String> {
        if self.nodes == 1 {
            return Ok(None);
        }
        let count = self.nodes as usize;
        if self.node_rank >= count {
            return Err(format!(
                "--node-rank {} must be below --nodes {count}",
                self.node_rank
            ));
        }
        let orchestrator = self
            .orchestrator
            .as_deref()
            .ok_or("--nodes above 1 needs --orchestrator HOST:PORT")?;
        let data_port = self
            .data_port
            .ok_or("--nodes above 1 needs --data-port PORT")?;
        Ok(Some(Nodes::new(
            self.node_rank,
            count,
            orchestrator,
            &self.node_host,
            data_port,
        )))
    }

    /// `--collective-timeout`, for
    /// [`DataParallelConfig::with_timeout`](crate::DataParallelConfig::with_timeout).
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.collective_timeout)
    }
}
