//! The networks with regions give the gradients of plain autodiff: DenseNet-BC's dense layers,
//! the GPT's blocks, bit for bit; the recurrent network's cell calls, its input bit for bit.

use bench_kit_22::{assert_close, generator, grad_of, initialised, param_grads};
use burn::tensor::{Device, Distribution, Int, Tensor};
use burn_checkpoint_22::Schedule;
use burn_checkpoint_22_models::Cut;
use burn_checkpoint_22_models::densenet::DenseNet;
use burn_checkpoint_22_models::gpt::Gpt;
use burn_checkpoint_22_models::lstm::LstmNetwork;

/// DenseNet-BC: every layer's output goes to every later layer of its block, so a tensor is an
/// input of several regions and gets its gradient's terms from each. They add in plain autodiff's
/// order only if each region hands its inputs their gradients one depth below its deepest input,
/// as plain autodiff's `cat` does (a chain of two-tensor joins handed them out at other depths:
/// the sums differed in their last bits from three layers per block on).
#[test]
fn dense_layers_as_regions_give_the_gradients_of_plain_autodiff() {
    let _generator = generator();
    let device = Device::flex().autodiff();
    for depth in [22, 40] {
        device.seed(3);
        let model = initialised(DenseNet::new(depth, 4, 3, 10, &device));
        let images = Tensor::<4>::random([2, 3, 8, 8], Distribution::Default, &device);
        let grads = |cut| {
            let loss = model.forward(images.clone(), cut).powf_scalar(2.0).mean();
            param_grads(&model, &loss.backward())
        };
        let plain = grads(Cut::None);
        // Every weight's (batch norm's running statistics have none).
        assert_eq!(
            plain.iter().flatten().count(),
            6 * (depth - 4) / 2 + 3 * 2 + 2 + 3
        );
        assert!(
            grads(Cut::Regions) == plain,
            "DenseNet-BC-{depth}, every layer a region"
        );
        assert!(
            grads(Cut::EverySecond) == plain,
            "DenseNet-BC-{depth}, every second layer"
        );
    }
}

/// The GPT (pre-LayerNorm blocks of causal self-attention and a GELU MLP, the token and
/// position embeddings before them), its attention without dropout: a region per block gives
/// plain autodiff's gradients. (With dropout the regions are seeded: other masks, by design.)
#[test]
fn gpt_blocks_as_regions_give_the_gradients_of_plain_autodiff() {
    let _generator = generator();
    let device = Device::flex().autodiff();
    device.seed(5);
    let model = initialised(Gpt::new(64, 32, 2, 2, 16, 0.0, &device));
    let tokens = Tensor::<2, Int>::random([2, 17], Distribution::Uniform(0.0, 64.0), &device);
    let grads = |cut| param_grads(&model, &model.loss(tokens.clone(), cut).backward());
    let plain = grads(Cut::None);
    assert_eq!(plain.iter().flatten().count(), 2 + 2 * 16 + 3);
    assert!(grads(Cut::Regions) == plain, "every block a region");
    assert!(grads(Cut::EverySecond) == plain, "every second block");
    assert!(
        grads(Cut::RegionsKeepAttention) == plain,
        "every block a region keeping its attention by name"
    );
    // The attention written out op for op (its projections regions of their own), against
    // burn-nn's `forward` in the plain run.
    assert!(
        grads(Cut::RegionsKeepProjections) == plain,
        "every block a region keeping its attention's projections by name"
    );
}

/// A recurrent model (Burn's modern-lstm: a layer-normalised LSTM cell, two layers, both
/// directions), each cell call a region: the state passes from one region to the next, every
/// region of a layer shares its cell's weights. The input's gradient is plain autodiff's bit for
/// bit; a shared weight's is the sum of one term per region, which plain autodiff adds in the
/// order its graph walk meets the ops using the weight, and regions in the order they run
/// (latest step first): where the two orders differ (a weight used by an op whose depth does not
/// grow with the step, `weight_ih` and `norm_x` of the first layer) the sums differ in their last
/// bits (docs/burn-0.22-internals.md, "Many regions, and recurrent models").
#[test]
fn recurrent_cells_as_regions_give_the_gradients_of_plain_autodiff() {
    let _generator = generator();
    let device = Device::flex().autodiff();
    for (layers, bidirectional) in [(1, false), (2, true)] {
        let (model, x) = recurrent_network(layers, bidirectional, &device);
        let grads = |cut| {
            let loss = model.forward(x.clone(), cut).powf_scalar(2.0).mean();
            let grads = loss.backward();
            (param_grads(&model, &grads), grad_of(&x, &grads))
        };
        let (plain, plain_x) = grads(Cut::None);
        let (regions, regions_x) = grads(Cut::Regions);
        let what = format!("{layers} layers, bidirectional {bidirectional}");
        assert!(
            plain_x.is_some() && plain_x == regions_x,
            "{what}: the input"
        );
        assert_eq!(plain.len(), regions.len());
        for (index, (plain, regions)) in plain.into_iter().zip(regions).enumerate() {
            assert!(plain.is_some(), "{what}: parameter {index} has a gradient");
            assert_close(plain, regions, &format!("{what}: parameter {index}"));
        }
    }
}

/// modern-lstm's network of `layers` layers (both directions if `bidirectional`), seeded, and a
/// batch of sequences requiring a gradient: what both recurrent tests compare on.
fn recurrent_network(
    layers: usize,
    bidirectional: bool,
    device: &Device,
) -> (LstmNetwork, Tensor<3>) {
    device.seed(5);
    let model = initialised(LstmNetwork::new(
        3,
        8,
        layers,
        bidirectional,
        0.0,
        1,
        device,
    ));
    let x = LstmNetwork::sequences(4, 12, 3, device).require_grad();
    (model, x)
}

/// The same network with each direction one checkpointed scan over the sequence (every step and
/// layer one region node): the input's gradient bit for bit under every schedule, each weight's
/// as with a region per cell call — bit for bit where its op is one step deeper each step, in
/// its last bits where it reads the input sequence (plain autodiff adds those terms first step
/// first; the scan, as the regions, last step first).
#[test]
fn the_recurrent_network_as_scans_gives_the_gradients_of_plain_autodiff() {
    let _generator = generator();
    let device = Device::flex().autodiff();
    for (layers, bidirectional) in [(1, false), (2, true)] {
        let (model, x) = recurrent_network(layers, bidirectional, &device);
        let grads = |schedule: Option<Schedule>| {
            let output = match schedule {
                None => model.forward(x.clone(), Cut::None),
                Some(schedule) => model.forward_scan(x.clone(), schedule),
            };
            let loss = output.powf_scalar(2.0).mean();
            let grads = loss.backward();
            (
                loss.into_data(),
                param_grads(&model, &grads),
                grad_of(&x, &grads),
            )
        };
        let (plain_loss, plain, plain_x) = grads(None);
        for schedule in [Schedule::EveryStep, Schedule::Snapshots(3)] {
            let (loss, scan, scan_x) = grads(Some(schedule));
            let what = format!("{layers} layers, bidirectional {bidirectional}, {schedule:?}");
            assert_eq!(loss, plain_loss, "{what}: the loss");
            assert!(plain_x.is_some() && plain_x == scan_x, "{what}: the input");
            assert_eq!(plain.len(), scan.len());
            let mut bitwise = 0;
            for (index, (plain, scan)) in plain.iter().zip(scan).enumerate() {
                assert!(plain.is_some(), "{what}: parameter {index} has a gradient");
                bitwise += usize::from(*plain == scan);
                assert_close(plain.clone(), scan, &format!("{what}: parameter {index}"));
            }
            println!("{what}: {bitwise} of {} weights bit for bit", plain.len());
        }
    }
}

/// Every float parameter's gradient with its path in the module (`forward.layers.0.weight_hh.
/// weight`), in visit order.
fn named_param_grads(
    module: &impl burn::module::Module,
    grads: &burn::tensor::Gradients,
) -> Vec<(String, Option<burn::tensor::TensorData>)> {
    use burn::module::{ModuleVisitor, Param};

    struct Named<'a> {
        grads: &'a burn::tensor::Gradients,
        path: Vec<String>,
        found: Vec<(String, Option<burn::tensor::TensorData>)>,
    }

    impl ModuleVisitor for Named<'_> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.path.push(name.to_string());
        }

        fn exit_module(&mut self, _: &str, _: &str) {
            self.path.pop();
        }

        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let grad = param.val().grad(self.grads).map(|g| g.into_data());
            let path = self.path.iter().filter(|p| !p.is_empty()).cloned();
            self.found.push((path.collect::<Vec<_>>().join("."), grad));
        }
    }

    let mut named = Named {
        grads,
        path: Vec::new(),
        found: Vec::new(),
    };
    module.visit(&mut named);
    named.found
}

/// The largest difference between two gradients, relative to the plain one's largest value.
fn relative_difference(plain: &burn::tensor::TensorData, other: &burn::tensor::TensorData) -> f32 {
    let (plain, other) = (
        plain.try_to_vec::<f32>().unwrap(),
        other.try_to_vec::<f32>().unwrap(),
    );
    let scale = plain.iter().fold(f32::MIN_POSITIVE, |m, v| m.max(v.abs()));
    let differences = plain.iter().zip(&other).map(|(a, b)| (a - b).abs() / scale);
    differences.fold(0.0, f32::max)
}

/// What docs/burn-0.22-scan.md ("What is exact") says, measured on modern-lstm's network: with
/// one layer in one direction, two stacked, two in both directions, a loss on the head (the last
/// step) or on every step's output, which parameters a scan gives bit for bit and how far the
/// others are — and how far apart training through the loop and through the scan drift (8 SGD
/// steps). Prints the figures the page quotes; asserts the loss and the input bit for bit, every
/// parameter within 1e-6 of the loop's.
#[test]
fn which_parameters_a_scan_gives_bit_for_bit_on_stacked_and_bidirectional_networks() {
    let _generator = generator();
    let device = Device::flex().autodiff();
    for (layers, bidirectional) in [(1, false), (2, false), (2, true)] {
        for every_step in [false, true] {
            let (model, x) = recurrent_network(layers, bidirectional, &device);
            let loss = |scan: bool| {
                let stack = |stack: &burn_checkpoint_22_models::lstm::StackedLstm, x| match scan {
                    true => stack.forward_scan(x, Schedule::EveryStep),
                    false => stack.forward(x, Cut::None),
                };
                match every_step {
                    // The forward stack's every output (the reverse one's too).
                    true => {
                        let mut loss = stack(&model.forward, x.clone()).powf_scalar(2.0).mean();
                        if let Some(reverse) = &model.reverse {
                            loss =
                                loss + stack(reverse, x.clone().flip([1])).powf_scalar(2.0).mean();
                        }
                        loss
                    }
                    false => match scan {
                        true => model.forward_scan(x.clone(), Schedule::EveryStep),
                        false => model.forward(x.clone(), Cut::None),
                    }
                    .powf_scalar(2.0)
                    .mean(),
                }
            };
            let (plain, scan) = (loss(false), loss(true));
            let (plain_grads, scan_grads) = (plain.backward(), scan.backward());
            let what = format!(
                "{layers} layer(s), {}, loss on {}",
                if bidirectional {
                    "both directions"
                } else {
                    "one direction"
                },
                if every_step { "every step" } else { "the head" }
            );
            assert_eq!(plain.into_data(), scan.into_data(), "{what}: the loss");
            let x_grads = (grad_of(&x, &plain_grads), grad_of(&x, &scan_grads));
            assert!(
                x_grads.0.is_some() && x_grads.0 == x_grads.1,
                "{what}: the input"
            );
            let plain = named_param_grads(&model, &plain_grads);
            let scan = named_param_grads(&model, &scan_grads);
            let (mut bitwise, mut reached, mut off) = (0, 0, Vec::new());
            for ((name, plain), (_, scan)) in plain.iter().zip(&scan) {
                let (Some(plain), Some(scan)) = (plain, scan) else {
                    assert_eq!(plain.is_some(), scan.is_some(), "{what}: {name}");
                    continue;
                };
                reached += 1;
                if plain == scan {
                    bitwise += 1;
                    continue;
                }
                let difference = relative_difference(plain, scan);
                assert!(difference <= 1e-6, "{what}: {name} off by {difference:.1e}");
                off.push(format!("{name} {difference:.1e}"));
            }
            println!(
                "{what}: {bitwise} of {reached} bit for bit; off: {}",
                off.join(", ")
            );
        }
    }
    // Training through the scan is not training through the loop bit for bit: the parameters'
    // last bits differ after a step, and Adam (which divides each gradient by its running size)
    // carries the difference into the weights.
    let (plain_model, x) = recurrent_network(2, false, &device);
    let (scan_model, _) = recurrent_network(2, false, &device);
    let train = |model: LstmNetwork, scan: bool| {
        let mut adam = Adam::default();
        (0..8).fold(model, |model, _| {
            let output = match scan {
                true => model.forward_scan(x.clone(), Schedule::EveryStep),
                false => model.forward(x.clone(), Cut::None),
            };
            let grads = output.powf_scalar(2.0).mean().backward();
            adam.step(model, &grads)
        })
    };
    let (plain_model, scan_model) = (train(plain_model, false), train(scan_model, true));
    let largest = weights(&plain_model)
        .iter()
        .zip(weights(&scan_model))
        .map(|(plain, scan)| relative_difference(plain, &scan))
        .fold(0.0, f32::max);
    println!("2 layers, one direction, 8 Adam steps: weights {largest:.1e} apart (relative)");
    assert!(largest <= 1e-4, "the runs drifted {largest:.1e} apart");
}

/// Every float parameter's value, in visit order.
fn weights(module: &impl burn::module::Module) -> Vec<burn::tensor::TensorData> {
    use burn::module::{ModuleVisitor, Param};

    struct Values(Vec<burn::tensor::TensorData>);

    impl ModuleVisitor for Values {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.val().into_data());
        }
    }

    let mut values = Values(Vec::new());
    module.visit(&mut values);
    values.0
}

/// Adam (lr 1e-3, β 0.9 and 0.999, ε 1e-8), each parameter's moments kept by its id.
#[derive(Default)]
struct Adam {
    moments: std::collections::HashMap<burn::module::ParamId, (Tensor<1>, Tensor<1>)>,
    steps: i32,
}

impl Adam {
    fn step<M: burn::module::Module>(&mut self, module: M, grads: &burn::tensor::Gradients) -> M {
        use burn::module::{ModuleMapper, Param};

        struct Step<'a>(&'a mut Adam, &'a burn::tensor::Gradients);

        impl ModuleMapper for Step<'_> {
            fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
                let Some(grad) = param.val().grad(self.1) else {
                    return param;
                };
                let (adam, shape) = (&mut *self.0, grad.dims());
                let grad: Tensor<1> = grad.flatten(0, D - 1);
                let zeros = || (grad.zeros_like(), grad.zeros_like());
                let (m, v) = adam.moments.remove(&param.id).unwrap_or_else(zeros);
                let m = m * 0.9 + grad.clone() * 0.1;
                let v = v * 0.999 + grad.powf_scalar(2.0) * 0.001;
                let t = adam.steps + 1;
                let m_hat = m.clone() / (1.0 - 0.9f64.powi(t));
                let v_hat = v.clone() / (1.0 - 0.999f64.powi(t));
                let update: Tensor<D> = (m_hat / (v_hat.sqrt() + 1e-8) * 1e-3).reshape(shape);
                adam.moments.insert(param.id, (m, v));
                param.map(|value| (value - update).detach().require_grad())
            }
        }

        let module = module.map(&mut Step(self, grads));
        self.steps += 1;
        module
    }
}
