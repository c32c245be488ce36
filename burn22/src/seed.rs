//! The seed a seeded region draws from the device's generator ([`region_seed`]), and [`Seed`],
//! the seed a region's body runs with. A leaf.

use burn::tensor::{Device, Distribution, Int, Tensor};

/// What a seeded region (see [`Region::seeded`](crate::Region::seeded)) does to the device's
/// random generator before its body: it draws a seed (two numbers) and seeds the device with it,
/// in forward and again in the recompute, so that dropout draws the same masks twice. Burn 0.22
/// has no way to read or restore a generator's state, which is what PyTorch does instead; a
/// region that is not seeded never calls this.
///
/// Public so that a reference computation outside a region can draw the same numbers:
///
/// ```
/// use burn::tensor::Device;
///
/// let device = Device::flex();
/// device.seed(7);
/// let first = burn_checkpoint_22::region_seed(&device);
/// device.seed(7);
/// assert_eq!(burn_checkpoint_22::region_seed(&device), first);
/// ```
pub fn region_seed(device: &Device) -> u64 {
    // 30 bits a draw: Burn's default int is i32.
    let draw = Tensor::<1, Int>::random([2], Distribution::Uniform(0.0, 2f64.powi(30)), device);
    let values = draw.into_data().convert::<i64>();
    let values = values.as_slice::<i64>().expect("i64 values");
    ((values[0] as u64) << 30) | values[1] as u64
}

/// The seed a seeded region leaves the generator with when backward has run its body again (its
/// recompute, or a kept region's `Reseed` node in `graph/nodes.rs`): derived from the region's seed
/// (splitmix64's finaliser), so that it draws nothing.
pub(crate) fn after_recompute(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed a region's body runs with, if it draws one: its forward and its recompute seed the
/// device with it before the body, and the generator is left where a recompute leaves it after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seed(pub(crate) Option<u64>);

impl Seed {
    /// Seeds `device` with this seed (nothing for a region without one).
    pub(crate) fn apply(self, device: &Device) {
        if let Some(seed) = self.0 {
            device.seed(seed);
        }
    }

    /// Seeds `device` where backward's run of the body leaves it ([`after_recompute`]).
    pub(crate) fn apply_after_recompute(self, device: &Device) {
        if let Some(seed) = self.0 {
            device.seed(after_recompute(seed));
        }
    }
}
