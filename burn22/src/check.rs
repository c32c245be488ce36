//! The value check of a region name's first instance on a thread: its body run a second time, as
//! its recompute will run it, must give the values of its forward. A leaf.
//!
//! What it catches: a body that draws random numbers the region does not seed (a `Tensor::random`
//! of its own, a dropout its closure captures), which a recompute would differentiate with other
//! masks than its forward used. It runs in forward, before any backward, where reading a tensor is
//! safe on every backend (a read inside a backward step once deadlocked CubeCL's autotune on wgpu).

use burn::backend::DispatchTensor;
use burn::tensor::Tensor;
use burn_checkpoint_core::RegionName;

/// Stops with a message when `again` (the body's second run) differs from `forward` by more than
/// rounding.
pub(crate) fn same_values(name: &RegionName, forward: &[DispatchTensor], again: &[DispatchTensor]) {
    let values = |tensor: &DispatchTensor| -> Vec<f32> {
        Tensor::<1>::from_dispatch(tensor.clone())
            .into_data()
            .convert::<f32>()
            .try_to_vec::<f32>()
            .expect("f32 values")
    };
    assert_eq!(
        forward.len(),
        again.len(),
        "checkpoint region {name}: its body gave {} outputs, then {}: it must depend on its \
         inputs and module only",
        forward.len(),
        again.len()
    );
    for (index, (forward, again)) in forward.iter().zip(again).enumerate() {
        let (forward, again) = (values(forward), values(again));
        if let Some((element, was, is)) = first_difference(&forward, &again) {
            panic!(
                "checkpoint region {name}: its body run again (as backward recomputes it) gave \
                 other values than its forward (output {index}, element {element}: {was}, then \
                 {is}). Its body draws random numbers the region does not seed (a \
                 `Tensor::random` of its own, or a dropout the closure captures instead of the \
                 region's module holding it): mark it `Region::seeded()` \
                 (`#[checkpoint(seeded)]`); or it reads something besides its inputs and module, \
                 which a recompute cannot replay"
            );
        }
    }
}

/// The first element where `again` differs from `forward` by more than rounding: bits equal,
/// both NaN, or within 1e-4 relative (and 1e-6 of the tensor's largest value) pass.
fn first_difference(forward: &[f32], again: &[f32]) -> Option<(usize, f32, f32)> {
    if forward.len() != again.len() {
        return Some((forward.len().min(again.len()), f32::NAN, f32::NAN));
    }
    let scale = forward
        .iter()
        .filter(|v| v.is_finite())
        .fold(0f32, |largest, v| largest.max(v.abs()));
    forward
        .iter()
        .zip(again)
        .position(|(&was, &is)| {
            let same = was.to_bits() == is.to_bits()
                || (was.is_nan() && is.is_nan())
                || (was - is).abs() <= 1e-4 * was.abs().max(is.abs()) + 1e-6 * scale;
            !same
        })
        .map(|at| (at, forward[at], again[at]))
}

#[cfg(test)]
mod tests {
    use super::first_difference;

    #[test]
    fn rounding_passes_a_changed_mask_does_not() {
        let forward = [1.0, -2.0, f32::NAN, 0.0, 1e-9];
        assert_eq!(first_difference(&forward, &forward), None);
        let rounded = [1.0 + 1e-6, -2.0, f32::NAN, 0.0, 0.0];
        assert_eq!(first_difference(&forward, &rounded), None);
        let dropped = [1.0, 0.0, f32::NAN, 0.0, 1e-9];
        assert_eq!(first_difference(&forward, &dropped), Some((1, -2.0, 0.0)));
    }
}
