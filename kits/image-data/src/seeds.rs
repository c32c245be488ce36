//! Seeds derived from the run's seed, so that every random choice (shuffling, augmentation, the
//! backend's generator) is a function of the seed, the epoch and the item, and a resumed run
//! makes the same choices as an uninterrupted one.

/// Mixes two values into a well-spread 64-bit seed (SplitMix64's finaliser over both).
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a
        .wrapping_add(b.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What a seed is for: each purpose gets an unrelated stream.
#[derive(Clone, Copy, Debug)]
#[repr(u64)]
pub enum Purpose {
    /// The order of the training images in an epoch.
    Shuffle = 1,
    /// Random crops and flips in an epoch.
    Augment = 2,
    /// The backend's generator during an epoch (dropout masks).
    Backend = 3,
    /// The subset of the validation images evaluated.
    Validation = 4,
    /// The model's initial weights.
    Init = 5,
}

/// The seed for `purpose` in `epoch` (0-based) of a run seeded with `seed`.
pub fn derive(seed: u64, purpose: Purpose, epoch: usize) -> u64 {
    mix(mix(seed, purpose as u64), epoch as u64)
}

/// A small deterministic generator (SplitMix64), for per-item choices.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0, 0)
    }

    /// A value in `0..n` (`n > 0`); the bias of the modulo is negligible for small `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_seeds_differ_by_purpose_and_epoch() {
        let a = derive(7, Purpose::Shuffle, 0);
        assert_eq!(a, derive(7, Purpose::Shuffle, 0));
        assert_ne!(a, derive(7, Purpose::Shuffle, 1));
        assert_ne!(a, derive(7, Purpose::Augment, 0));
        assert_ne!(a, derive(8, Purpose::Shuffle, 0));
    }

    #[test]
    fn splitmix_is_deterministic_and_spread() {
        let draws: Vec<u64> = (0..1000)
            .map({
                let mut rng = SplitMix::new(3);
                move |_| rng.below(10)
            })
            .collect();
        let again: Vec<u64> = (0..1000)
            .map({
                let mut rng = SplitMix::new(3);
                move |_| rng.below(10)
            })
            .collect();
        assert_eq!(draws, again);
        for value in 0..10 {
            let count = draws.iter().filter(|&&d| d == value).count();
            assert!(
                (50..150).contains(&count),
                "{value} drawn {count} times of 1000"
            );
        }
    }
}
