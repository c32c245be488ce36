//! The nodes' rendezvous: a small TCP service beside burn-collective's orchestrator, through
//! which the nodes of a multi-node run wait for each other between collective sessions, vote on
//! each step, and learn at once when a node is gone.
//!
//! Why it exists: burn-collective 0.21's global all-reduce works once per registration (its
//! sync service never clears the nodes that synced, so a second operation waits forever,
//! tracel-ai/burn#4549), so every exchange is a session of its own: register, all-reduce,
//! finish. Its orchestrator numbers nodes by how many are registered and forgets the peer count
//! on any node's finish, so a node that registers again before every node has finished corrupts
//! the node table. The barrier here is what orders those sessions; it carries no tensor.
//!
//! When to delete it: once the burn-collective this crate pins clears its sync service after each
//! operation (tracel-ai/burn#4549 closed, and a release with the fix), the nodes can keep one
//! registration for the run; then `multinode`'s tests pass with the rendezvous taken out of `Nodes`
//! (each exchange a plain all-reduce), and this module and the votes go with it. A lost node would
//! then be seen at the all-reduce's time limit (`DataParallelConfig::with_timeout`), not at once
//! (`Lost`): keep the rendezvous if that matters more than its code.
//!
//! The protocol is one JSON message per line. A node sends `Hello` once, then `Arrive` for each
//! round it reaches (rounds are numbered alike on every node: the same model makes the same
//! sequence of exchanges); the service answers `Go` when every node has arrived, and `Lost` to
//! everyone as soon as a node's connection breaks or it reports that it stopped.

mod link;
mod protocol;
mod service;

pub(crate) use link::{Broken, Link, Watch};
pub(crate) use service::serve;
