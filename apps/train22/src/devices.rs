//! The devices a run trains on: `--devices` in app-kit's words ([`DeviceSpec`], which the
//! trainer for Burn 0.21 takes too) made Burn 0.22's `Device`s, and the meter that reads their
//! memory.

use app_kit::devices::{DeviceSpec, parse_devices};
use burn::tensor::Device;
use burn_checkpoint_22::memory::Meter;

/// The devices a run trains on, all of one kind: the CPU (burn-flex), wgpu adapters or CUDA
/// GPUs; the first is the one a single-device run trains on and the planner profiles on.
///
/// ```
/// use burn_checkpoint_22_train::devices::Devices;
///
/// let cpu = Devices::parse("cpu").unwrap();
/// assert_eq!(cpu.count(), 1);
/// assert!(cpu.meter().reserved().is_none(), "the host's allocator");
/// assert_eq!(Devices::parse("2").unwrap().count(), 2);
/// assert!(Devices::parse("cpu,wgpu").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Devices(Vec<Device>);

impl Devices {
    /// `--devices`' list (see [`parse_devices`]); an error names a device this build has no
    /// backend for, and the feature that adds it.
    pub fn parse(list: &str) -> Result<Devices, String> {
        let specs = parse_devices(list)?;
        specs
            .into_iter()
            .map(device_of)
            .collect::<Result<_, _>>()
            .map(Devices)
    }

    /// Devices a program set up itself (a wgpu device registered from its own setup with
    /// `Device::wgpu_options().setup(..)`, say), all of one kind, trained on as `--devices`
    /// would: what an embedding program, or a test, gives [`Options`](crate::trainer::Options).
    ///
    /// # Panics
    ///
    /// If `devices` is empty.
    pub fn of(devices: Vec<Device>) -> Devices {
        assert!(
            !devices.is_empty(),
            "Devices::of: train on one device at least"
        );
        Devices(devices)
    }

    /// How many devices.
    pub fn count(&self) -> usize {
        self.0.len()
    }

    /// The first device, without autodiff: the one a single-device run trains on, and the one
    /// the planner profiles on.
    pub fn first(&self) -> &Device {
        &self.0[0]
    }

    /// Every device, without autodiff, in order.
    pub fn all(&self) -> &[Device] {
        &self.0
    }

    /// What reads a step's memory: the host's allocator on the CPU (the process must count with
    /// [`CountingAllocator`](burn_checkpoint_22::memory::CountingAllocator)), the first device's
    /// pools on wgpu and CUDA (bytes in use and reserved).
    pub fn meter(&self) -> Meter {
        Meter::device(self.first().clone()).unwrap_or(Meter::Host)
    }
}

/// Burn 0.22's device for `spec`, where this build has its backend.
fn device_of(spec: DeviceSpec) -> Result<Device, String> {
    Ok(match spec {
        DeviceSpec::Cpu => Device::flex(),
        #[cfg(feature = "wgpu")]
        DeviceSpec::Wgpu(None) => Device::wgpu(burn::tensor::DeviceKind::DefaultDevice),
        #[cfg(feature = "wgpu")]
        DeviceSpec::Wgpu(Some(index)) => Device::wgpu(burn::tensor::DeviceKind::DiscreteGpu(index)),
        #[cfg(feature = "cuda")]
        DeviceSpec::Cuda(index) => Device::cuda(index),
        #[allow(unreachable_patterns)]
        other => {
            let feature = match other {
                DeviceSpec::Cuda(_) => "cuda",
                _ => "wgpu",
            };
            return Err(format!(
                "{other}: this train22 is built without Burn's {feature} backend; build it with \
                 `--features {feature}` (cargo run --release --manifest-path \
                 apps/train22/Cargo.toml --features {feature} -- …)"
            ));
        }
    })
}
