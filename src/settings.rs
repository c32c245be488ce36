//! The crate's process-wide settings, as one value: [`Settings`].

use crate::offload;
use crate::recompute;

/// The crate's process-wide settings: read them with [`Settings::current`], change some and
/// [`apply`](Settings::apply) them. They take effect for the ops built from then on, on every
/// thread.
///
/// ```
/// use burn_checkpoint::Settings;
///
/// // Offload synchronous (forward waits for each copy), the recompute check on in release too.
/// Settings {
///     offload_in_flight_limit: 0,
///     verify_recomputes: true,
///     ..Settings::current()
/// }
/// .apply();
/// assert_eq!(Settings::current().offload_in_flight_limit, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The recompute check: every recompute of a region op compares its output's shape and dtype
    /// with those of the forward output and panics naming the op when they differ, rather than
    /// letting backward produce wrong gradients. One small allocation per region op. On by
    /// default in debug builds, and in any build when the environment variable
    /// `BURN_CHECKPOINT_VERIFY` is `1` at the first op.
    pub verify_recomputes: bool,
    /// The most bytes of offload copies in flight (started by forward, not yet in host memory)
    /// per training thread before forward waits for the oldest; 1 GiB by default (at PCIe speeds
    /// about 40 ms of copies behind forward). A copy larger than the bound still goes, alone.
    /// Each copy in flight holds its tensor on the device until it is in host memory, so a
    /// smaller bound trades forward time (waits, counted in
    /// [`Counters::offload`](crate::counters::Counters)) for a lower device peak when the copies
    /// fall behind. `0` makes offload synchronous: forward waits for each copy as soon as it has
    /// started it, as a plain `into_data` would.
    pub offload_in_flight_limit: usize,
}

impl Settings {
    /// The settings in force.
    pub fn current() -> Settings {
        Settings {
            verify_recomputes: recompute::verifying(),
            offload_in_flight_limit: offload::in_flight_limit(),
        }
    }

    /// Puts these settings in force, for the whole process.
    pub fn apply(self) {
        recompute::verify_recomputes(self.verify_recomputes);
        offload::set_in_flight_limit(self.offload_in_flight_limit);
    }
}
