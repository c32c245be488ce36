//! The devices a run trains on: `--devices` in app-kit's words ([`DeviceSpec`], which the
//! trainer for Burn 0.21 takes too) made Burn 0.22's `Device`s, and the meter that reads their
//! memory.
//!
//! A wgpu adapter listed more than once (`wgpu,wgpu`) is that many devices of their own on it
//! (`wgpu_device_of_its_own`): burn-train gives each worker a fork of the model on its device,
//! and on one device the forks share every parameter's buffer, which Burn 0.22's fusion races on
//! (measured on lavapipe, 1 run in 8 of `--devices wgpu,wgpu` with regions: "Should have handle
//! for tensor" on the device thread). A CUDA GPU listed twice is refused for the same reason.

use app_kit::devices::{DeviceSpec, parse_devices};
use burn::tensor::Device;
use burn_checkpoint_22::memory::Meter;

/// The devices a run trains on, all of one kind: the CPU (burn-flex), wgpu adapters or CUDA
/// GPUs; the first is the one a single-device run trains on and the planner profiles on.
///
/// ```
/// use burn_checkpoint_22::memory::MemoryMeter;
/// use burn_checkpoint_22_train::devices::Devices;
///
/// let cpu = Devices::parse("cpu").unwrap();
/// assert_eq!(cpu.count(), 1);
/// assert!(cpu.meter().reserved().is_none(), "the host's allocator");
/// assert_eq!(Devices::parse("2").unwrap().count(), 2);
/// assert!(Devices::parse("cpu,wgpu").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Devices(Vec<Device>, Vec<DeviceSpec>);

impl Devices {
    /// `--devices`' list (see [`parse_devices`]), a wgpu adapter listed more than once a device
    /// of its own each time (`wgpu_device_of_its_own`, feature `wgpu`); an error names a device
    /// this build has no backend for and the feature that adds it, or a CUDA GPU listed twice.
    pub fn parse(list: &str) -> Result<Devices, String> {
        let specs = parse_devices(list)?;
        let listed = |spec: DeviceSpec| specs.iter().filter(|&&s| s == spec).count();
        specs
            .iter()
            .map(|&spec| match (spec, listed(spec)) {
                (DeviceSpec::Cuda(_), 2..) => Err(format!(
                    "{spec} is listed more than once: burn-train's workers on one CUDA device \
                     would share every parameter's buffer, which Burn's fusion races on; list \
                     each GPU once (cuda:0,cuda:1)"
                )),
                (DeviceSpec::Wgpu(index), 2..) => own_wgpu(index),
                _ => device_of(spec),
            })
            .collect::<Result<_, _>>()
            .map(|devices| Devices(devices, specs))
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
        Devices(devices, Vec::new())
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

    /// The devices in words, each wgpu one by its adapter (name, driver, API: on a machine
    /// without a GPU, Mesa's lavapipe says `llvmpipe`); a program's own devices
    /// ([`Devices::of`]) as Burn names them.
    ///
    /// ```
    /// use burn_checkpoint_22_train::devices::Devices;
    ///
    /// assert_eq!(Devices::parse("cpu").unwrap().describe(), "cpu (burn-flex)");
    /// ```
    pub fn describe(&self) -> String {
        if self.1.is_empty() {
            return format!("{:?}", self.0);
        }
        let words: Vec<String> = self.1.iter().map(|&spec| described(spec)).collect();
        words.join(", ")
    }

    /// What reads a step's memory: the host's allocator on the CPU (the process must count with
    /// [`CountingAllocator`](burn_checkpoint_22::memory::CountingAllocator)), the first device's
    /// pools on wgpu and CUDA (bytes in use and reserved).
    pub fn meter(&self) -> Meter {
        Meter::device(self.first().clone()).unwrap_or(Meter::Host)
    }
}

/// `spec` in words: a wgpu adapter by its name, driver and API.
fn described(spec: DeviceSpec) -> String {
    match spec {
        DeviceSpec::Cpu => "cpu (burn-flex)".to_string(),
        #[cfg(feature = "wgpu")]
        DeviceSpec::Wgpu(index) => match wgpu_adapter(index) {
            Ok((_, adapter)) => {
                let info = adapter.get_info();
                format!(
                    "{spec}: {} ({} {}, {:?}, {:?})",
                    info.name, info.driver, info.driver_info, info.device_type, info.backend
                )
            }
            Err(error) => format!("{spec}: {error}"),
        },
        other => other.to_string(),
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

/// A device of its own on the adapter `--devices`' `wgpu` (`index: None`) or `wgpu:N` names.
#[cfg(feature = "wgpu")]
fn own_wgpu(index: Option<usize>) -> Result<Device, String> {
    wgpu_device_of_its_own(index, |_| {})
}

#[cfg(not(feature = "wgpu"))]
fn own_wgpu(index: Option<usize>) -> Result<Device, String> {
    device_of(DeviceSpec::Wgpu(index))
}

/// A wgpu device of its own, registered with Burn (`DeviceKind::Existing`), on the adapter
/// `--devices`' `wgpu` (`index: None`: the high-performance one, as Burn's default device picks
/// it) or `wgpu:N` (the N-th discrete GPU) names: its own queue, memory pools and fusion server,
/// as another GPU would have; `limits` may lower the adapter's limits (a test's smaller device).
/// The device is requested as Burn's own wgpu runtime requests one (the adapter's features and
/// limits, memory hints for usage).
///
/// ```no_run
/// use burn_checkpoint_22_train::devices::wgpu_device_of_its_own;
///
/// // Two workers on one GPU, each with buffers of its own.
/// let first = wgpu_device_of_its_own(None, |_| {}).unwrap();
/// let second = wgpu_device_of_its_own(None, |_| {}).unwrap();
/// assert_ne!(first, second);
/// ```
#[cfg(feature = "wgpu")]
pub fn wgpu_device_of_its_own(
    index: Option<usize>,
    limits: impl FnOnce(&mut burn::tensor::wgpu::wgpu::Limits),
) -> Result<Device, String> {
    use burn::tensor::wgpu::{WgpuSetup, wgpu};
    use futures_lite::future::block_on;

    let (instance, adapter) =
        wgpu_adapter(index).map_err(|e| format!("{}: {e}", DeviceSpec::Wgpu(index)))?;
    let mut required_limits = adapter.limits();
    limits(&mut required_limits);
    let (device, queue) = block_on(
        adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("burn-checkpoint-22-train"),
            required_features: adapter
                .features()
                .difference(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS),
            required_limits,
            memory_hints: wgpu::MemoryHints::MemoryUsage,
            ..Default::default()
        }),
    )
    .map_err(|e| format!("wgpu: a device on {}: {e}", adapter.get_info().name))?;
    let backend = adapter.get_info().backend;
    let setup = WgpuSetup {
        instance,
        adapter,
        device,
        queue,
        backend,
    };
    Device::wgpu_options()
        .setup(setup)
        .init()
        .map_err(|e| format!("wgpu: Burn did not take the device: {e}"))
}

/// The adapter `--devices`' `wgpu` (`index: None`: the high-performance one, as Burn's default
/// device picks it) or `wgpu:N` (the N-th discrete GPU) names, with its instance.
#[cfg(feature = "wgpu")]
fn wgpu_adapter(
    index: Option<usize>,
) -> Result<
    (
        burn::tensor::wgpu::wgpu::Instance,
        burn::tensor::wgpu::wgpu::Adapter,
    ),
    String,
> {
    use burn::tensor::wgpu::wgpu;
    use futures_lite::future::block_on;

    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu::Backends::PRIMARY,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let adapter = match index {
        None => block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .map_err(|e| format!("no adapter ({e})"))?,
        Some(index) => block_on(instance.enumerate_adapters(wgpu::Backends::PRIMARY))
            .into_iter()
            .filter(|adapter| adapter.get_info().device_type == wgpu::DeviceType::DiscreteGpu)
            .nth(index)
            .ok_or_else(|| format!("no discrete GPU {index}"))?,
    };
    Ok((instance, adapter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_listed_twice_or_not_built_says_what_to_write() {
        let twice = Devices::parse("cuda:0,cuda:0").unwrap_err();
        assert!(twice.contains("more than once"), "{twice}");
        #[cfg(not(feature = "cuda"))]
        assert!(
            Devices::parse("cuda:1")
                .unwrap_err()
                .contains("--features cuda"),
            "the feature that adds CUDA"
        );
        #[cfg(not(feature = "wgpu"))]
        assert!(
            Devices::parse("wgpu,wgpu")
                .unwrap_err()
                .contains("--features wgpu"),
            "the feature that adds wgpu"
        );
        assert_eq!(Devices::parse("cpu,cpu").unwrap().count(), 2);
    }
}
