//! From a device list to the inner backend it names ([`on_devices`]), and from a method's tape
//! and devices to a [`StepRunner`] on the matching backend type: the only place that names
//! backend types.

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::module::Module;
use burn::optim::SgdConfig;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn_checkpoint::Checkpointed;

use super::options::{DeviceSpec, TrainOptions};
use super::parallel::Parallel;
use super::runner::{SingleDevice, StepRunner};
use super::save::restore_weights;
use crate::seeds::{Purpose, derive};
use crate::{DenseNet, DenseNetConfig};
use app_kit::save::SavedFiles;
use app_kit::tape::Tape;
use burn_checkpoint::memory::Meter;

/// A runner and what the report says about it.
pub struct Built {
    /// The runner.
    pub runner: Box<dyn StepRunner>,
    /// The backend type, shortened (`Checkpointed<Autodiff<Flex, BalancedCheckpointing>>`).
    pub backend: String,
    /// The model's trainable parameters.
    pub parameters: usize,
}

/// Work to run on the inner backend a device list names: the training run.
pub trait OnDevices {
    /// What the work gives.
    type Output;

    /// Runs on `devices` of the inner backend `I`, whose memory `meter` reads.
    fn on<I: Backend>(self, devices: Vec<I::Device>, meter: Meter) -> anyhow::Result<Self::Output>;
}

/// Runs `task` on the backend `specs` name (one kind: `parse_devices` refuses mixed lists): the
/// CPU (Flex, host memory), CUDA or wgpu devices (their memory read through cubecl's counts). A
/// backend this build lacks is an error that says which feature to build with.
pub fn on_devices<T: OnDevices>(specs: &[DeviceSpec], task: T) -> anyhow::Result<T::Output> {
    match specs[0] {
        DeviceSpec::Cpu => on_cpu(specs.len(), task),
        DeviceSpec::Cuda(_) => on_cuda(specs, task),
        DeviceSpec::Wgpu(_) => on_wgpu(specs, task),
    }
}

#[cfg(feature = "flex")]
fn on_cpu<T: OnDevices>(count: usize, task: T) -> anyhow::Result<T::Output> {
    let devices = vec![burn::backend::flex::FlexDevice; count];
    task.on::<burn::backend::Flex>(devices, Meter::Host)
}

#[cfg(not(feature = "flex"))]
fn on_cpu<T: OnDevices>(_: usize, _: T) -> anyhow::Result<T::Output> {
    anyhow::bail!("this build has no CPU backend: build with the `flex` feature (on by default)")
}

#[cfg(feature = "cuda")]
fn on_cuda<T: OnDevices>(specs: &[DeviceSpec], task: T) -> anyhow::Result<T::Output> {
    use burn::backend::cuda::CudaDevice;
    let devices: Vec<CudaDevice> = specs
        .iter()
        .map(|d| match d {
            DeviceSpec::Cuda(index) => CudaDevice::new(*index),
            _ => unreachable!("parse_devices refuses mixed lists"),
        })
        .collect();
    let meter = Meter::device(devices[0].clone()).expect("cubecl counts CUDA bytes");
    task.on::<burn::backend::Cuda>(devices, meter)
}

#[cfg(not(feature = "cuda"))]
fn on_cuda<T: OnDevices>(_: &[DeviceSpec], _: T) -> anyhow::Result<T::Output> {
    anyhow::bail!("this build has no CUDA backend: build with `--features cuda`")
}

/// Burn's wgpu backend with fusion and autotune, as Burn's default features give it.
#[cfg(feature = "wgpu")]
fn on_wgpu<T: OnDevices>(specs: &[DeviceSpec], task: T) -> anyhow::Result<T::Output> {
    use burn::backend::wgpu::WgpuDevice;
    let devices: Vec<WgpuDevice> = specs
        .iter()
        .map(|d| match d {
            DeviceSpec::Wgpu(None) => WgpuDevice::DefaultDevice,
            DeviceSpec::Wgpu(Some(index)) => WgpuDevice::DiscreteGpu(*index),
            _ => unreachable!("parse_devices refuses mixed lists"),
        })
        .collect();
    let meter = Meter::device(devices[0].clone()).expect("cubecl counts wgpu bytes");
    task.on::<burn::backend::Wgpu>(devices, meter)
}

#[cfg(not(feature = "wgpu"))]
fn on_wgpu<T: OnDevices>(_: &[DeviceSpec], _: T) -> anyhow::Result<T::Output> {
    anyhow::bail!("this build has no wgpu backend: build with `--features wgpu`")
}

/// The reference's optimizer: SGD with Nesterov momentum (no dampening, as PyTorch's) and L2
/// weight decay.
pub fn sgd(options: &TrainOptions) -> SgdConfig {
    let momentum = (options.sgd.momentum > 0.0).then(|| {
        MomentumConfig::new()
            .with_momentum(options.sgd.momentum)
            .with_dampening(0.0)
            .with_nesterov(true)
    });
    SgdConfig::new().with_momentum(momentum).with_weight_decay(
        (options.sgd.weight_decay > 0.0)
            .then(|| WeightDecayConfig::new(options.sgd.weight_decay as f32)),
    )
}

/// A runner on `tape`, over `devices` of the inner backend `I`, with freshly initialised weights
/// (drawn from the run's seed), or the weights and optimizer state saved in `resume`.
pub fn runner<I: Backend>(
    tape: Tape,
    config: &DenseNetConfig,
    devices: &[I::Device],
    options: &TrainOptions,
    meter: Meter,
    resume: Option<&SavedFiles>,
) -> anyhow::Result<Built> {
    match tape {
        Tape::Plain => build::<Autodiff<I>>(config, devices, options, meter, resume),
        Tape::Balanced => {
            build::<Autodiff<I, BalancedCheckpointing>>(config, devices, options, meter, resume)
        }
        Tape::RegionsOverBalanced => build::<Checkpointed<Autodiff<I, BalancedCheckpointing>>>(
            config, devices, options, meter, resume,
        ),
        // Not built: a backend type more to compile, for a tape no method has.
        Tape::Regions => unreachable!("DenseNet's methods run their regions over Balanced"),
    }
}

/// The model and optimizer, fresh or resumed, on `devices[0]`; then one device trains
/// alone, several data-parallel.
fn build<B: AutodiffBackend>(
    config: &DenseNetConfig,
    devices: &[B::Device],
    options: &TrainOptions,
    meter: Meter,
    resume: Option<&SavedFiles>,
) -> anyhow::Result<Built> {
    let device = devices[0].clone();
    B::seed(&device, derive(options.seed, Purpose::Init, 0));
    // Parameters are initialised lazily, each on first use; `fork` touches them all now, in
    // the module's order, so the weights depend on the seed only, not on the backend type.
    let mut model: DenseNet<B> = config.init::<B>(&device).fork(&device);
    let parameters = model.num_params();
    let mut optimizer = sgd(options).init::<B, DenseNet<B>>();
    if let Some(saved) = resume {
        (model, optimizer) = restore_weights(model, optimizer, saved, &device)?;
    }
    let nodes = options.cluster.nodes().map_err(anyhow::Error::msg)?;
    let runner: Box<dyn StepRunner> = if devices.len() == 1 && nodes.is_none() {
        Box::new(SingleDevice::new(model, optimizer, device, meter))
    } else {
        Box::new(Parallel::new(
            model,
            optimizer,
            devices.to_vec(),
            nodes,
            options,
            meter,
        )?)
    };
    Ok(Built {
        runner,
        backend: short_type_name(std::any::type_name::<B>()),
        parameters,
    })
}

/// A type name without module paths: `a::B<c::D, e::F>` → `B<D, F>`.
pub fn short_type_name(name: &str) -> String {
    let mut short = String::new();
    let mut word = String::new();
    for c in name.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            short.push_str(word.rsplit("::").next().unwrap_or(""));
            word.clear();
            short.push(c);
        }
    }
    short.push_str(word.rsplit("::").next().unwrap_or(""));
    short
}

#[cfg(test)]
mod tests {
    use super::short_type_name;

    #[test]
    fn type_names_lose_their_paths() {
        assert_eq!(
            short_type_name("a::b::Checkpointed<x::Autodiff<y::Flex, z::Balanced>>"),
            "Checkpointed<Autodiff<Flex, Balanced>>"
        );
        assert_eq!(short_type_name("Flex"), "Flex");
    }
}
