//! The recompute check: a recomputed output must have the shape and dtype its forward had.
//!
//! A region op whose recompute differs from its forward would give wrong gradients without a
//! word. With the check on, the recompute fails instead, naming the op. It is on in debug builds,
//! and opt-in in release builds through `Settings::verify_recomputes` or the environment variable
//! `BURN_CHECKPOINT_VERIFY=1`.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use burn_backend::{Backend, DType, Shape, TensorMetadata};

use crate::types::Primitive;

/// Unset: decided on first use from the build and the environment.
const UNSET: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

static VERIFY: AtomicU8 = AtomicU8::new(UNSET);

/// Turns the recompute check on or off for the whole process, for the ops built from now on
/// (`Settings::verify_recomputes`).
pub(crate) fn verify_recomputes(on: bool) {
    VERIFY.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

/// Whether the check is on: set, else on in debug builds or with `BURN_CHECKPOINT_VERIFY=1`.
pub(crate) fn verifying() -> bool {
    match VERIFY.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => {
            let on = cfg!(debug_assertions)
                || std::env::var("BURN_CHECKPOINT_VERIFY").is_ok_and(|v| v == "1");
            // A concurrent `verify_recomputes` call wins over this default.
            let _ = VERIFY.compare_exchange(
                UNSET,
                if on { ON } else { OFF },
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            VERIFY.load(Ordering::Relaxed) == ON
        }
    }
}

/// The shape and dtype a region op's forward produced, set once the forward has run.
#[derive(Clone, Debug)]
pub(super) struct Expected(Arc<OnceLock<(Shape, DType)>>);

impl Expected {
    pub(super) fn new_if_verifying() -> Option<Self> {
        verifying().then(|| Expected(Arc::default()))
    }

    pub(super) fn set<I: Backend>(&self, output: &Primitive<I>) {
        let _ = self.0.set((output.shape(), output.dtype()));
    }

    /// Panics, naming `op`, if `recomputed` differs in shape or dtype from the forward output.
    pub(super) fn verify<I: Backend>(&self, op: &str, recomputed: &Primitive<I>) {
        let Some((shape, dtype)) = self.0.get() else {
            return;
        };
        let (got_shape, got_dtype) = (recomputed.shape(), recomputed.dtype());
        if &got_shape != shape || got_dtype != *dtype {
            panic!(
                "burn-checkpoint: recomputing `{op}` during backward gave a {got_dtype:?} tensor \
                 of shape {got_shape:?}, but its forward gave a {dtype:?} tensor of shape \
                 {shape:?}; the gradients would be wrong"
            );
        }
    }
}
