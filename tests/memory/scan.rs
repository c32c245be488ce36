//! `Region::scan` on an LSTM-like cell (the carry `(h, c)`, the output `h`): what a step holds
//! after forward and its peak, the loop written out on plain `Autodiff` against a scan storing
//! every carry and one storing √T of them; the gradients bitwise equal to plain autodiff's.
//!
//! Runs alone (`common::alone`): the allocator counts every thread of the process.

use crate::common;

use burn::tensor::activation::sigmoid;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_checkpoint::{Region, Schedule};
use burn_checkpoint_core::memory::mib;
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

use crate::measured::{Measured, measured};

const STEPS: usize = 36;
const WIDTH: usize = 64;
const BATCH: usize = 256;

type Carry<B> = (Tensor<B, 2>, Tensor<B, 2>);

/// One LSTM step: gates from `[h, x]·W`, the new cell and hidden states; the output is `h`.
fn lstm_step<B: AutodiffBackend>(
    w: &Tensor<B, 2>,
    (h, c): Carry<B>,
    x: Tensor<B, 2>,
) -> (Tensor<B, 2>, Carry<B>) {
    let gates = Tensor::cat(vec![h, x], 1).matmul(w.clone());
    let [i, f, o, g] = gates.chunk(4, 1).try_into().expect("four gates");
    let c = sigmoid(f) * c + sigmoid(i) * g.tanh();
    let h = sigmoid(o) * c.clone().tanh();
    (h.clone(), (h, c))
}

fn step<B: AutodiffBackend>(
    w: &TensorData,
    xs: &TensorData,
    schedule: Option<Schedule>,
) -> Measured {
    let device = Default::default();
    let w = Tensor::<B, 2>::from_data(w.clone(), &device).require_grad();
    let xs = Tensor::<B, 3>::from_data(xs.clone(), &device).require_grad();
    let init: Carry<B> = (
        Tensor::zeros([BATCH, WIDTH], &device),
        Tensor::zeros([BATCH, WIDTH], &device),
    );
    measured(
        || {
            let (hs, _) = match schedule {
                Some(schedule) => Region::named("lstm").schedule(schedule).scan(
                    &w,
                    init,
                    xs.clone(),
                    1,
                    |w, carry, x: Tensor<B, 2>| lstm_step(w, carry, x),
                ),
                None => {
                    let (mut carry, mut hs) = (init, Vec::new());
                    for t in 0..STEPS {
                        let x = xs.clone().narrow(1, t, 1).squeeze_dim::<2>(1);
                        let (h, next) = lstm_step(&w, carry, x);
                        hs.push(h);
                        carry = next;
                    }
                    (Tensor::stack(hs, 1), carry)
                }
            };
            hs.powf_scalar(2.0).mean()
        },
        |grads| {
            vec![
                values(w.grad(grads).expect("the weight's gradient")),
                values(xs.grad(grads).expect("the sequence's gradient")),
            ]
        },
    )
}

#[test]
fn a_scan_holds_its_carries_and_outputs_not_the_steps_internals() {
    let _alone = common::alone();
    let scale = (1.0 / (2 * WIDTH) as f32).sqrt();
    let w: Vec<f32> = data([2 * WIDTH, 4 * WIDTH], 7)
        .iter::<f32>()
        .map(|v| v * scale)
        .collect();
    let w = TensorData::new(w, [2 * WIDTH, 4 * WIDTH]);
    let xs = data([BATCH, STEPS, WIDTH], 8);
    // Warm-up: thread pools and caches allocate once.
    step::<Plain>(&w, &xs, None);
    step::<Ckpt>(&w, &xs, Some(Schedule::EveryStep));

    let plain = step::<Plain>(&w, &xs, None);
    let every = step::<Ckpt>(&w, &xs, Some(Schedule::EveryStep));
    let sqrt = step::<Ckpt>(&w, &xs, Some(Schedule::Snapshots(5)));
    let activation = BATCH * WIDTH * 4;
    println!(
        "an LSTM step (width {WIDTH}, batch {BATCH}) over {STEPS} steps; one [batch, width] \
         activation = {:.3} MiB",
        mib(activation)
    );
    println!("| method | held after forward | activations a step | peak |");
    println!("|---|---|---|---|");
    for (name, m) in [
        ("the loop on plain Autodiff", &plain),
        ("a scan, `EveryStep`", &every),
        ("a scan, `Snapshots(5)` (6 regions of 6 steps)", &sqrt),
    ] {
        println!(
            "| {name} | {:.2} MiB | {:.1} | {:.2} MiB |",
            mib(m.held),
            m.held as f64 / (activation * STEPS) as f64,
            mib(m.peak)
        );
    }
    for (name, m) in [("EveryStep", &every), ("Snapshots(5)", &sqrt)] {
        for (i, (a, b)) in plain.grads.iter().zip(&m.grads).enumerate() {
            assert_values_bitwise(&format!("{name}: gradient {i}"), a, b);
        }
    }
    // Plain autodiff holds every gate of every step; the scan its carries (and outputs).
    assert!(
        every.held * 3 < plain.held,
        "EveryStep held {:.2} MiB, plain {:.2} MiB",
        mib(every.held),
        mib(plain.held)
    );
    assert!(
        sqrt.held < every.held,
        "Snapshots(5) held {:.2} MiB, EveryStep {:.2} MiB",
        mib(sqrt.held),
        mib(every.held)
    );
    assert!(every.peak < plain.peak && sqrt.peak < plain.peak);
}
