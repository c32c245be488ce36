//! A node's side: its link to the service (hello, arrive, wait for the others, vote) and the
//! watch a listening thread keeps of what the service says.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use crate::ParallelError;

use super::protocol::{ToNode, ToService, send};

/// Why a wait on the other nodes ended without them.
#[derive(Debug, Clone)]
pub(crate) enum Broken {
    /// `waiting_for` had not arrived when the time ran out.
    Timeout {
        waited: Duration,
        waiting_for: String,
    },
    /// A node's connection broke, or it stopped on an error.
    Lost { node: String, why: String },
    /// The service itself is unreachable, gone, or refused this node.
    Service { address: String, why: String },
}

impl Broken {
    /// As the caller's error; `during` says what was under way.
    pub(crate) fn into_error(self, during: &str) -> ParallelError {
        match self {
            Broken::Timeout {
                waited,
                waiting_for,
            } => ParallelError::Timeout {
                during: during.into(),
                waited,
                waiting_for,
            },
            Broken::Lost { node, why } => ParallelError::NodeLost { node, why },
            Broken::Service { address, why } => ParallelError::Rendezvous { address, why },
        }
    }
}

/// Every node's word on a round: the failures (by rank) and which gradient entries some node
/// has.
struct Go {
    failures: Vec<(usize, String)>,
    present: Vec<bool>,
}

/// A round passed, as a waiter gets it: the failures by node name, the entries some node has.
pub(crate) struct Verdict {
    pub failures: Vec<(String, String)>,
    pub present: Vec<bool>,
}

/// What the reader thread learned.
#[derive(Default)]
struct Heard {
    joined: BTreeSet<usize>,
    roster: Option<(Vec<String>, Vec<usize>)>,
    arrived: HashMap<u64, BTreeSet<usize>>,
    go: HashMap<u64, Go>,
    lost: Option<(usize, String)>,
    left: BTreeSet<usize>,
    service: Option<String>,
}

/// What the reader thread and the waiters share.
pub(crate) struct Watch {
    /// The service's address, for errors.
    address: String,
    heard: Mutex<Heard>,
    changed: Condvar,
}

impl Watch {
    fn heard(&self) -> MutexGuard<'_, Heard> {
        self.heard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a node is gone (or the service): a collective call waiting on the nodes will
    /// not complete.
    pub(crate) fn broken(&self) -> Option<Broken> {
        let heard = self.heard();
        broken(&heard, &self.address)
    }
}

fn name(heard: &Heard, rank: usize) -> String {
    match &heard.roster {
        Some((addresses, _)) => format!("node {rank} ({})", addresses[rank]),
        None => format!("node {rank}"),
    }
}

fn broken(heard: &Heard, address: &str) -> Option<Broken> {
    if let Some((rank, why)) = &heard.lost {
        return Some(Broken::Lost {
            node: name(heard, *rank),
            why: why.clone(),
        });
    }
    heard.service.clone().map(|why| Broken::Service {
        address: address.to_string(),
        why,
    })
}

/// This node's connection to the rendezvous.
pub(crate) struct Link {
    writer: Mutex<TcpStream>,
    watch: Arc<Watch>,
    rank: usize,
    nodes: usize,
    devices: Vec<usize>,
}

impl Link {
    /// Connects (retrying until `timeout`: the service may start after this node), says hello
    /// and waits until every node has joined.
    pub(crate) fn join(
        service: &str,
        rank: usize,
        nodes: usize,
        address: &str,
        devices: usize,
        timeout: Duration,
    ) -> Result<Link, Broken> {
        let deadline = Instant::now() + timeout;
        let service_error = |why: String| Broken::Service {
            address: service.to_string(),
            why,
        };
        let stream = loop {
            let attempt = service
                .to_socket_addrs()
                .map_err(|e| service_error(format!("cannot resolve the address: {e}")))?
                .find_map(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).ok());
            match attempt {
                Some(stream) => break stream,
                None if Instant::now() >= deadline => {
                    return Err(service_error(format!(
                        "nothing answered within {timeout:?} (is the orchestrator running?)"
                    )));
                }
                None => thread::sleep(Duration::from_millis(100)),
            }
        };
        let _ = stream.set_nodelay(true);
        let mut writer = stream
            .try_clone()
            .map_err(|e| service_error(e.to_string()))?;
        send(
            &mut writer,
            &ToService::Hello {
                rank,
                nodes,
                address: address.to_string(),
                devices,
            },
        )
        .map_err(|e| service_error(format!("cannot write to it: {e}")))?;
        let watch = Arc::new(Watch {
            address: service.to_string(),
            heard: Mutex::new(Heard::default()),
            changed: Condvar::new(),
        });
        let reader_watch = Arc::clone(&watch);
        thread::Builder::new()
            .name("rendezvous-link".into())
            .spawn(move || listen(stream, &reader_watch))
            .map_err(|e| service_error(e.to_string()))?;

        let heard = watch.heard();
        let (heard, _) = watch
            .changed
            .wait_timeout_while(
                heard,
                deadline.saturating_duration_since(Instant::now()),
                |h| h.roster.is_none() && broken(h, service).is_none(),
            )
            .unwrap_or_else(|e| e.into_inner());
        if let Some(broken) = broken(&heard, service) {
            return Err(broken);
        }
        let Some((_, devices)) = heard.roster.clone() else {
            let missing: Vec<String> = (0..nodes)
                .filter(|r| !heard.joined.contains(r))
                .map(|r| format!("node {r}"))
                .collect();
            return Err(Broken::Timeout {
                waited: timeout,
                waiting_for: missing.join(", "),
            });
        };
        drop(heard);
        Ok(Link {
            writer: Mutex::new(writer),
            watch,
            rank,
            nodes,
            devices,
        })
    }

    /// Every node's device count, by rank.
    pub(crate) fn devices(&self) -> &[usize] {
        &self.devices
    }

    /// What collective waits watch.
    pub(crate) fn watch(&self) -> Arc<Watch> {
        Arc::clone(&self.watch)
    }

    fn write(&self, message: &ToService) -> Result<(), Broken> {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        send(&mut writer, message).map_err(|e| Broken::Service {
            address: self.watch.address.clone(),
            why: format!("the connection broke: {e}"),
        })
    }

    /// Says that this node reached `round` (does not wait).
    pub(crate) fn arrive(
        &self,
        round: u64,
        failure: Option<String>,
        present: Vec<bool>,
    ) -> Result<(), Broken> {
        self.write(&ToService::Arrive {
            round,
            failure,
            present,
        })
    }

    /// Waits until every node has arrived at `round`: the nodes' failures there (rank and
    /// message), and which gradient entries some node has.
    pub(crate) fn wait(&self, round: u64, timeout: Duration) -> Result<Verdict, Broken> {
        let heard = self.watch.heard();
        let (mut heard, _) = self
            .watch
            .changed
            .wait_timeout_while(heard, timeout, |h| {
                !h.go.contains_key(&round)
                    && broken(h, &self.watch.address).is_none()
                    && self.gone(h, round).is_none()
            })
            .unwrap_or_else(|e| e.into_inner());
        if let Some(go) = heard.go.remove(&round) {
            heard.arrived.retain(|r, _| *r > round);
            heard.go.retain(|r, _| *r > round);
            let failures = go
                .failures
                .into_iter()
                .map(|(rank, message)| (name(&heard, rank), message))
                .collect();
            return Ok(Verdict {
                failures,
                present: go.present,
            });
        }
        if let Some(broken) = broken(&heard, &self.watch.address) {
            return Err(broken);
        }
        if let Some(rank) = self.gone(&heard, round) {
            return Err(Broken::Lost {
                node: name(&heard, rank),
                why: "it left the run cleanly, as if it had no steps left: every node must be \
                      given the same number of steps"
                    .into(),
            });
        }
        Err(Broken::Timeout {
            waited: timeout,
            waiting_for: self.missing(&heard, round),
        })
    }

    /// A node that left cleanly without arriving at `round`.
    fn gone(&self, heard: &Heard, round: u64) -> Option<usize> {
        let arrived = heard.arrived.get(&round);
        heard
            .left
            .iter()
            .copied()
            .find(|r| !arrived.is_some_and(|a| a.contains(r)))
    }

    /// The other nodes that have not arrived at `round`, by name.
    pub(crate) fn missing_at(&self, round: u64) -> String {
        let heard = self.watch.heard();
        self.missing(&heard, round)
    }

    fn missing(&self, heard: &Heard, round: u64) -> String {
        let arrived = heard.arrived.get(&round);
        let missing: Vec<String> = (0..self.nodes)
            .filter(|r| *r != self.rank && !arrived.is_some_and(|a| a.contains(r)))
            .map(|r| name(heard, r))
            .collect();
        if missing.is_empty() {
            "no other node (every node is past this point)".into()
        } else {
            missing.join(", ")
        }
    }

    /// Tells every node that this one stopped on an error.
    pub(crate) fn abort(&self, why: String) {
        let _ = self.write(&ToService::Abort { why });
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.write(&ToService::Bye);
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writer.shutdown(std::net::Shutdown::Both);
    }
}

/// The reader thread: records what the service says until the connection closes.
fn listen(stream: TcpStream, watch: &Watch) {
    for line in BufReader::new(stream).lines() {
        let message = match line.map(|l| serde_json::from_str::<ToNode>(&l)) {
            Ok(Ok(message)) => message,
            _ => break,
        };
        let mut heard = watch.heard();
        match message {
            ToNode::Roster { addresses, devices } => heard.roster = Some((addresses, devices)),
            ToNode::Joined { rank } => {
                heard.joined.insert(rank);
            }
            ToNode::Arrived { rank, round } => {
                heard.arrived.entry(round).or_default().insert(rank);
            }
            ToNode::Go {
                round,
                failures,
                present,
            } => {
                heard.go.insert(round, Go { failures, present });
            }
            ToNode::Lost { rank, why } => {
                heard.lost.get_or_insert((rank, why));
            }
            ToNode::Left { rank } => {
                heard.left.insert(rank);
            }
            ToNode::Refused { why } => heard.service = Some(format!("refused this node: {why}")),
        }
        drop(heard);
        watch.changed.notify_all();
    }
    let mut heard = watch.heard();
    heard
        .service
        .get_or_insert_with(|| "the rendezvous closed the connection".into());
    drop(heard);
    watch.changed.notify_all();
}
