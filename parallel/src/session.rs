//! One data-parallel session per backend type and process.
//!
//! burn-collective keeps a single local server per backend type (a process-wide map keyed by
//! `TypeId`); every peer registered with it takes part in every all-reduce. Two `DataParallel`s on
//! one backend type at once would register into the same server and wait for each other's peers,
//! so a second one is refused with a clear error instead.

use std::any::{TypeId, type_name};
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use super::ParallelError;

fn active() -> &'static Mutex<HashSet<TypeId>> {
    static ACTIVE: OnceLock<Mutex<HashSet<TypeId>>> = OnceLock::new();
    ACTIVE.get_or_init(Default::default)
}

/// Held while a `DataParallel` on backend `I` lives; dropping it frees the backend type.
#[derive(Debug)]
pub(crate) struct Session {
    backend: TypeId,
}

impl Session {
    /// Claims backend type `I` for this process.
    pub(crate) fn claim<I: 'static>() -> Result<Session, ParallelError> {
        let backend = TypeId::of::<I>();
        // A panic while the set was locked cannot leave it half-updated (one insert or remove).
        let mut active = active().lock().unwrap_or_else(|e| e.into_inner());
        if !active.insert(backend) {
            return Err(ParallelError::Busy {
                backend: type_name::<I>(),
            });
        }
        Ok(Session { backend })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let mut active = active().lock().unwrap_or_else(|e| e.into_inner());
        active.remove(&self.backend);
    }
}
