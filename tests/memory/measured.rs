//! One measured step, as the memory tests measure it: the bytes held after forward, the peak
//! through backward, and the gradients it gave.

use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use burn_checkpoint::memory::Meter;

/// What one step held and peaked at, above what was allocated before it, and its gradients.
pub struct Measured {
    /// Bytes held after forward (the graph's saved activations, up to the loss).
    pub held: usize,
    /// The step's peak through backward.
    pub peak: usize,
    pub grads: Vec<Vec<f32>>,
}

/// Measures `forward` (the step up to its loss) and its backward; `grads` reads the gradients.
pub fn measured<B: AutodiffBackend>(
    forward: impl FnOnce() -> Tensor<B, 1>,
    grads: impl FnOnce(&B::Gradients) -> Vec<Vec<f32>>,
) -> Measured {
    let measure = Meter::Host.start();
    let loss = forward();
    let held = measure.now() as usize;
    let gradients = loss.backward();
    let peak = measure.finish().in_use as usize;
    Measured {
        held,
        peak,
        grads: grads(&gradients),
    }
}
