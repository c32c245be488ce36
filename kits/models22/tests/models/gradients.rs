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
