//! The service: one run's state (who joined, who arrived where) and a thread per node's
//! connection answering `Go` when every node has arrived and `Lost` when one is gone.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;

use super::protocol::{ToNode, ToService, send};

/// One run's state on the service: who joined, who arrived where.
#[derive(Default)]
struct Run {
    nodes: Option<usize>,
    /// By rank: the connection to write to, the address and device count.
    members: HashMap<usize, (TcpStream, String, usize)>,
    rounds: HashMap<u64, Round>,
    /// Set once a node is lost: every later arrival is answered with it.
    lost: Option<(usize, String)>,
}

#[derive(Default)]
struct Round {
    arrived: BTreeSet<usize>,
    failures: Vec<(usize, String)>,
    present: Vec<bool>,
}

impl Run {
    fn broadcast(&mut self, message: &ToNode) {
        for (stream, _, _) in self.members.values_mut() {
            // A write to a node that is gone fails; its reader thread reports it.
            let _ = send(stream, message);
        }
    }

    fn lose(&mut self, rank: usize, why: String) {
        if self.lost.is_none() {
            self.lost = Some((rank, why.clone()));
            self.broadcast(&ToNode::Lost { rank, why });
        }
    }
}

/// Serves rendezvous on `listener` until the process ends: one run at a time (the state resets
/// when every node of a run has disconnected).
pub(crate) fn serve(listener: TcpListener) {
    let run = Arc::new(Mutex::new(Run::default()));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let run = Arc::clone(&run);
        let _ = thread::Builder::new()
            .name("rendezvous".into())
            .spawn(move || handle(stream, &run));
    }
}

fn lock(run: &Mutex<Run>) -> MutexGuard<'_, Run> {
    run.lock().unwrap_or_else(|e| e.into_inner())
}

fn handle(stream: TcpStream, run: &Mutex<Run>) {
    let _ = stream.set_nodelay(true);
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut lines = BufReader::new(stream).lines();
    let Some(Ok(line)) = lines.next() else { return };
    let rank = match serde_json::from_str::<ToService>(&line) {
        Ok(ToService::Hello {
            rank,
            nodes,
            address,
            devices,
        }) => {
            let mut state = lock(run);
            let refusal = if rank >= nodes {
                Some(format!("rank {rank} is not below the node count {nodes}"))
            } else if state.nodes.is_some_and(|n| n != nodes) {
                Some(format!(
                    "this node says {nodes} nodes, the first one said {}",
                    state.nodes.unwrap_or_default()
                ))
            } else if state.members.contains_key(&rank) {
                Some(format!("another node already has rank {rank}"))
            } else {
                None
            };
            if let Some(why) = refusal {
                let _ = send(&mut writer, &ToNode::Refused { why });
                return;
            }
            state.nodes = Some(nodes);
            let Ok(own) = writer.try_clone() else { return };
            state.members.insert(rank, (own, address, devices));
            state.broadcast(&ToNode::Joined { rank });
            if state.members.len() == nodes {
                let mut ranks: Vec<_> = state.members.iter().collect();
                ranks.sort_by_key(|(rank, _)| **rank);
                let roster = ToNode::Roster {
                    addresses: ranks.iter().map(|(_, m)| m.1.clone()).collect(),
                    devices: ranks.iter().map(|(_, m)| m.2).collect(),
                };
                state.broadcast(&roster);
            }
            rank
        }
        _ => {
            let _ = send(
                &mut writer,
                &ToNode::Refused {
                    why: "the first message must be a hello".into(),
                },
            );
            return;
        }
    };

    let mut clean = false;
    let why = loop {
        let Some(line) = lines.next() else {
            break "its connection closed".to_string();
        };
        let message = match line.map(|l| serde_json::from_str::<ToService>(&l)) {
            Ok(Ok(message)) => message,
            Ok(Err(e)) => break format!("it sent an unreadable message: {e}"),
            Err(e) => break format!("its connection broke: {e}"),
        };
        let mut state = lock(run);
        match message {
            ToService::Arrive {
                round,
                failure,
                present,
            } => {
                if let Some((rank, why)) = state.lost.clone() {
                    if let Some((stream, _, _)) = state.members.get_mut(&rank) {
                        let _ = send(stream, &ToNode::Lost { rank, why });
                    }
                    continue;
                }
                let nodes = state.nodes;
                let entry = state.rounds.entry(round).or_default();
                entry.arrived.insert(rank);
                if let Some(failure) = failure {
                    entry.failures.push((rank, failure));
                }
                if entry.present.len() < present.len() {
                    entry.present.resize(present.len(), false);
                }
                for (merged, here) in entry.present.iter_mut().zip(present) {
                    *merged |= here;
                }
                let complete = nodes == Some(entry.arrived.len());
                state.broadcast(&ToNode::Arrived { rank, round });
                if complete {
                    let round_state = state.rounds.remove(&round).expect("the round");
                    state.broadcast(&ToNode::Go {
                        round,
                        failures: round_state.failures,
                        present: round_state.present,
                    });
                }
            }
            ToService::Abort { why } => state.lose(rank, why),
            ToService::Bye => {
                clean = true;
                break String::new();
            }
            ToService::Hello { .. } => break "it said hello twice".into(),
        }
    };
    let mut state = lock(run);
    state.members.remove(&rank);
    if clean {
        state.broadcast(&ToNode::Left { rank });
    } else {
        state.lose(rank, why);
    }
    if state.members.is_empty() {
        *state = Run::default();
    }
}
