//! The wire protocol: one JSON message per line, what a node sends and what the service answers.

use std::io::Write;
use std::net::TcpStream;

use serde::{Deserialize, Serialize};

/// What a node sends.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum ToService {
    Hello {
        rank: usize,
        nodes: usize,
        address: String,
        devices: usize,
    },
    /// This node reached `round`; `failure` if its step failed; `present`: which gradient
    /// entries it has (merged over the nodes in `Go`).
    Arrive {
        round: u64,
        failure: Option<String>,
        present: Vec<bool>,
    },
    /// This node stopped on an error: the others must stop too.
    Abort { why: String },
    /// This node is done and leaves cleanly.
    Bye,
}

/// What the service sends to the nodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) enum ToNode {
    /// Every node said hello: their addresses and device counts, by rank.
    Roster {
        addresses: Vec<String>,
        devices: Vec<usize>,
    },
    Joined {
        rank: usize,
    },
    Arrived {
        rank: usize,
        round: u64,
    },
    Go {
        round: u64,
        failures: Vec<(usize, String)>,
        present: Vec<bool>,
    },
    Lost {
        rank: usize,
        why: String,
    },
    /// A node finished and left cleanly: not a failure, but it will not arrive anywhere again.
    Left {
        rank: usize,
    },
    Refused {
        why: String,
    },
}

pub(super) fn send<T: Serialize>(stream: &mut TcpStream, message: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}
